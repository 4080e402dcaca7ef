//! Stopping the daemon: SIGTERM (`systemctl stop`, a shutdown or reboot) and SIGINT.
//!
//! A stop is honoured within seconds at every step. The daemon's work runs under
//! [`until_stopped`], which drops it at the first wait (network, API server, D-Bus, rpm-ostree, a
//! hook, a timer) once a stop is requested: whatever was waited for resumes from the update
//! record at the next start, which is what the record is for (a drop there leaves the disk
//! exactly as a `kill -9` would, and the crash safety covers that). What would tear something if
//! cut short never waits: an atomic file replacement, the update record, a `syncfs` run to their
//! end synchronously, and a drop can only come between them; their length is the stop's bound
//! (`tests/bench/stop_time.sh` measures it, `TimeoutStopSec` in the unit is sized from it).
//!
//! Between the steps of an update the engine asks [`StopFlag::checkpoint`] before it begins the
//! next one: after a stop it begins nothing more (the step recorded is the one the next start
//! resumes), and a step that failed while the stop was under way is not taken for a failure (a
//! hook killed with the unit, a service going down with the shutdown): it is not recorded, and
//! the next start runs it again.
//!
//! The request is a process-wide flag set by the signal handler itself, so that code blocked
//! on the CPU or the disk (and the failpoints' `return(hold)`) sees it at once; the daemon's
//! async loop is woken through tokio's signal streams. Nothing here acts before
//! [`StopSignals::install`]: the other commands keep the default disposition (SIGTERM ends
//! them at once), and [`requested`] stays false.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Set by the signal handler (async-signal-safe: an atomic store).
static REQUESTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Whether a stop of this process was requested (always false until [`StopSignals::install`]).
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// A stop request as work sees it: the process's ([`StopFlag::process`]), or one of its own
/// (tests).
#[derive(Clone, Debug)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// The process's: set by SIGTERM and SIGINT once [`StopSignals::install`] ran.
    pub fn process() -> StopFlag {
        StopFlag(Arc::clone(&REQUESTED))
    }

    /// A flag of its own, set only by [`StopFlag::request`].
    pub fn detached() -> StopFlag {
        StopFlag(Arc::new(AtomicBool::new(false)))
    }

    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Where work that must not begin after a stop asks: returns at once without a stop
    /// request, and never returns after one (the work is dropped by [`until_stopped`] at this
    /// wait).
    pub async fn checkpoint(&self) {
        if self.requested() {
            tracing::debug!("stop requested: nothing more begins");
            std::future::pending::<()>().await;
        }
    }
}

/// The stop signals, once their handlers are installed.
pub struct StopSignals {
    term: Signal,
    int: Signal,
}

impl StopSignals {
    /// Installs the handlers of SIGTERM and SIGINT (inside a tokio runtime): from now on they
    /// request a stop instead of ending the process.
    pub fn install() -> io::Result<StopSignals> {
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::flag::register(sig, Arc::clone(&REQUESTED))?;
        }
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Waits for a stop signal; its name.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// Runs `work` until it ends (`Ok` with its output) or a stop signal comes (`Err` with the
/// signal's name); then `work` is dropped at the wait it is in. The stop is polled first, so
/// when both are ready (a hook killed with the unit ended at the same time) the work's result,
/// which the stop may have caused, is never looked at.
pub async fn until_stopped<T>(
    signals: &mut StopSignals,
    work: impl Future<Output = T>,
) -> Result<T, &'static str> {
    tokio::select! {
        biased;
        signal = signals.recv() => Err(signal),
        done = work => Ok(done),
    }
}
