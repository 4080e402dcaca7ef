//! Failpoints (the `fail` crate, behind the agent's `failpoints` feature; compiled out
//! otherwise). A binary built with the feature reads `FAILPOINTS` at start-up
//! (`name=action;...`). Besides the fail crate's own actions (`panic`, `sleep(ms)`, `pause`,
//! `print`), `return(...)` takes:
//! - `return(kill)`: the process sends itself SIGKILL there, as `kill -9` or a power cut would
//!   (nothing is flushed, no destructor runs);
//! - `return(pause)`: the process writes the failpoint's name to the marker file
//!   `$FAILPOINTS_PAUSED` (default [`PAUSED_MARKER`]) and blocks there for good, so that a
//!   harness that sees the marker can cut the power (the VM power-cut scenarios) or kill the
//!   process at exactly this step; nothing is flushed by the pause itself (keep the marker off
//!   the file system under test: `/run`, or the VM's share);
//! - `return(hold)`: the same marker, but the process blocks only until a stop is requested
//!   ([`crate::stop`]: SIGTERM or SIGINT to the daemon), then goes on from here, as if the step
//!   had been slow at this point: a harness stops the daemon (or reboots the node) at exactly
//!   this step and times the stop;
//! - `return` or `return(error)`: the step fails with an injected error (the failure path);
//! - at a point met on many paths ([`failpoint_at`]), `return(kill@/etc/foo)` (or
//!   `return(error@/etc/foo)`) acts only there, e.g. while the temp file of `/etc/foo` is
//!   written (`engine::temp-written`).
//!
//! Names are `engine::<point>` (the engine names the steps; the root-confined file system and
//! the apply meet some of them too); the list is [`POINTS`]. This module sits at the bottom of
//! the agent so that every layer may call it.

/// Where `return(pause)` and `return(hold)` write the name of the failpoint they stopped at,
/// unless `$FAILPOINTS_PAUSED` names another file.
pub const PAUSED_MARKER: &str = "/run/mco-agent/failpoint-paused";

/// Every failpoint of the engine, in the order an update meets them.
pub const POINTS: &[&str] = &[
    "engine::recorded",
    "engine::drained",
    "engine::writing",
    "engine::apply-midway",
    "engine::written",
    "engine::os-cleaned",
    "engine::os-rebased",
    "engine::os-kargs",
    "engine::os-done",
    "engine::post-actions",
    "engine::committed",
    "engine::reboot-recorded",
    "engine::reboot-requested",
    "engine::verifying",
    // Only in an update that leaves image mode, after its files are written again.
    "engine::rewritten",
    "engine::rolling-back",
    "engine::rolled-back-files",
    "engine::boot-failed",
    "engine::boot-os-rolled-back",
    "engine::boot-files-rolled-back",
    "engine::reboot-back-recorded",
    "engine::rolled-back-boot",
    // Met in every atomic write (root-confined file system), between the temp file's contents
    // and its rename: a kill there leaves the temp file behind.
    "engine::temp-written",
];

/// Evaluates failpoint `name`: `Ok(())` unless it is configured to fail.
pub fn failpoint(name: &str) -> anyhow::Result<()> {
    debug_assert!(POINTS.contains(&name), "unknown failpoint {name}");
    #[cfg(feature = "failpoints")]
    if let Some(result) = fail::eval(name, |arg| act(name, arg)) {
        return result;
    }
    Ok(())
}

/// Like [`failpoint`] at a point met on many paths: an action `ACTION@PATH` acts only when
/// `path` is `PATH`; a plain action acts everywhere.
pub fn failpoint_at(name: &str, path: &std::path::Path) -> anyhow::Result<()> {
    debug_assert!(POINTS.contains(&name), "unknown failpoint {name}");
    #[cfg(feature = "failpoints")]
    if let Some(result) = fail::eval(name, |arg| {
        match arg.as_deref().and_then(|a| a.split_once('@')) {
            Some((action, at)) if std::path::Path::new(at) == path => {
                act(name, Some(action.to_string()))
            }
            Some(_) => Ok(()),
            None => act(name, arg),
        }
    }) {
        return result;
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = path;
    Ok(())
}

#[cfg(feature = "failpoints")]
fn act(name: &str, arg: Option<String>) -> anyhow::Result<()> {
    match arg.as_deref() {
        Some("kill") => {
            tracing::warn!(failpoint = name, "failpoint: SIGKILL");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            // SIGKILL cannot be caught; if raising it failed, abort just as hard.
            std::process::abort()
        }
        Some("pause") => pause(name),
        Some("hold") => {
            hold(name);
            Ok(())
        }
        None | Some("error") => Err(anyhow::anyhow!("injected failure at failpoint {name}")),
        Some(other) => Err(anyhow::anyhow!(
            "injected failure at failpoint {name} ({other})"
        )),
    }
}

/// `return(pause)`: says where it paused (the log, the marker file) and blocks this thread
/// forever. The marker is written without fsync: the pause must not flush anything the step
/// left unflushed.
#[cfg(feature = "failpoints")]
fn pause(name: &str) -> ! {
    tracing::warn!(failpoint = name, "failpoint: paused");
    write_marker(name);
    loop {
        std::thread::park();
    }
}

/// `return(hold)`: says where it holds, blocks this thread until a stop is requested, returns.
/// (The whole thread: the daemon's loop and timers wait too, as behind a slow disk.)
#[cfg(feature = "failpoints")]
fn hold(name: &str) {
    tracing::warn!(
        failpoint = name,
        "failpoint: held until a stop is requested"
    );
    write_marker(name);
    while !crate::stop::requested() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    tracing::warn!(failpoint = name, "failpoint: stop requested, going on");
}

/// Writes `name` to the marker file (`$FAILPOINTS_PAUSED` or [`PAUSED_MARKER`]).
#[cfg(feature = "failpoints")]
fn write_marker(name: &str) {
    let marker = std::env::var_os("FAILPOINTS_PAUSED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| PAUSED_MARKER.into());
    if let Some(dir) = marker.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(&marker, format!("{name}\n")) {
        tracing::error!(marker = %marker.display(), error = %e, "failpoint: cannot write the pause marker");
    }
}
