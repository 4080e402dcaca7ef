//! Times in `status -o json|yaml` as RFC 3339 (UTC, milliseconds), as `kubectl` prints them:
//! the status file and the update record keep Unix milliseconds, which people cannot read and
//! tools must convert; the conversion happens here, on output only.

use std::time::{Duration, UNIX_EPOCH};

use serde::{Serialize, Serializer};

use crate::engine::report::{LastError, LastUpdate};

/// Unix milliseconds as RFC 3339.
pub fn text(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

pub fn rfc3339<S: Serializer>(ms: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&text(*ms))
}

pub fn rfc3339_opt<S: Serializer>(ms: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    ms.map(text).serialize(s)
}

/// [`LastUpdate`] with its times as RFC 3339 (`started`, `ended`); the duration stays in
/// milliseconds.
pub fn last_update<S: Serializer>(u: &Option<LastUpdate>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Out<'a> {
        from: &'a str,
        to: &'a str,
        started: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        ended: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        result: &'a str,
        reboot: bool,
    }
    u.as_ref()
        .map(|u| Out {
            from: &u.from,
            to: &u.to,
            started: text(u.started_ms),
            ended: u.ended_ms.map(text),
            duration_ms: u.duration_ms,
            result: &u.result,
            reboot: u.reboot,
        })
        .serialize(s)
}

/// [`LastError`] with its time as RFC 3339 (`at`).
pub fn last_error<S: Serializer>(e: &Option<LastError>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Out<'a> {
        what: &'a str,
        message: &'a str,
        at: String,
    }
    e.as_ref()
        .map(|e| Out {
            what: &e.what,
            message: &e.message,
            at: text(e.at_ms),
        })
        .serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_milliseconds_read_as_rfc3339() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_795_845_591_317, "2026-11-28T05:59:51.317Z"),
        ];
        for (ms, want) in cases {
            assert_eq!(text(ms), want, "{ms}");
            assert!(humantime::parse_rfc3339(want).is_ok(), "{want}");
        }
    }
}
