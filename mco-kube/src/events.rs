//! core/v1 Events about the node, as the MCD records them: involved object the Node, source
//! component [`SOURCE_COMPONENT`] on the node's host, in
//! [`DEFAULT_EVENT_NAMESPACE`](machine_config::mco::events::DEFAULT_EVENT_NAMESPACE) (falling
//! back to `default` on clusters without that namespace).

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use machine_config::mco::events::{SOURCE_COMPONENT, event_type};
use serde_json::json;
use tracing::{debug, warn};

use super::NodeApi;
use super::error::ClusterError;
use super::retry::{RetryPolicy, with_retry};

/// Records events about one node.
#[derive(Clone)]
pub struct EventRecorder {
    client: kube::Client,
    namespace: String,
    node: String,
    retry: RetryPolicy,
}

impl EventRecorder {
    pub fn new(client: kube::Client, namespace: &str, node: &str, retry: RetryPolicy) -> Self {
        Self {
            client,
            namespace: namespace.to_string(),
            node: node.to_string(),
            retry,
        }
    }

    fn event(
        &self,
        namespace: &str,
        node_uid: Option<&str>,
        reason: &str,
        message: &str,
    ) -> Result<Event, ClusterError> {
        let now = SystemTime::now();
        let nanos = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let timestamp = humantime::format_rfc3339_seconds(now).to_string();
        serde_json::from_value(json!({
            "metadata": {"name": format!("{}.{nanos:x}", self.node), "namespace": namespace},
            "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": self.node, "uid": node_uid},
            "reason": reason,
            "message": message,
            "type": event_type(reason),
            "source": {"component": SOURCE_COMPONENT, "host": self.node},
            "reportingComponent": SOURCE_COMPONENT,
            "reportingInstance": self.node,
            "firstTimestamp": timestamp,
            "lastTimestamp": timestamp,
            "count": 1,
        }))
        .map_err(|e| ClusterError::Client {
            action: "building an event".into(),
            message: e.to_string(),
        })
    }

    /// Creates the event (retrying transient failures).
    pub async fn record(
        &self,
        node_uid: Option<&str>,
        reason: &str,
        message: &str,
    ) -> Result<(), ClusterError> {
        let mut namespace = self.namespace.clone();
        loop {
            let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            let event = self.event(&namespace, node_uid, reason, message)?;
            let action = format!("creating event {reason} for node {}", self.node);
            let params = PostParams::default();
            match with_retry(&self.retry, &action, || events.create(&params, &event)).await {
                Ok(_) => {
                    debug!(reason, namespace, "event recorded");
                    return Ok(());
                }
                // No such namespace on this cluster: use `default` as clients commonly do.
                Err(err) if err.code() == Some(404) && namespace != "default" => {
                    namespace = "default".to_string();
                }
                Err(err) => return Err(err),
            }
        }
    }
}

/// Records an event on `api`'s node; a failure is logged, never fatal to the caller's work.
pub(super) async fn note(api: &dyn NodeApi, reason: &str, message: &str) {
    if let Err(e) = api.event(reason, message).await {
        warn!(node = api.node_name(), reason, error = %e, "could not record event");
    }
}
