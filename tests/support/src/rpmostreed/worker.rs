//! The transaction's worker thread: it owns the locked libostree sysroot (libostree objects stay
//! on one thread) and runs the job when the transaction is started.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ostree::gio;
use tokio::sync::mpsc::UnboundedSender;

use super::daemon::Shared;
use super::error::{DaemonError, GIO_BUSY};
use super::ops::{self, Progress};
use super::txn::TxnRequest;

pub(super) enum Control {
    Start,
}

pub(super) enum Event {
    Message(String),
    TaskBegin(String),
    TaskEnd(String),
    Percent(String, u32),
    Done(Result<ops::Outcome, String>),
}

struct ChannelProgress(UnboundedSender<Event>);

impl Progress for ChannelProgress {
    fn message(&self, text: &str) {
        let _ = self.0.send(Event::Message(text.into()));
    }
    fn task_begin(&self, text: &str) {
        let _ = self.0.send(Event::TaskBegin(text.into()));
    }
    fn task_end(&self, text: &str) {
        let _ = self.0.send(Event::TaskEnd(text.into()));
    }
    fn percent(&self, text: &str, percentage: u32) {
        let _ = self.0.send(Event::Percent(text.into(), percentage));
    }
}

/// Starts the worker thread: it loads and locks the sysroot, reports that, then waits for
/// `Start` (and runs the job) or for the control channel to close (and just unlocks).
pub(super) async fn spawn_worker(
    shared: &Shared,
    req: &TxnRequest,
    cancel: Arc<AtomicBool>,
    events: UnboundedSender<Event>,
) -> Result<std::sync::mpsc::Sender<Control>, DaemonError> {
    let (ctl_tx, ctl_rx) = std::sync::mpsc::channel::<Control>();
    let (init_tx, init_rx) = tokio::sync::oneshot::channel::<Result<(), DaemonError>>();
    let path = shared.config.sysroot.clone();
    let image_map = shared.config.image_map.clone();
    let auth = shared.config.auth.clone();
    let delay = shared.config.txn_delay;
    let osname = req.osname.clone();
    let op = req.op.clone();
    std::thread::Builder::new()
        .name(format!("txn-{}", req.method))
        .spawn(move || {
            let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(&path)));
            let init = sysroot
                .load(gio::Cancellable::NONE)
                .map_err(|e| DaemonError::failed(format!("Loading sysroot: {e}")))
                .and_then(|()| match sysroot.try_lock() {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(DaemonError::new(GIO_BUSY, "System transaction in progress")),
                    Err(e) => Err(DaemonError::failed(format!("Locking sysroot: {e}"))),
                });
            let locked = init.is_ok();
            let _ = init_tx.send(init);
            if !locked {
                return;
            }
            if let Ok(Control::Start) = ctl_rx.recv() {
                let progress = ChannelProgress(events.clone());
                let ctx = ops::Context {
                    sysroot: &sysroot,
                    osname: &osname,
                    image_map: image_map.as_deref(),
                    auth: &auth,
                    progress: &progress,
                    cancel: &cancel,
                    delay,
                };
                let result = ops::run(&ctx, &op);
                sysroot.unlock();
                let _ = events.send(Event::Done(result));
            } else {
                sysroot.unlock();
            }
        })
        .map_err(|e| DaemonError::failed(format!("spawning the transaction thread: {e}")))?;
    init_rx
        .await
        .map_err(|_| DaemonError::failed("the transaction thread died during setup"))??;
    Ok(ctl_tx)
}
