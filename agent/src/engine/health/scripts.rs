//! The administrator's checks: every executable regular file in `/etc/mco-agent/health.d/`
//! (inside the root), in name order, run with no arguments, standard input closed, the root
//! as working directory and `MCO_AGENT_CONFIG` naming the config being checked. Exit 0 within
//! the timeout passes; anything else fails with the exit status and the end of its output.
//!
//! Only regular files count (a symlink could lead out of the root; a file without an execute
//! bit is skipped, so a check can be switched off with `chmod -x`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::HEALTH_DIR;
use crate::rootfs::{FileKind, Root};

/// How much of a failed check's output goes into the reason.
const OUTPUT_KEPT: usize = 400;

/// A check that did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptFailure {
    /// The check, as a path inside the root.
    pub path: String,
    /// `exited with 1`, `timed out after 60s`, `could not be run: ...`.
    pub what: String,
    /// The end of its standard output and error.
    pub output: String,
}

impl fmt::Display for ScriptFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "health check {} {}", self.path, self.what)?;
        if !self.output.is_empty() {
            write!(f, ": {}", self.output)?;
        }
        Ok(())
    }
}

/// The executables of `health.d`, in name order, as paths inside the root.
pub fn list(root: &Root) -> Result<Vec<String>, String> {
    let dir = root.host_path(Path::new(HEALTH_DIR));
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("reading {HEALTH_DIR}: {e}")),
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let path = format!("{HEALTH_DIR}/{name}");
        match root.lstat(Path::new(&path)) {
            Ok(Some(info)) if info.kind == FileKind::File && info.mode & 0o111 != 0 => {
                out.push(path)
            }
            Ok(_) => {}
            Err(e) => return Err(format!("{path}: {e}")),
        }
    }
    Ok(out)
}

/// Runs every check; the failures (empty: all passed).
pub async fn run_all(root: &Root, config: &str, timeout: Duration) -> Vec<ScriptFailure> {
    let paths = match list(root) {
        Ok(p) => p,
        Err(e) => {
            return vec![ScriptFailure {
                path: HEALTH_DIR.to_string(),
                what: "could not be read".to_string(),
                output: e,
            }];
        }
    };
    let mut failures = Vec::new();
    for path in paths {
        let host = root.host_path(Path::new(&path));
        if let Err(f) = run_one(
            &path,
            &host,
            root.host_path(Path::new("/")),
            config,
            timeout,
        )
        .await
        {
            failures.push(f);
        }
    }
    failures
}

async fn run_one(
    path: &str,
    host: &Path,
    cwd: PathBuf,
    config: &str,
    timeout: Duration,
) -> Result<(), ScriptFailure> {
    let fail = |what: String, output: String| ScriptFailure {
        path: path.to_string(),
        what,
        output,
    };
    let child = tokio::process::Command::new(host)
        .current_dir(cwd)
        .env("MCO_AGENT_CONFIG", config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("could not be run: {e}"), String::new()))?;
    let out = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Err(_) => {
            return Err(fail(
                format!("timed out after {}", humantime::format_duration(timeout)),
                String::new(),
            ));
        }
        Ok(Err(e)) => return Err(fail(format!("could not be waited for: {e}"), String::new())),
        Ok(Ok(out)) => out,
    };
    let text = tail(&out.stdout, &out.stderr);
    if out.status.success() {
        tracing::info!(check = path, output = text, "health check passed");
        return Ok(());
    }
    let what = match out.status.code() {
        Some(code) => format!("exited with {code}"),
        None => format!("was killed ({})", out.status),
    };
    tracing::warn!(check = path, what, output = text, "health check failed");
    Err(fail(what, text))
}

/// The end of standard output then error, trimmed, on one line.
fn tail(stdout: &[u8], stderr: &[u8]) -> String {
    let joined = format!(
        "{} {}",
        String::from_utf8_lossy(stdout).trim(),
        String::from_utf8_lossy(stderr).trim()
    );
    let one_line = joined.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars: Vec<char> = one_line.chars().collect();
    if chars.len() <= OUTPUT_KEPT {
        one_line
    } else {
        let kept: String = chars[chars.len() - OUTPUT_KEPT..].iter().collect();
        format!("…{kept}")
    }
}
