//! Ignition spec negotiation from the `Accept` header, exactly as the machine-config-server does
//! it (`detectSpecVersionFromAcceptHeader`):
//!
//! - the header is split on `,` into media ranges; a range without `/` is ignored; of the
//!   parameters only the first valid `version=` (a `X.Y.Z[-pre][+meta]` semver) and the first
//!   valid `q=` (default 1) are kept; ranges are sorted by q, highest first, keeping header order
//!   among equals;
//! - the first range whose subtype is `vnd.coreos.ignition+json` and which carries a version
//!   decides: 2.x with x ≥ 2 → 2.2.0; a supported minor (2.2, 3.0–3.5, any patch or pre-release)
//!   → that minor; 3.y with y > 5 → 3.5.0; anything else (4.x, 1.x, 2.0, 2.1...) → error (HTTP 400);
//! - no such range (header absent, unparsable, `*/*` only, Ignition without version) → 2.2.0.

use machine_config::SpecVersion;
use machine_config::downtranslate::NEWEST;

const IGNITION_SUBTYPE: &str = "vnd.coreos.ignition+json";

/// The Accept header asked for an Ignition spec the server cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported Ignition version in Accept header: {header}")]
pub struct UnsupportedVersion {
    /// The whole header, as received.
    pub header: String,
}

/// A semantic version as Go's `coreos/go-semver` parses it (leading zeros and `+` signs allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoSemver {
    /// Major version.
    pub major: i64,
    /// Minor version.
    pub minor: i64,
    /// Patch version.
    pub patch: i64,
    /// Pre-release identifiers, empty when none.
    pub pre_release: String,
}

impl GoSemver {
    /// Parses `X.Y.Z[-pre][+meta]`; `None` when go-semver would reject it.
    pub fn parse(text: &str) -> Option<GoSemver> {
        let (rest, metadata) = split_off(text, '+');
        let (core, pre_release) = split_off(rest, '-');
        if !valid_identifiers(pre_release) || !valid_identifiers(metadata) {
            return None;
        }
        let mut parts = core.splitn(3, '.');
        let mut number = || parts.next().and_then(parse_go_int);
        let (major, minor, patch) = (number()?, number()?, number()?);
        Some(GoSemver {
            major,
            minor,
            patch,
            pre_release: pre_release.to_string(),
        })
    }
}

/// Like Go's `strings.SplitN(s, sep, 2)` keeping the tail empty when absent.
fn split_off(text: &str, sep: char) -> (&str, &str) {
    match text.split_once(sep) {
        Some((head, tail)) => (head, tail),
        None => (text, ""),
    }
}

/// go-semver's identifier rule: `^[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*$`, or empty.
fn valid_identifiers(text: &str) -> bool {
    text.is_empty()
        || text
            .split('.')
            .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

/// Go's `strconv.ParseInt(s, 10, 64)`: optional sign, decimal digits, leading zeros allowed.
fn parse_go_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    let unsigned = digits.strip_prefix('-').unwrap_or(digits);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One media range of an Accept header, reduced to what negotiation looks at.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaRange {
    /// Main type (`application`).
    pub media_type: String,
    /// Subtype (`vnd.coreos.ignition+json`).
    pub subtype: String,
    /// The `version=` parameter, if valid.
    pub version: Option<GoSemver>,
    /// The `q=` parameter, 1 when absent or invalid.
    pub q: f32,
}

/// Parses an Accept header into media ranges sorted by q, highest first (stable).
pub fn parse_accept(header: &str) -> Vec<MediaRange> {
    let mut ranges = Vec::new();
    for value in header.split(',') {
        let mut parts = value.trim().split(';').map(str::trim);
        let Some((media_type, subtype)) = parts.next().and_then(|m| m.split_once('/')) else {
            continue;
        };
        let mut version = None;
        let mut q = None;
        for param in parts {
            let Some((key, val)) = param.split_once('=') else {
                continue;
            };
            if key == "version" && version.is_none() {
                version = GoSemver::parse(val);
            } else if key == "q" && q.is_none() {
                q = val.parse::<f32>().ok();
            }
        }
        ranges.push(MediaRange {
            media_type: media_type.to_string(),
            subtype: subtype.to_string(),
            version,
            q: q.unwrap_or(1.0),
        });
    }
    ranges.sort_by(|a, b| b.q.partial_cmp(&a.q).unwrap_or(std::cmp::Ordering::Equal));
    ranges
}

/// The spec to serve for this Accept header (`None` = header absent).
pub fn negotiate(accept: Option<&str>) -> Result<SpecVersion, UnsupportedVersion> {
    let header = accept.unwrap_or("");
    for range in parse_accept(header) {
        let Some(version) = range.version.filter(|_| range.subtype == IGNITION_SUBTYPE) else {
            continue;
        };
        let (major, minor) = (version.major, version.minor);
        if major == 2 && minor >= 2 {
            return Ok(SpecVersion::V2_2);
        }
        let known = u64::try_from(major)
            .ok()
            .zip(u64::try_from(minor).ok())
            .and_then(|(major, minor)| SpecVersion::from_major_minor(major, minor));
        if let Some(spec) = known {
            return Ok(spec);
        }
        let (newest_major, newest_minor) = NEWEST.major_minor();
        if u64::try_from(major) == Ok(newest_major)
            && u64::try_from(minor).is_ok_and(|m| m > newest_minor)
        {
            return Ok(NEWEST);
        }
        return Err(UnsupportedVersion {
            header: header.to_string(),
        });
    }
    Ok(SpecVersion::V2_2)
}

#[cfg(test)]
mod tests;
