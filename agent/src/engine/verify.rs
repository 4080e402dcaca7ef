//! Validation of the node against a config: the OS (booted image and kernel arguments, through
//! rpm-ostree) and the disk (files and units, every mismatch). Used at start-up against the
//! current config, before an update (preflight), and after a reboot against the config the
//! node should now be in.

use std::collections::BTreeSet;

use machine_config::{Config, MachineConfig};

use super::{Engine, os};
use crate::validate::{ValidationReport, validate, validate_paths};

/// What validating the node against a config found.
#[derive(Debug, Clone)]
pub struct NodeValidation {
    /// The config's name.
    pub config: String,
    /// OS mismatches (MCD messages), or why the OS could not be checked.
    pub os: Vec<String>,
    /// Files and units.
    pub files: ValidationReport,
}

impl NodeValidation {
    pub fn is_ok(&self) -> bool {
        self.os.is_empty() && self.files.is_ok()
    }

    /// Every mismatch message (the MCD's wording), OS first.
    pub fn messages(&self) -> Vec<String> {
        self.os
            .iter()
            .cloned()
            .chain(self.files.mismatches.iter().map(|m| m.message.clone()))
            .collect()
    }

    /// The MCD's error, with every mismatch instead of the first:
    /// `unexpected on-disk state validating against <config>: <m1>; <m2>`.
    pub fn reason(&self) -> String {
        format!(
            "unexpected on-disk state validating against {}: {}",
            self.config,
            self.messages().join("; ")
        )
    }
}

impl Engine {
    /// Whether OS checks apply: rpm-ostree is there and OS work is not left out.
    pub(crate) fn checks_os(&self) -> bool {
        self.seams.os.is_some() && !self.opts.skip_os
    }

    /// Validates the node against `config` (its Ignition config `ign`).
    pub async fn validate_node(&self, config: &MachineConfig, ign: &Config) -> NodeValidation {
        let mut os_problems = Vec::new();
        if let (Some(os), true) = (&self.seams.os, self.checks_os()) {
            match os::check(os.as_ref(), config).await {
                Ok(m) => os_problems.extend(m.iter().map(ToString::to_string)),
                Err(e) => os_problems.push(format!("could not check the OS: {e:#}")),
            }
        }
        NodeValidation {
            config: config.name().to_string(),
            os: os_problems,
            files: validate(&self.root, config.name(), ign),
        }
    }

    /// Validates files and units only (the drift monitor's check).
    pub fn validate_files(&self, config: &MachineConfig, ign: &Config) -> ValidationReport {
        validate(&self.root, config.name(), ign)
    }

    /// Validates what the config says about the `changed` paths only (a drift event's check).
    pub fn validate_paths(
        &self,
        config: &MachineConfig,
        ign: &Config,
        changed: &BTreeSet<String>,
    ) -> ValidationReport {
        validate_paths(&self.root, config.name(), ign, changed)
    }
}
