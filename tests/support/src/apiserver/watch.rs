//! Watch streams: JSON lines of `{"type": ..., "object": ...}` from a resourceVersion, with
//! selector-aware ADDED/MODIFIED/DELETED, bookmarks, `sendInitialEvents`, timeouts, 410 for
//! compacted versions, and ends when a test drops watches.

use std::sync::Arc;
use std::time::Duration;

use futures::SinkExt;
use futures::channel::mpsc;
use hyper::body::{Bytes, Frame};
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use super::registry::RESOURCES;
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{Change, EventKind, Store};

pub type FrameSender = mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>;

/// A parsed watch request.
pub struct WatchRequest {
    pub res: usize,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// None: from now, with the current objects as ADDED first.
    pub from: Option<u64>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Option<Duration>,
    pub bookmark_interval: Duration,
}

impl WatchRequest {
    fn selects(&self, obj: &Value) -> bool {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.namespace.as_deref().is_none_or(|want| want == ns)
            && self.labels.matches_object(obj)
            && self.fields.matches(obj)
    }

    /// The event a change produces for this watch, if any: an object leaving the selection
    /// is DELETED, one entering it ADDED.
    fn event(&self, change: &Change) -> Option<Value> {
        if change.res != self.res {
            return None;
        }
        let now = self.selects(&change.object);
        let kind = match change.kind {
            EventKind::Modified => {
                let before = change.old.as_ref().is_some_and(|o| self.selects(o));
                match (before, now) {
                    (true, true) => "MODIFIED",
                    (false, true) => "ADDED",
                    (true, false) => "DELETED",
                    (false, false) => return None,
                }
            }
            other if now => other.as_str(),
            _ => return None,
        };
        Some(json!({"type": kind, "object": change.object}))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Value {
        let def = &RESOURCES[self.res];
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({"type": "BOOKMARK", "object": {"kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata}})
    }
}

async fn send(tx: &mut FrameSender, event: &Value) -> bool {
    let mut line = serde_json::to_vec(event).unwrap_or_default();
    line.push(b'\n');
    tx.send(Ok(Frame::data(Bytes::from(line)))).await.is_ok()
}

/// Runs one watch until the client goes away, the timeout passes, the subscription lags, or
/// watches are dropped.
pub async fn run(
    store: Arc<Store>,
    req: WatchRequest,
    mut tx: FrameSender,
    mut drop_signal: watch::Receiver<u64>,
) {
    let from = if req.send_initial_events {
        None
    } else {
        req.from
    };
    let (replay, mut changes) = match store.subscribe(req.res, from) {
        Ok(sub) => sub,
        Err(err) => {
            send(&mut tx, &error_event(&err)).await;
            return;
        }
    };
    let mut last_rv = from.unwrap_or(0);
    for change in &replay {
        if let Some(event) = req.event(change)
            && !send(&mut tx, &event).await
        {
            return;
        }
        last_rv = last_rv.max(change.rv);
    }
    if req.send_initial_events {
        let rv = store.current_rv().max(last_rv);
        if !send(&mut tx, &req.bookmark(rv, true)).await {
            return;
        }
    }
    let deadline = req
        .timeout
        .map(|t| tokio::time::Instant::now() + t)
        .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(24 * 3600));
    let mut tick = tokio::time::interval(req.bookmark_interval);
    tick.tick().await;
    drop_signal.mark_unchanged();
    loop {
        tokio::select! {
            received = changes.recv() => match received {
                Ok(change) => {
                    if change.rv <= last_rv {
                        continue;
                    }
                    last_rv = change.rv;
                    if let Some(event) = req.event(&change)
                        && !send(&mut tx, &event).await
                    {
                        return;
                    }
                }
                // Lagging behind: end the watch; the client re-watches from its last version.
                Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = drop_signal.changed() => return,
            _ = tokio::time::sleep_until(deadline) => return,
            _ = tick.tick() => {
                if tx.is_closed() {
                    return;
                }
                if req.bookmarks {
                    let Ok((pending, rv)) = store.drain_pending(&mut changes) else { return };
                    for change in &pending {
                        if change.rv <= last_rv {
                            continue;
                        }
                        last_rv = change.rv;
                        if let Some(event) = req.event(change)
                            && !send(&mut tx, &event).await
                        {
                            return;
                        }
                    }
                    last_rv = last_rv.max(rv);
                    if !send(&mut tx, &req.bookmark(last_rv, false)).await {
                        return;
                    }
                }
            }
        }
    }
}

fn error_event(err: &ApiError) -> Value {
    json!({"type": "ERROR", "object": err.to_status()})
}
