//! Reading a policy file: a `MachineConfiguration` (`operator.openshift.io/v1`, YAML or JSON)
//! whose `spec.nodeDisruptionPolicy` is merged over the default table as the MCO's operator
//! merges it, and whose `spec.irreconcilableValidationOverrides` relaxes the reconcile check.
//! `diff --policy`, `once-from --policy` and `start --policy` (standalone) read it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use machine_config::machineconfiguration::IrreconcilableValidationOverrides;
use machine_config::{ClusterPolicies, MachineConfiguration};

/// The policies of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyFile {
    pub path: PathBuf,
    /// The default table with the file's policies merged in.
    pub policies: ClusterPolicies,
    pub overrides: IrreconcilableValidationOverrides,
}

/// Reads and checks the file; an error names the file and the offending field.
pub fn read_policy_file(path: &Path) -> Result<PolicyFile> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mc =
        MachineConfiguration::from_slice(&bytes).with_context(|| path.display().to_string())?;
    Ok(PolicyFile {
        path: path.to_path_buf(),
        policies: ClusterPolicies::merged(&mc.spec.node_disruption_policy),
        overrides: mc.spec.irreconcilable_validation_overrides,
    })
}
