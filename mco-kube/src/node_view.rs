//! The node as the agent last saw it, so that it reads its own Node from the watch it keeps
//! anyway instead of with a GET before each write.
//!
//! Two things feed the view: the `desiredConfig` watch (every version of the Node the API server
//! sends, our own writes included) and the responses of our own patches (the Node as stored
//! right after the write, which may arrive before the watch's copy of it). Of two copies the one
//! with the higher `resourceVersion` wins, so an older watch event delivered after our patch's
//! response never hides our write. The view is trusted only while the watch is live (its first
//! list is done and it has not failed since): a reader outside the daemon (`mco-agent recover`,
//! a drain by hand) has no watch and reads the API server as before.

use std::sync::Mutex;

use crate::objects::Node;

/// See the module documentation.
#[derive(Default)]
pub struct NodeView {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    node: Option<Node>,
    live: bool,
}

/// `resourceVersion` as a number: the API server's are etcd revisions (decimal integers). They
/// are opaque by contract, so a version that is not a number counts as newer than anything.
fn version(node: &Node) -> Option<u64> {
    node.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
}

/// Whether `candidate` is at least as new as `held`.
fn newer(candidate: &Node, held: &Node) -> bool {
    match (version(candidate), version(held)) {
        (Some(c), Some(h)) => c >= h,
        _ => true,
    }
}

impl NodeView {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the Node seen or written: kept if it is not older than the one held.
    pub fn saw(&self, node: &Node) {
        let mut inner = self.lock();
        if inner.node.as_ref().is_none_or(|held| newer(node, held)) {
            inner.node = Some(node.clone());
        }
    }

    /// The watch has listed the Node (`true`) or failed and is starting over (`false`).
    pub fn set_live(&self, live: bool) {
        self.lock().live = live;
    }

    /// The Node, when the watch is live and has seen it.
    pub fn current(&self) -> Option<Node> {
        let inner = self.lock();
        inner.live.then(|| inner.node.clone()).flatten()
    }

    /// The Node's uid, from any copy seen (a uid never changes).
    pub fn uid(&self) -> Option<String> {
        self.lock()
            .node
            .as_ref()
            .and_then(|n| n.metadata.uid.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(version: &str, state: &str) -> Node {
        let mut n = Node::default();
        n.metadata.resource_version = Some(version.into());
        n.metadata.uid = Some("uid-1".into());
        n.metadata.annotations = Some([("state".to_string(), state.to_string())].into());
        n
    }

    fn state(view: &NodeView) -> Option<String> {
        view.current()
            .and_then(|n| n.metadata.annotations)
            .and_then(|a| a.get("state").cloned())
    }

    /// Copies of the Node as they arrive: (resourceVersion, state).
    type Arrivals = &'static [(&'static str, &'static str)];

    /// One row per case: the copies in the order they arrive, and what the view then holds.
    #[test]
    fn the_newest_copy_wins_whatever_order_it_arrives_in() {
        let cases: &[(Arrivals, Option<&str>)] = &[
            (&[("5", "Working")], Some("Working")),
            // our patch's response (6), then the watch's older copy (5): the write stays
            (&[("6", "Done"), ("5", "Working")], Some("Done")),
            (&[("5", "Working"), ("6", "Done")], Some("Done")),
            // the same version twice: the later copy (the same object) is kept
            (&[("6", "Done"), ("6", "Done")], Some("Done")),
            // a version that is not a number is taken as the newest
            (&[("6", "Done"), ("x1", "Degraded")], Some("Degraded")),
            (&[("x1", "Degraded"), ("6", "Done")], Some("Done")),
        ];
        for (arrivals, want) in cases {
            let view = NodeView::default();
            view.set_live(true);
            for (v, s) in *arrivals {
                view.saw(&node(v, s));
            }
            assert_eq!(state(&view).as_deref(), *want, "arrivals {arrivals:?}");
        }
    }

    #[test]
    fn the_view_is_trusted_only_while_the_watch_is_live() {
        let view = NodeView::default();
        view.saw(&node("3", "Done"));
        assert!(view.current().is_none(), "no watch yet");
        assert_eq!(
            view.uid().as_deref(),
            Some("uid-1"),
            "the uid does not change"
        );
        view.set_live(true);
        assert_eq!(state(&view).as_deref(), Some("Done"));
        view.set_live(false);
        assert!(view.current().is_none(), "the watch failed");
    }
}
