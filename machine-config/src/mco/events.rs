//! The core/v1 Events the MCD records about its Node: source, namespace and reasons.

/// The MCD's event source component.
pub const SOURCE_COMPONENT: &str = "machineconfigdaemon";
/// Where the MCD puts Node events.
pub const DEFAULT_EVENT_NAMESPACE: &str = "openshift-machine-config-operator";

/// Event reasons, as the MCD spells them.
pub mod reason {
    pub const DRAIN: &str = "Drain";
    pub const CORDON: &str = "Cordon";
    pub const UNCORDON: &str = "Uncordon";
    pub const FAILED_TO_DRAIN: &str = "FailedToDrain";
    pub const FAILED_TO_UNCORDON: &str = "FailedToUncordon";
    pub const REBOOT: &str = "Reboot";
    pub const SKIP_REBOOT: &str = "SkipReboot";
    pub const CONFIG_DRIFT_DETECTED: &str = "ConfigDriftDetected";
    pub const CONFIG_DRIFT_MONITOR_STARTED: &str = "ConfigDriftMonitorStarted";
    pub const CONFIG_DRIFT_MONITOR_STOPPED: &str = "ConfigDriftMonitorStopped";
    pub const ON_DISK_STATE_VALIDATION_FAILED: &str = "OnDiskStateValidationFailed";
    pub const PREFLIGHT_CONFIG_DRIFT_CHECK_FAILED: &str = "PreflightConfigDriftCheckFailed";
    pub const FAILED_TO_RECONCILE: &str = "FailedToReconcile";
    pub const NODE_DONE: &str = "NodeDone";
    pub const IN_CLUSTER_UPGRADE: &str = "InClusterUpgrade";
    pub const OS_UPDATE_STARTED: &str = "OSUpdateStarted";
    pub const OS_UPDATE_STAGED: &str = "OSUpdateStaged";
    pub const OS_UPGRADE_APPLIED: &str = "OSUpgradeApplied";
    pub const OS_UPGRADE_SKIPPED: &str = "OSUpgradeSkipped";
    pub const BOOT_RESYNC: &str = "BootResync";
    pub const SERVICE_RELOAD: &str = "ServiceReload";
    pub const FAILED_SERVICE_RELOAD: &str = "FailedServiceReload";
    pub const SERVICE_RESTART: &str = "ServiceRestart";
    pub const FAILED_SERVICE_RESTART: &str = "FailedServiceRestart";
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
