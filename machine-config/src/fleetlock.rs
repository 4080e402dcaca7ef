//! The FleetLock protocol (Zincati's reboot coordination): what a client sends and what a
//! server answers, shared by the agent's client and the companion's server.
//!
//! A counting semaphore per reboot group with owned, recursive locks: `POST
//! {base}/v1/pre-reboot` takes a slot for the client (again: still one slot), `POST
//! {base}/v1/steady-state` gives back the client's slot if it holds one. Every request carries
//! the header `fleet-lock-protocol: true` and a body `{"client_params": {"id": …, "group": …}}`;
//! 200 is success, anything else a failure, ideally with a body `{"kind": …, "value": …}` whose
//! `kind` comes from a small fixed set.

use serde::{Deserialize, Serialize};

/// The header every request carries, with the value [`HEADER_VALUE`], so that a redirected
/// or accidental POST is never taken for a lock request.
pub const HEADER: &str = "fleet-lock-protocol";
pub const HEADER_VALUE: &str = "true";
/// Take (or keep) a reboot slot.
pub const PRE_REBOOT_PATH: &str = "/v1/pre-reboot";
/// Give back the reboot slot held, if any.
pub const STEADY_STATE_PATH: &str = "/v1/steady-state";
/// The group a client is in unless configured (Zincati's default).
pub const DEFAULT_GROUP: &str = "default";

/// A request's body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub client_params: ClientParams,
}

/// Who asks: the lock holder's identity and its reboot group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientParams {
    /// Case-sensitive, non-empty; the owner of a slot.
    pub id: String,
    /// Non-empty, `^[a-zA-Z0-9.-]+$`.
    pub group: String,
}

impl Request {
    pub fn new(id: &str, group: &str) -> Self {
        Request {
            client_params: ClientParams {
                id: id.to_string(),
                group: group.to_string(),
            },
        }
    }

    /// Parses and checks a request body; the error says what is wrong (for a
    /// [`kind::INVALID_REQUEST`] answer).
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let req: Request =
            serde_json::from_slice(body).map_err(|e| format!("malformed request body: {e}"))?;
        req.client_params.check()?;
        Ok(req)
    }
}

impl ClientParams {
    /// The protocol's rules for `id` and `group`.
    pub fn check(&self) -> Result<(), String> {
        if self.id.is_empty() {
            return Err("client_params.id is empty".to_string());
        }
        check_group(&self.group)
    }
}

/// A group name must be non-empty and only ASCII letters, digits, `.` and `-`.
pub fn check_group(group: &str) -> Result<(), String> {
    if group.is_empty() {
        return Err("client_params.group is empty".to_string());
    }
    if let Some(c) = group
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '-'))
    {
        return Err(format!(
            "client_params.group {group:?} has {c:?}: only ASCII letters, digits, '.' and '-' are allowed"
        ));
    }
    Ok(())
}

/// An error answer's body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// One of [`kind`]'s values (bounded, for metrics).
    pub kind: String,
    /// For people.
    pub value: String,
}

impl ErrorBody {
    pub fn new(kind: &str, value: impl Into<String>) -> Self {
        ErrorBody {
            kind: kind.to_string(),
            value: value.into(),
        }
    }
}

/// The error kinds the companion answers with (`failed_lock_semaphore_full` is the protocol
/// document's own example; the others follow its naming).
pub mod kind {
    /// Every slot of the group is held by other clients (409).
    pub const SEMAPHORE_FULL: &str = "failed_lock_semaphore_full";
    /// The `fleet-lock-protocol: true` header is missing or has another value (400).
    pub const MISSING_HEADER: &str = "invalid_missing_protocol_header";
    /// The body is not a valid request (400).
    pub const INVALID_REQUEST: &str = "invalid_client_params";
    /// The server could not read or store the semaphore (500), or a concurrent change won
    /// and the client should retry (503).
    pub const BACKEND: &str = "failed_semaphore_backend";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_parsed_and_checked() {
        // (body, Ok((id, group)) or Err(part of the message))
        type Row<'a> = (&'a str, Result<(&'a str, &'a str), &'a str>);
        let rows: &[Row] = &[
            (
                r#"{"client_params":{"id":"node-a","group":"workers"}}"#,
                Ok(("node-a", "workers")),
            ),
            (
                r#"{"client_params":{"group":"w.1-b","id":"C988"}}"#,
                Ok(("C988", "w.1-b")),
            ),
            (
                r#"{"client_params":{"id":"","group":"workers"}}"#,
                Err("client_params.id is empty"),
            ),
            (
                r#"{"client_params":{"id":"a","group":""}}"#,
                Err("client_params.group is empty"),
            ),
            (
                r#"{"client_params":{"id":"a","group":"work ers"}}"#,
                Err("has ' ': only ASCII"),
            ),
            (
                r#"{"client_params":{"id":"a","group":"wörk"}}"#,
                Err("has 'ö'"),
            ),
            (
                r#"{"client_params":{"id":"a"}}"#,
                Err("missing field `group`"),
            ),
            (r#"{}"#, Err("missing field `client_params`")),
            ("not json", Err("malformed request body")),
        ];
        for (body, want) in rows {
            let got = Request::parse(body.as_bytes());
            match (want, got) {
                (Ok((id, group)), Ok(r)) => {
                    assert_eq!(
                        (r.client_params.id.as_str(), r.client_params.group.as_str()),
                        (*id, *group)
                    )
                }
                (Err(part), Err(e)) => assert!(e.contains(part), "{body}: {e}"),
                (want, got) => panic!("{body}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn bodies_have_the_documented_shape() {
        assert_eq!(
            serde_json::to_string(&Request::new("n1", "default")).unwrap(),
            r#"{"client_params":{"id":"n1","group":"default"}}"#
        );
        assert_eq!(
            serde_json::to_string(&ErrorBody::new(kind::SEMAPHORE_FULL, "full")).unwrap(),
            r#"{"kind":"failed_lock_semaphore_full","value":"full"}"#
        );
    }
}
