//! The FleetLock client (the `fleet_lock` strategy): `pre-reboot` takes a reboot slot before an
//! update drains or reboots the node, `steady-state` gives it back once the node is in its new
//! config. The protocol is Zincati's ([`machine_config::fleetlock`]); any server speaking it
//! works (`mco-companion`, airlock, Typhoon's fleetlock).

use std::path::Path;

use anyhow::{Context, Result};
use machine_config::fleetlock::{
    self, ErrorBody, HEADER, HEADER_VALUE, PRE_REBOOT_PATH, Request, STEADY_STATE_PATH,
};

use crate::input::served::{check_scheme, http_client};

/// A FleetLock server, as one client (`id`) of one group.
pub struct FleetLockClient {
    client: reqwest::Client,
    base: String,
    request: Request,
}

/// What the server said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockAnswer {
    /// 200: done (the slot is held, or no longer held).
    Ok,
    /// Any other answer: refused or failed, with the protocol's `kind` when the body had one,
    /// and a message for people.
    Refused {
        kind: Option<String>,
        message: String,
    },
}

impl FleetLockClient {
    /// `base`: the server's base URL (the endpoints are under it); `ca`, `identity`: as for the
    /// config server. `group` is checked against the protocol's rule here, so a bad one stops
    /// `start` instead of every request failing.
    pub fn new(
        base: &str,
        ca: Option<&Path>,
        identity: Option<&Path>,
        insecure_http: bool,
        id: &str,
        group: &str,
    ) -> Result<Self> {
        let base = base.trim_end_matches('/').to_string();
        check_scheme(&base, insecure_http)?;
        fleetlock::check_group(group).map_err(|e| anyhow::anyhow!("--fleet-lock-group: {e}"))?;
        anyhow::ensure!(!id.is_empty(), "--fleet-lock-id: the client id is empty");
        Ok(FleetLockClient {
            client: http_client(&base, ca, identity)?,
            base,
            request: Request::new(id, group),
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn id(&self) -> &str {
        &self.request.client_params.id
    }

    pub fn group(&self) -> &str {
        &self.request.client_params.group
    }

    /// `RecursiveLock`: take (or keep) a reboot slot.
    pub async fn pre_reboot(&self) -> Result<LockAnswer> {
        self.post(PRE_REBOOT_PATH).await
    }

    /// `UnlockIfHeld`: give back the slot this client holds, if any.
    pub async fn steady_state(&self) -> Result<LockAnswer> {
        self.post(STEADY_STATE_PATH).await
    }

    /// `Err` when no answer came (unreachable, TLS); an answer other than 200 is
    /// [`LockAnswer::Refused`].
    async fn post(&self, path: &str) -> Result<LockAnswer> {
        let url = format!("{}{path}", self.base);
        let response = self
            .client
            .post(&url)
            .header(HEADER, HEADER_VALUE)
            .json(&self.request)
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        let status = response.status();
        if status == reqwest::StatusCode::OK {
            return Ok(LockAnswer::Ok);
        }
        let body = response.bytes().await.unwrap_or_default();
        Ok(match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => LockAnswer::Refused {
                kind: Some(e.kind),
                message: format!("{url} answered {status}: {}", e.value),
            },
            Err(_) => LockAnswer::Refused {
                kind: None,
                message: format!(
                    "{url} answered {status}: {}",
                    String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
                ),
            },
        })
    }
}
