//! Where an update's node disruption policies come from ([`PolicySource`]): the default table,
//! a policy file, or (the daemon with a cluster) `MachineConfiguration/cluster`. The engine
//! asks when it plans a new update and records what it got with the update, so a resumed
//! update runs the actions it was planned with even if the policies changed since.

use anyhow::Result;
use async_trait::async_trait;
use machine_config::ClusterPolicies;
use machine_config::machineconfiguration::IrreconcilableValidationOverrides;
use serde::{Deserialize, Serialize};

use crate::input::policy::PolicyFile;

/// The policies a plan is made with, and where they come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActivePolicy {
    pub policies: ClusterPolicies,
    #[serde(default)]
    pub overrides: IrreconcilableValidationOverrides,
    /// For logs: `the default policies`, `policy file FILE`, `MachineConfiguration/cluster
    /// generation 4`.
    pub source: String,
}

impl ActivePolicy {
    /// The default table.
    pub fn defaults() -> Self {
        ActivePolicy {
            policies: ClusterPolicies::default(),
            overrides: IrreconcilableValidationOverrides::default(),
            source: "the default policies".to_string(),
        }
    }

    /// A policy file's.
    pub fn from_file(file: &PolicyFile) -> Self {
        ActivePolicy {
            policies: file.policies.clone(),
            overrides: file.overrides.clone(),
            source: format!("policy file {}", file.path.display()),
        }
    }
}

/// Gives the policies for a plan made now.
#[async_trait]
pub trait PolicySource: Send + Sync {
    /// The policies current now; an error says why there are none (the update does not
    /// start, nothing is changed).
    async fn current(&self) -> Result<ActivePolicy>;
}

/// Always the same policies (the default table, or a file read at start).
pub struct FixedPolicy(pub ActivePolicy);

#[async_trait]
impl PolicySource for FixedPolicy {
    async fn current(&self) -> Result<ActivePolicy> {
        Ok(self.0.clone())
    }
}
