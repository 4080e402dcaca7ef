//! Validation of the internal form: Ignition's validator (spec 3.5, which is what the MCO runs on
//! every config it renders and the MCD on every config it applies), plus the MCO's own rules and
//! the node's, collecting every problem.
//!
//! Every problem is located by its JSON path and names what it is about and the offending value:
//! `$.storage.files.3.path: file "etc/x": path not absolute`. Values that may be secrets (file and
//! unit contents, `source` URLs, password hashes, HTTP header values, proxy URLs) are never shown:
//! a source is named by its scheme and length (`data: URL of 42 bytes`).
//!
//! The `ignition` section (merged and replaced configs, CAs, proxy, timeouts) is checked as
//! Ignition checks it, remote sources included: the MCO accepts remote references there, and the
//! MCD never reads that section (it fetches nothing and compares nothing in it), so neither does
//! the agent. Only the sources of file contents must be `data:` URLs, because they are written.

mod passwd;
mod resource;
mod storage;
mod systemd;
mod unit_syntax;

use std::cell::Cell;
use std::collections::HashMap;

use super::types::{Config, NodeOwner};
use crate::error::Issue;
pub(crate) use crate::error::named;

/// Go's `%#o`: `0` followed by the octal digits (`0` for zero), as the MCO prints modes.
pub fn go_octal(mode: i64) -> String {
    if mode == 0 {
        "0".to_string()
    } else if mode < 0 {
        format!("-0{:o}", -mode)
    } else {
        format!("0{mode:o}")
    }
}

/// Ignition's path rule: non-empty, absolute, and already clean (no `.`/`..`/empty segments,
/// no trailing slash). A NUL byte is refused too.
pub(crate) fn check_path(p: &str) -> Result<(), &'static str> {
    if p.is_empty() {
        return Err("path not specified");
    }
    if !p.starts_with('/') {
        return Err("path not absolute");
    }
    if p.contains('\0') {
        return Err("path contains a NUL byte");
    }
    if p != "/"
        && p[1..]
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err("path is not fully simplified");
    }
    Ok(())
}

thread_local! {
    /// Set while [`deferring_contents_base64`] runs.
    static CONTENTS_BASE64_DEFERRED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `parse` (parses of configs on this thread) with the base64 data of files' contents
/// not decoded by their validation: the rest of each data URL (its header, percent-encoded
/// data) and of the config is checked as always. For a caller that decodes every file's
/// contents anyway and, where one does not decode, parses the config again without this to
/// get the parse's error: `mco-agent validate`, whose comparison with the disk decodes the
/// same megabytes the parse just decoded to check them.
pub fn deferring_contents_base64<T>(parse: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CONTENTS_BASE64_DEFERRED.set(self.0);
        }
    }
    let _restore = Restore(CONTENTS_BASE64_DEFERRED.replace(true));
    parse()
}

/// Whether file contents' base64 is left to the caller (see [`deferring_contents_base64`]).
fn contents_base64_deferred() -> bool {
    CONTENTS_BASE64_DEFERRED.get()
}

/// Problems found so far, each with what it is about.
pub(super) struct Report(Vec<Issue>);

impl Report {
    /// Records `<subject>: <message>` at `path`.
    pub(super) fn err(&mut self, path: impl Into<String>, subject: &str, msg: impl AsRef<str>) {
        self.0
            .push(Issue::new(path, format!("{subject}: {}", msg.as_ref())));
    }
}

/// Validates a config in the internal form; every problem found, in document order.
pub fn validate(cfg: &Config) -> Result<(), Vec<Issue>> {
    let mut r = Report(Vec::new());
    resource::validate_ignition(cfg, &mut r);
    storage::validate_storage(cfg, &mut r);
    systemd::validate_systemd(cfg, &mut r);
    passwd::validate_passwd(cfg, &mut r);
    validate_kernel_arguments(cfg, &mut r);
    if r.0.is_empty() { Ok(()) } else { Err(r.0) }
}

/// Ignition's owner rule.
pub(super) fn owner(at: &str, subject: &str, o: &NodeOwner, r: &mut Report) {
    if let (Some(id), Some(name)) = (o.id, o.name.as_deref().filter(|n| !n.is_empty())) {
        r.err(
            at,
            subject,
            format!(
                "cannot set both id and name (id {id}, name {})",
                named(name)
            ),
        );
    }
}

/// Ignition refuses a repeated entry in any list of strings (`duplicate entry defined`).
/// `show` says whether the value may be quoted; `what` names one entry.
pub(super) fn unique_strings<'a>(
    at: &str,
    subject: &str,
    what: &str,
    items: impl IntoIterator<Item = &'a str>,
    show: bool,
    r: &mut Report,
) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, item) in items.into_iter().enumerate() {
        if let Some(first) = seen.get(item) {
            let value = if show {
                format!(" {}", named(item))
            } else {
                String::new()
            };
            r.err(
                format!("{at}.{i}"),
                subject,
                format!("duplicate entry defined: {what}{value} is already at {at}.{first}"),
            );
        } else {
            seen.insert(item, i);
        }
    }
}

fn validate_kernel_arguments(cfg: &Config, r: &mut Report) {
    let k = &cfg.kernel_arguments;
    for (name, list) in [
        ("shouldExist", &k.should_exist),
        ("shouldNotExist", &k.should_not_exist),
    ] {
        let at = format!("$.kernelArguments.{name}");
        let items = list.iter().map(String::as_str);
        unique_strings(&at, "kernel arguments", "argument", items, true, r);
    }
}
