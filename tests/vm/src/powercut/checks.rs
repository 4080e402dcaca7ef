//! What must hold after a power cut (before the agent runs again) and once the node converged,
//! checked on the state read from inside the guest ([`GuestState`]).
//!
//! After a cut, during an update from `from` to `to`:
//! - the update record and `currentconfig` name those two configs, and say which files may be
//!   in which version: no record: all in `currentconfig`'s; `Draining`: all in `from`'s (nothing
//!   written yet); `Writing` / `RollingBack`: each file in one of the two; any later step: all in
//!   `to`'s (the writes were durable before the step was recorded);
//! - every managed file, core's keys, the unit file and `/etc/shadow` is byte for byte one of
//!   its two versions (never empty, short, torn, or a third thing), with its mode and owner;
//! - the original of the vendor file, once backed up, is the original (never empty);
//! - the booted OS is one of the two planned ones, whole: commit and kernel argument of the same
//!   side, the argument once (never a half-applied OS), and the side `currentconfig` says when
//!   no update is recorded.
//!
//! Converged: all of the above in `to`'s version, no record, `currentconfig` and the status file
//! on `to`, the unit enabled, no temp file of an interrupted write anywhere.

use sha2::{Digest, Sha256};

use super::configs::{
    CHECKED_FILES, KARG, KEYS_FILE, PULL_SECRET, Side, UNIT_FILE, VENDOR_FILE, Version,
    vendor_original,
};
use super::guest::{Found, GuestState, VENDOR_ORIG};

/// What a cut left, for the checks that come after the recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfterCut {
    /// The step recorded in the update record (`None`: no record).
    pub step: Option<String>,
    /// The OS side the boot after the cut runs.
    pub booted: Side,
}

/// The config names in a record or `currentconfig` document.
fn name_of(doc: &serde_json::Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or("?")
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Mode and owner each checked file has in every version.
fn mode_owner(path: &str) -> &'static str {
    match path {
        KEYS_FILE => "600 core",
        PULL_SECRET => "600 root",
        _ => "644 root",
    }
}

fn describe(found: &Option<Found>) -> String {
    match found {
        None => "absent".into(),
        Some(f) => format!(
            "{} bytes ({}), {:?}...",
            f.size,
            f.mode_owner,
            String::from_utf8_lossy(&f.head)
        ),
    }
}

/// Whether `found` is exactly `want` (`None`: absent).
fn is(found: &Option<Found>, want: &Option<Vec<u8>>, path: &str) -> bool {
    match (found, want) {
        (None, None) => true,
        (Some(f), Some(w)) => {
            f.size == w.len() as u64
                && f.sha256 == sha256_hex(w)
                && f.mode_owner == mode_owner(path)
        }
        _ => false,
    }
}

/// What the backup of the vendor file's original must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Orig {
    /// Side b's version is in place: the original is kept, whole.
    Kept,
    /// Side a: the original was put back, the backup is gone.
    Gone,
    /// Mid-update: absent, or whole.
    Either,
}

impl Orig {
    fn of(versions: &[Version]) -> Orig {
        if versions.iter().all(|v| v.side == Side::B) {
            Orig::Kept
        } else if versions.iter().all(|v| v.side == Side::A) {
            Orig::Gone
        } else {
            Orig::Either
        }
    }
}

/// Checks the files against `versions` (each file must be one of them) and the vendor file's
/// backup against `orig`; problems go to `out`.
fn check_files(
    state: &GuestState,
    baseline: &str,
    versions: &[Version],
    orig: Orig,
    out: &mut Vec<String>,
) {
    for path in CHECKED_FILES {
        let found = state.files.get(*path).cloned().flatten();
        if !versions.iter().any(|v| is(&found, &v.file(path), path)) {
            let names: Vec<String> = versions.iter().map(|v| v.name()).collect();
            out.push(format!(
                "{path}: {} is not its version in {}",
                describe(&found),
                names.join(" or ")
            ));
        }
    }
    let backup = state.files.get(VENDOR_ORIG).cloned().flatten();
    let whole = is(&backup, &Some(vendor_original()), VENDOR_FILE);
    let ok = match orig {
        Orig::Kept => whole,
        Orig::Gone => backup.is_none(),
        Orig::Either => backup.is_none() || whole,
    };
    if !ok {
        out.push(format!(
            "{VENDOR_ORIG}: {} (the vendor file's original; expected {orig:?})",
            describe(&backup)
        ));
    }
    check_shadow(state, baseline, versions, out);
}

/// `/etc/shadow`: its stat line and every line but core's as in the baseline; core's hash one
/// of the versions'.
fn check_shadow(state: &GuestState, baseline: &str, versions: &[Version], out: &mut Vec<String>) {
    let (base_stat, base) = baseline.split_once('\n').unwrap_or((baseline, ""));
    let (stat, now) = state.shadow.split_once('\n').unwrap_or((&state.shadow, ""));
    if stat != base_stat {
        out.push(format!("/etc/shadow: {stat:?}, was {base_stat:?}"));
    }
    let (base_lines, lines): (Vec<&str>, Vec<&str>) =
        (base.lines().collect(), now.lines().collect());
    if base_lines.len() != lines.len() {
        out.push(format!(
            "/etc/shadow: {} lines, was {} ({} bytes now)",
            lines.len(),
            base_lines.len(),
            now.len()
        ));
        return;
    }
    for (was, is) in base_lines.iter().zip(&lines) {
        let (w, i): (Vec<&str>, Vec<&str>) = (was.split(':').collect(), is.split(':').collect());
        if w[0] != "core" {
            if was != is {
                out.push(format!("/etc/shadow: {is:?} was {was:?}"));
            }
            continue;
        }
        let hash_ok = versions
            .iter()
            .any(|v| i.get(1) == Some(&v.password_hash().as_str()));
        let rest_ok = w.len() == i.len()
            && w.iter()
                .zip(&i)
                .enumerate()
                .all(|(n, (a, b))| n == 1 || n == 2 || a == b);
        if !hash_ok || !rest_ok {
            out.push(format!("/etc/shadow: core's line {is:?} (was {was:?})"));
        }
    }
}

