//! The cluster's feature gates, read as the MCD reads them (library-go's feature-gate reader):
//! `featuregates.config.openshift.io/cluster` lists, per OpenShift version, the gates enabled
//! and disabled; the entry that counts is the one of the cluster's version, which a node takes
//! from `clusterversions.config.openshift.io/version` (`status.desired.version`, else the newest
//! `status.history` entry's). A gate in neither list is disabled.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::machineconfig::nullable;

/// API group of the cluster's configuration objects.
pub const CONFIG_GROUP: &str = "config.openshift.io";
/// `apiVersion` of FeatureGate and ClusterVersion.
pub const CONFIG_API_VERSION: &str = "config.openshift.io/v1";
/// The cluster's FeatureGate.
pub const FEATURE_GATE_NAME: &str = "cluster";
/// The cluster's ClusterVersion.
pub const CLUSTER_VERSION_NAME: &str = "version";

/// The gate under which the MachineConfigNode reports image mode (`AppliedFiles`,
/// `AppliedOSImage`, `ImagePulledFromRegistry`, `configImage`).
pub const IMAGE_MODE_STATUS_REPORTING: &str = "ImageModeStatusReporting";
/// The gate under which updates honour `MachineConfiguration/cluster`
/// `spec.irreconcilableValidationOverrides` and the MachineConfigNode reports irreconcilable
/// differences.
pub const IRRECONCILABLE_MACHINE_CONFIG: &str = "IrreconcilableMachineConfig";

/// `featuregates.config.openshift.io` (the fields a node reads).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureGate {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub status: FeatureGateStatus,
}

/// `status` of a FeatureGate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureGateStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub feature_gates: Vec<FeatureGateDetails>,
}

/// The gates of one OpenShift version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FeatureGateDetails {
    #[serde(default)]
    pub version: String,
    #[serde(default, deserialize_with = "nullable")]
    pub enabled: Vec<FeatureGateName>,
    #[serde(default, deserialize_with = "nullable")]
    pub disabled: Vec<FeatureGateName>,
}

/// `{"name": "..."}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureGateName {
    #[serde(default)]
    pub name: String,
}

/// `clusterversions.config.openshift.io` (the fields a node reads).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVersion {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub status: ClusterVersionStatus,
}

/// `status` of a ClusterVersion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVersionStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub desired: Release,
    /// Newest first.
    #[serde(default, deserialize_with = "nullable")]
    pub history: Vec<Release>,
}

/// A release (`status.desired`, an entry of `status.history`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Release {
    #[serde(default)]
    pub version: String,
}

crate::api_resource!(
    FeatureGate,
    CONFIG_GROUP,
    CONFIG_API_VERSION,
    "v1",
    "FeatureGate",
    "featuregates",
    k8s_openapi::ClusterResourceScope
);
crate::api_resource!(
    ClusterVersion,
    CONFIG_GROUP,
    CONFIG_API_VERSION,
    "v1",
    "ClusterVersion",
    "clusterversions",
    k8s_openapi::ClusterResourceScope
);

impl ClusterVersion {
    /// The version whose gates count: `status.desired.version`, else the newest history
    /// entry's; `None` while the object has neither.
    pub fn version(&self) -> Option<&str> {
        Some(self.status.desired.version.as_str())
            .filter(|v| !v.is_empty())
            .or_else(|| self.status.history.first().map(|r| r.version.as_str()))
            .filter(|v| !v.is_empty())
    }
}

/// The enabled and disabled gates of one version, as sets (an order change of the lists is no
/// change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureSet {
    pub enabled: BTreeSet<String>,
    pub disabled: BTreeSet<String>,
}

impl FeatureSet {
    /// The gates of `version` in `gate`; the MCD's error when the FeatureGate has no entry for
    /// it (the operator has not written it yet: retried).
    pub fn of(gate: &FeatureGate, version: &str) -> Result<Self, String> {
        let details = gate
            .status
            .feature_gates
            .iter()
            .find(|d| d.version == version)
            .ok_or_else(|| {
                format!(
                    "missing desired version {version:?} in featuregates.config.openshift.io/cluster"
                )
            })?;
        let names = |list: &[FeatureGateName]| list.iter().map(|g| g.name.clone()).collect();
        Ok(FeatureSet {
            enabled: names(&details.enabled),
            disabled: names(&details.disabled),
        })
    }

    /// Whether `gate` is enabled (a gate in neither list is not).
    pub fn enabled(&self, gate: &str) -> bool {
        self.enabled.contains(gate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gate(value: serde_json::Value) -> FeatureGate {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_version_of_a_cluster() {
        for (status, version) in [
            (
                json!({"desired": {"version": "4.18.3"}, "history": [{"version": "4.18.2"}]}),
                Some("4.18.3"),
            ),
            (
                json!({"desired": {"version": ""}, "history": [{"version": "4.18.2"}, {"version": "4.17.9"}]}),
                Some("4.18.2"),
            ),
            (json!({"history": null}), None),
            (json!(null), None),
        ] {
            let cv: ClusterVersion =
                serde_json::from_value(json!({"metadata": {"name": "version"}, "status": status}))
                    .unwrap();
            assert_eq!(cv.version(), version, "{status}");
        }
    }

    #[test]
    fn the_gates_of_a_version() {
        let fg = gate(json!({
            "metadata": {"name": "cluster"},
            "status": {"featureGates": [
                {"version": "4.17.9", "enabled": [{"name": "A"}], "disabled": null},
                {"version": "4.18.3",
                 "enabled": [{"name": IMAGE_MODE_STATUS_REPORTING}, {"name": "B"}],
                 "disabled": [{"name": IRRECONCILABLE_MACHINE_CONFIG}]}
            ]}
        }));
        let set = FeatureSet::of(&fg, "4.18.3").unwrap();
        assert!(set.enabled(IMAGE_MODE_STATUS_REPORTING));
        assert!(!set.enabled(IRRECONCILABLE_MACHINE_CONFIG));
        assert!(!set.enabled("NotListed"));
        let old = FeatureSet::of(&fg, "4.17.9").unwrap();
        assert!(old.enabled("A") && old.disabled.is_empty());
        assert_eq!(
            FeatureSet::of(&fg, "4.19.0").unwrap_err(),
            "missing desired version \"4.19.0\" in featuregates.config.openshift.io/cluster"
        );
        // The same gates in another order are the same set.
        let reordered = gate(json!({"status": {"featureGates": [
            {"version": "4.18.3",
             "enabled": [{"name": "B"}, {"name": IMAGE_MODE_STATUS_REPORTING}],
             "disabled": [{"name": IRRECONCILABLE_MACHINE_CONFIG}]}
        ]}}));
        assert_eq!(FeatureSet::of(&reordered, "4.18.3").unwrap(), set);
    }
}
