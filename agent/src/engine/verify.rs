//! Validation of the node against a config: the OS (booted image and kernel arguments, through
//! rpm-ostree) and the disk (files and units, every mismatch). Used at start-up against the
//! current config, before an update (preflight), and after a reboot against the config the
//! node should now be in.

use std::collections::BTreeSet;

use machine_config::mco::image::layered_image;
use machine_config::{Config, MachineConfig};

use super::{Engine, os};
use crate::validate::{SpecRules, ValidationReport, validate_as, validate_paths_as};

/// What validating the node against a config found.
#[derive(Debug, Clone)]
pub struct NodeValidation {
    /// What was validated against, as the MCD names it in its error: the config's name, or in
    /// image mode the image (`validateOnDiskStateOrImage`).
    pub config: String,
    /// OS mismatches (MCD messages), or why the OS could not be checked.
    pub os: Vec<String>,
    /// Files and units.
    pub files: ValidationReport,
    /// The previous boot's failure to write its staged deployment, when there was one: the
    /// likely reason the node is not in the config.
    pub possible_root_cause: Option<String>,
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
    /// `unexpected on-disk state validating against <config>: <m1>; <m2>`, then the MCD's
    /// `; possible root cause: <finalization error>` when the previous boot logged one.
    pub fn reason(&self) -> String {
        let mut reason = format!(
            "unexpected on-disk state validating against {}: {}",
            self.config,
            self.messages().join("; ")
        );
        if let Some(cause) = &self.possible_root_cause {
            reason.push_str(&format!("; possible root cause: {cause}"));
        }
        reason
    }
}

/// What a validation against `config` names: the image a node in image mode runs, else the
/// config (the MCD's `validateOnDiskStateOrImage`).
pub(crate) fn validated_against(config: &MachineConfig) -> &str {
    layered_image(config).unwrap_or(config.name())
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
            config: validated_against(config).to_string(),
            os: os_problems,
            files: validate_as(&self.root, config.name(), ign, SpecRules::of(config)),
            possible_root_cause: self.possible_root_cause(),
        }
    }

    /// The MCD's check before it calls a node Done in `config` (`updateConfigAndState` →
    /// `verifyExtensionPackages`): the packages of every extension are installed. `Err` is
    /// the MCD's reason. Not checked without an RPM database to ask ([`super::Seams::packages`]).
    pub async fn verify_extensions(&self, config: &MachineConfig) -> Result<(), String> {
        let Some(db) = &self.seams.packages else {
            return Ok(());
        };
        if config.spec.extensions.is_empty() {
            return Ok(());
        }
        tracing::info!(
            config = config.name(),
            "Verifying extension packages are installed for config {}",
            config.name()
        );
        crate::os::verify_extensions(db.as_ref(), &config.spec.extensions).await
    }

    /// Validates files and units only (the drift monitor's check).
    pub fn validate_files(&self, config: &MachineConfig, ign: &Config) -> ValidationReport {
        validate_as(&self.root, config.name(), ign, SpecRules::of(config))
    }

    /// Validates what the config says about the `changed` paths only (a drift event's check).
    pub fn validate_paths(
        &self,
        config: &MachineConfig,
        ign: &Config,
        changed: &BTreeSet<String>,
    ) -> ValidationReport {
        let rules = SpecRules::of(config);
        validate_paths_as(&self.root, config.name(), ign, changed, rules)
    }
}
