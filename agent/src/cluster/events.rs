//! core/v1 Events about the node, as the MCD records them: involved object the Node, source
//! component `machineconfigdaemon` on the node's host, in `openshift-machine-config-operator`
//! (falling back to `default` on clusters without that namespace).

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use serde_json::json;
use tracing::debug;

use super::retry::{ClusterError, RetryPolicy, with_retry};

/// The MCD's event source component.
pub const SOURCE_COMPONENT: &str = "machineconfigdaemon";
/// Where the MCD puts Node events.
pub const DEFAULT_EVENT_NAMESPACE: &str = "openshift-machine-config-operator";

/// Event reasons the MCD uses (section 7 of the behaviour notes).
pub mod reason {
    pub const DRAIN: &str = "Drain";
    pub const CORDON: &str = "Cordon";
    pub const UNCORDON: &str = "Uncordon";
    pub const FAILED_TO_DRAIN: &str = "FailedToDrain";
    pub const FAILED_TO_UNCORDON: &str = "FailedToUncordon";
    pub const REBOOT: &str = "Reboot";
    pub const SKIP_REBOOT: &str = "SkipReboot";
    pub const CONFIG_DRIFT_DETECTED: &str = "ConfigDriftDetected";
    pub const ON_DISK_STATE_VALIDATION_FAILED: &str = "OnDiskStateValidationFailed";
    pub const PREFLIGHT_CONFIG_DRIFT_CHECK_FAILED: &str = "PreflightConfigDriftCheckFailed";
    pub const FAILED_TO_RECONCILE: &str = "FailedToReconcile";
    pub const NODE_DONE: &str = "NodeDone";
    pub const BOOT_RESYNC: &str = "BootResync";
    pub const OS_UPDATE_STARTED: &str = "OSUpdateStarted";
    pub const OS_UPDATE_STAGED: &str = "OSUpdateStaged";
    pub const SERVICE_RELOAD: &str = "ServiceReload";
    pub const FAILED_SERVICE_RELOAD: &str = "FailedServiceReload";
    pub const SERVICE_RESTART: &str = "ServiceRestart";
    pub const FAILED_SERVICE_RESTART: &str = "FailedServiceRestart";
    pub const FAILED_FINALIZATION: &str = "FailedFinalization";
}

/// `Warning` for the failure reasons, `Normal` otherwise.
pub fn event_type(reason: &str) -> &'static str {
    let warning = reason.starts_with("Failed")
        || matches!(
            reason,
            reason::CONFIG_DRIFT_DETECTED
                | reason::ON_DISK_STATE_VALIDATION_FAILED
                | reason::PREFLIGHT_CONFIG_DRIFT_CHECK_FAILED
        );
    if warning { "Warning" } else { "Normal" }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_reasons() {
        assert_eq!(event_type(reason::FAILED_TO_DRAIN), "Warning");
        assert_eq!(event_type(reason::CONFIG_DRIFT_DETECTED), "Warning");
        assert_eq!(
            event_type(reason::ON_DISK_STATE_VALIDATION_FAILED),
            "Warning"
        );
        assert_eq!(event_type(reason::DRAIN), "Normal");
        assert_eq!(event_type(reason::NODE_DONE), "Normal");
    }
}