/// The OS the guest booted: its side, whole (commit and kernel argument agree, the argument once).
fn check_os(state: &GuestState, sides: &[Side], out: &mut Vec<String>) -> Option<Side> {
    let kargs: Vec<&str> = state
        .cmdline
        .split_whitespace()
        .filter_map(|a| a.strip_prefix(KARG)?.strip_prefix('='))
        .collect();
    let side = match state.os_version.as_str() {
        "a" => Side::A,
        "b" => Side::B,
        other => {
            out.push(format!("booted an unknown OS version {other:?}"));
            return None;
        }
    };
    if kargs != [side.letter()] {
        out.push(format!(
            "commit {} booted with {KARG} {kargs:?}: a half-applied OS or an argument added twice \
             ({})",
            side.letter(),
            state.cmdline
        ));
    }
    if !sides.contains(&side) {
        out.push(format!(
            "booted side {} is neither planned one",
            side.letter()
        ));
    }
    Some(side)
}

/// The state after a cut during the update `from` -> `to`, before the agent runs.
/// `baseline`: `/etc/shadow` before any config (its `stat` line, then the file).
pub fn after_cut(
    state: &GuestState,
    baseline: &str,
    from: Version,
    to: Version,
) -> Result<AfterCut, String> {
    let mut out = Vec::new();
    let current = state.current_config.as_ref().map(name_of).unwrap_or("none");
    let (from_name, to_name) = (from.name(), to.name());
    let step = state.record.as_ref().map(|r| {
        let (c, d) = (name_of(&r["current"]), name_of(&r["desired"]));
        if c != from_name || d != to_name {
            out.push(format!(
                "the record is of {c} -> {d}, not {from_name} -> {to_name}"
            ));
        }
        r["step"].as_str().unwrap_or("?").to_string()
    });
    let in_current = if current == from_name {
        Some(from)
    } else if current == to_name {
        Some(to)
    } else {
        out.push(format!(
            "currentconfig is {current}, neither {from_name} nor {to_name}"
        ));
        None
    };
    let versions: Vec<Version> = match step.as_deref() {
        None => in_current.into_iter().collect(),
        Some("Draining") => vec![from],
        Some("Writing" | "RollingBack") => vec![from, to],
        Some(_) => vec![to],
    };
    let current_may_be_new = matches!(
        step.as_deref(),
        None | Some("PostActions" | "Verifying" | "NotTaken")
    );
    if !current_may_be_new && current != from_name {
        out.push(format!(
            "currentconfig is {current} while the record is at {step:?}: committed too early"
        ));
    }
    // Before an update is recorded, its backups are taken: one may be left by an update cut
    // before its record (whole: the next update to side b keeps it).
    let orig = match Orig::of(&versions) {
        Orig::Kept if step.is_none() => Orig::Kept,
        _ => Orig::Either,
    };
    check_files(state, baseline, &versions, orig, &mut out);
    let sides: Vec<Side> = match step {
        None => versions.iter().map(|v| v.side).collect(),
        Some(_) => vec![from.side, to.side],
    };
    let booted = check_os(state, &sides, &mut out);
    let single = versions.len() == 1;
    if single
        && state
            .unit_link
            .as_deref()
            .is_none_or(|l| !l.ends_with(UNIT_FILE))
    {
        out.push(format!("{UNIT_FILE} is not enabled: {:?}", state.unit_link));
    }
    match (out.is_empty(), booted) {
        (true, Some(booted)) => Ok(AfterCut { step, booted }),
        _ => Err(report("after the cut", state, &out)),
    }
}

/// The state once the node converged on `to`.
pub fn converged(state: &GuestState, baseline: &str, to: Version) -> Result<(), String> {
    let mut out = Vec::new();
    let current = state.current_config.as_ref().map(name_of).unwrap_or("none");
    if current != to.name() {
        out.push(format!("currentconfig is {current}, not {}", to.name()));
    }
    if let Some(r) = &state.record {
        out.push(format!("an update record is left at step {}", r["step"]));
    }
    check_files(state, baseline, &[to], Orig::of(&[to]), &mut out);
    check_os(state, &[to.side], &mut out);
    if state
        .unit_link
        .as_deref()
        .is_none_or(|l| !l.ends_with(UNIT_FILE))
    {
        out.push(format!("{UNIT_FILE} is not enabled: {:?}", state.unit_link));
    }
    if !state.temp_files.is_empty() {
        out.push(format!("temp files left: {:?}", state.temp_files));
    }
    let status = state.status.as_ref();
    let (s_state, s_current) = status
        .map(|s| {
            (
                s["state"].as_str().unwrap_or("?"),
                s["current"].as_str().unwrap_or("?"),
            )
        })
        .unwrap_or(("no status file", ""));
    if s_state != "Done" || s_current != to.name() {
        out.push(format!("the agent's status: {s_state} on {s_current}"));
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(report("converged", state, &out))
    }
}

fn report(when: &str, state: &GuestState, problems: &[String]) -> String {
    format!(
        "{when}: {}\n  record step {:?}, temp files {:?}, cmdline {:?}\n  ostree:\n{}",
        problems.join("\n  "),
        state.record.as_ref().map(|r| r["step"].clone()),
        state.temp_files,
        state.cmdline,
        state.ostree_status
    )
}
