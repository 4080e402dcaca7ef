//! The `MachineConfiguration` object: user node-disruption policies (and the irreconcilable
//! validation overrides).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::parse_value;
use crate::error::{Issue, ParseError};
use crate::ignition::{typed, unreachable_json};
use crate::machineconfig::{check_type_meta_of, nullable};

/// The name of the cluster's MachineConfiguration (the MCO's operator knobs object).
pub const CLUSTER_NAME: &str = "cluster";
/// API group of MachineConfiguration (the operator's configuration, not the MCO's own group).
pub const OPERATOR_GROUP: &str = "operator.openshift.io";
/// `apiVersion` of MachineConfiguration.
pub const OPERATOR_API_VERSION: &str = "operator.openshift.io/v1";

/// A MachineConfiguration (the cluster's is named `cluster`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfiguration {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: MachineConfigurationSpec,
    #[serde(default, deserialize_with = "nullable")]
    pub status: MachineConfigurationStatus,
}

/// `spec` of a MachineConfiguration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub node_disruption_policy: NodeDisruptionPolicy,
    #[serde(default, deserialize_with = "nullable")]
    pub irreconcilable_validation_overrides: IrreconcilableValidationOverrides,
}

/// `status` of a MachineConfiguration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub observed_generation: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub node_disruption_policy_status: NodeDisruptionPolicyStatus,
}

/// `status.nodeDisruptionPolicyStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyStatus {
    #[serde(default, deserialize_with = "nullable")]
    pub cluster_policies: NodeDisruptionPolicy,
}

/// Node disruption policies: what to do when a file, unit or the SSH keys change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicy {
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub files: Vec<FilePolicy>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub units: Vec<UnitPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sshkey: Option<SshKeyPolicy>,
}

/// Actions for a file path (or every file under a directory path).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePolicy {
    pub path: String,
    #[serde(default, deserialize_with = "nullable")]
    pub actions: Vec<PolicyAction>,
}

/// Actions for a unit, matched by exact name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitPolicy {
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub actions: Vec<PolicyAction>,
}

/// Actions for an SSH key (or password hash) change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SshKeyPolicy {
    #[serde(default, deserialize_with = "nullable")]
    pub actions: Vec<PolicyAction>,
}

/// One action as written in a MachineConfiguration: `{"type": "Restart", "restart":
/// {"serviceName": "crio.service"}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyAction {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload: Option<ServiceRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<ServiceRef>,
}

/// `{"serviceName": "x.service"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceRef {
    pub service_name: String,
}

/// `spec.irreconcilableValidationOverrides`: storage sections the reconcile check may skip.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IrreconcilableValidationOverrides {
    /// Any of `Disks`, `FileSystems`, `Raid`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub storage: Vec<String>,
}

/// Action types a policy may name in the status (the operator's merged policies); a user's
/// policy may not name `Special` ([`crate::policy::SPEC_ACTION_TYPES`]).
pub const POLICY_ACTION_TYPES: [&str; 7] = [
    "Reboot",
    "Drain",
    "Reload",
    "Restart",
    "DaemonReload",
    "None",
    "Special",
];

impl MachineConfiguration {
    /// Parses a MachineConfiguration from YAML or JSON, checking every policy action.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, ParseError> {
        Self::from_value(parse_value(bytes)?)
    }

    /// Parses a MachineConfiguration from a decoded JSON value.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        check_type_meta_of(&value, OPERATOR_API_VERSION, "MachineConfiguration")?;
        let mc: MachineConfiguration = typed(value)?;
        let issues = mc
            .spec
            .node_disruption_policy
            .check("$.spec.nodeDisruptionPolicy");
        if issues.is_empty() {
            Ok(mc)
        } else {
            Err(ParseError::Invalid(issues))
        }
    }

    /// Reads the object as the API server holds it: the type is checked, the policies are
    /// not (the API validated them; an action it does not know counts as a reboot).
    pub fn from_api_value(value: Value) -> Result<Self, ParseError> {
        check_type_meta_of(&value, OPERATOR_API_VERSION, "MachineConfiguration")?;
        typed(value)
    }

    /// `metadata.generation` (0 when absent).
    pub fn generation(&self) -> i64 {
        self.metadata.generation.unwrap_or(0)
    }

    /// The status was computed from the current spec (`status.observedGeneration ==
    /// metadata.generation`): the MCD uses the cluster's policies only then.
    pub fn policy_status_current(&self) -> bool {
        self.status.observed_generation == self.generation()
    }

    /// Serializes to compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| unreachable_json(&e))
    }
}

impl NodeDisruptionPolicy {
    /// Checks a user's policy (`spec.nodeDisruptionPolicy`) as the API server does, in its
    /// words; `at` locates the policy in its document.
    pub fn check(&self, at: &str) -> Vec<Issue> {
        crate::policy::check_spec(self, at)
    }
}

impl k8s_openapi::Resource for MachineConfiguration {
    const API_VERSION: &'static str = OPERATOR_API_VERSION;
    const GROUP: &'static str = OPERATOR_GROUP;
    const KIND: &'static str = "MachineConfiguration";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "machineconfigurations";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for MachineConfiguration {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
