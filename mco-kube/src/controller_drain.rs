//! A drain by a drain controller (`--drain-mode controller`): the handshake
//! ([`super::handshake`]) and, while it waits, what holds the drain written into the node's
//! `reason`. The MCD says nothing there until it gives up after the hour (the pods and budgets
//! are only in the controller's log); the agent reads the pods still on its node and the
//! PodDisruptionBudgets of their namespaces once the drain has gone on for
//! [`HandshakeOptions::report_after`](super::HandshakeOptions), then every
//! `report_every`, and names each pod and what holds it in the words of its own drain's errors
//! ([`crate::drain::holders`]). The node's `state` stays `Working`; the handshake's timeout,
//! error and event are the MCD's, unchanged.
//!
//! One writer per case: the companion's drain controller writes each failed try's message
//! into the reason itself ([`DRAIN_CONTROLLER_FAILED`]); while the reason holds one, the agent
//! writes nothing, and each of its writes is conditional on the Node's `resourceVersion` as
//! read, so a message the controller wrote meanwhile is never overwritten. A read or write that
//! fails is logged and the wait goes on: this never fails an update.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use machine_config::mco::annotations::{DRAIN_VERB, REASON};
use serde_json::json;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::annotations::truncate_reason;
use super::drain::holders;
use super::error::{
    ClusterError, DRAIN_CONTROLLER_FAILED, WAITING_FOR_DRAIN_CONTROLLER,
    waiting_for_drain_controller,
};
use super::handshake;
use super::kube_node::KubeNodeApi;
use super::objects::Node;

/// The node's `reason`.
fn reason(node: &Node) -> &str {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REASON))
        .map_or("", String::as_str)
}

/// How a conditional write of the reason ended.
enum Written {
    Yes,
    /// The Node changed since it was read (409): nothing written.
    Changed,
    /// Logged.
    Failed,
}

impl KubeNodeApi {
    /// Asks the drain controller to drain and waits for it, saying meanwhile what holds it.
    pub(super) async fn controller_drain(&self, config: &str) -> Result<(), ClusterError> {
        let answered = Notify::new();
        let handshake = async {
            let result =
                handshake::request(self, &self.options.handshake, DRAIN_VERB, config).await;
            answered.notify_one();
            result
        };
        let (result, ()) = tokio::join!(handshake, self.report_drain_holders(&answered));
        if result.is_ok() {
            self.clear_waiting_reason().await;
        }
        result
    }

    /// Until `answered`: after `report_after`, then every `report_every`, one look at what
    /// holds the drain. A look is never cut short (its write either lands or not, as read).
    async fn report_drain_holders(&self, answered: &Notify) {
        let opts = &self.options.handshake;
        let started = Instant::now();
        let mut next = started + opts.report_after;
        loop {
            tokio::select! {
                _ = answered.notified() => return,
                _ = tokio::time::sleep_until(next) => {}
            }
            self.report_drain_holders_once(started.elapsed()).await;
            next = Instant::now() + opts.report_every;
        }
    }

    async fn report_drain_holders_once(&self, elapsed: Duration) {
        let node = match self.node().await {
            Ok(node) => node,
            Err(e) => {
                warn!(node = %self.node, error = %e, "reading the node to say what holds its drain; still waiting for the drain controller");
                return;
            }
        };
        if reason(&node).starts_with(DRAIN_CONTROLLER_FAILED) {
            debug!(node = %self.node, "the drain controller writes what holds the drain into the reason");
            return;
        }
        let blocked = match holders::read(&self.client, &self.node, &self.retry).await {
            Ok(blocked) => blocked,
            Err(e) => {
                warn!(node = %self.node, error = %e, "what holds the drain is unknown; still waiting for the drain controller");
                return;
            }
        };
        let message = waiting_for_drain_controller(&self.node, elapsed, &blocked);
        info!(node = %self.node, "{message}");
        if let Written::Changed = self.write_reason_over(&node, &message).await {
            debug!(node = %self.node, "the node changed since it was read; the next look writes");
        }
    }

    /// Writes `reason` if the Node is still as `read` (its `resourceVersion`), in one attempt.
    async fn write_reason_over(&self, read: &Node, reason: &str) -> Written {
        let patch = Patch::Merge(json!({"metadata": {
            "resourceVersion": read.metadata.resource_version,
            "annotations": {REASON: truncate_reason(reason)},
        }}));
        let params = PatchParams::default();
        let call = self.nodes.patch(&self.node, &params, &patch);
        match tokio::time::timeout(self.retry.attempt_timeout, call).await {
            Ok(Ok(written)) => {
                self.view.saw(&written);
                Written::Yes
            }
            Ok(Err(kube::Error::Api(status))) if status.code == 409 => Written::Changed,
            Ok(Err(e)) => {
                warn!(node = %self.node, error = %e, "writing what holds the drain into the node's reason");
                Written::Failed
            }
            Err(_) => {
                warn!(node = %self.node, "writing what holds the drain into the node's reason: no answer within {:?}", self.retry.attempt_timeout);
                Written::Failed
            }
        }
    }

    /// Once drained, a reason of the agent's own wait is stale: cleared, unless something else
    /// wrote the reason since (the controller's message is the controller's to clear).
    async fn clear_waiting_reason(&self) {
        let mut node = match self.node().await {
            Ok(node) => node,
            Err(e) => {
                warn!(node = %self.node, error = %e, "reading the node to clear what held its drain");
                return;
            }
        };
        // A Node that changed since read (the watch behind): read again, once.
        for _ in 0..2 {
            if !reason(&node).starts_with(WAITING_FOR_DRAIN_CONTROLLER) {
                return;
            }
            match self.write_reason_over(&node, "").await {
                Written::Changed => {}
                Written::Yes | Written::Failed => return,
            }
            node = match self.fresh_node().await {
                Ok(node) => node,
                Err(e) => {
                    warn!(node = %self.node, error = %e, "reading the node to clear what held its drain");
                    return;
                }
            };
        }
    }
}
