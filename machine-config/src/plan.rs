//! The update plan between two MachineConfigs: reconcilability, diff, actions, drain, reboot.
//! `serde_json::to_string(&plan)` is the agent's `diff --json` output.

use serde::Serialize;

use crate::contents::DecodeError;
use crate::diff::{Changes, ConfigDiff, ExtensionChanges};
use crate::error::ParseError;
use crate::ignition::{Config, File};
use crate::machineconfig::MachineConfig;
use crate::machineconfiguration::IrreconcilableValidationOverrides;
use crate::policy::{self, Action, ClusterPolicies, Decision};
use crate::reconcile::{ReconcileOptions, reconcile_with};
use crate::registries::{self, REGISTRIES_CONF};

/// Inputs of a plan besides the two configs.
#[derive(Debug, Clone, Default)]
pub struct PolicyOptions {
    /// The force file is present: re-apply everything and reboot.
    pub force: bool,
    /// The node disruption policies (the default table, or the cluster's with the user's
    /// merged in: [`ClusterPolicies::merged`]).
    pub policies: ClusterPolicies,
    /// Node architecture for the reconcile check (`x86_64`, `aarch64`).
    pub arch: String,
    /// Node FIPS state, when known.
    pub fips_enabled: Option<bool>,
    /// Storage sections the reconcile check may skip.
    pub overrides: IrreconcilableValidationOverrides,
}

/// Why no plan could be made at all (a config does not parse or decode).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// (The parse error is said in the text, not returned as `source()`: a chain says it once.)
    #[error("parsing {which} config {name:?}: {error}")]
    Parse {
        which: &'static str,
        name: String,
        error: ParseError,
    },
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{REGISTRIES_CONF}: {0}")]
    Registries(String),
}

/// The update plan, in the exact shape of `mco-agent diff --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub reconcilable: bool,
    pub reason: Option<String>,
    pub files: Changes,
    pub units: Changes,
    pub passwd: bool,
    pub os_update: bool,
    pub kernel_type: bool,
    pub extensions: ExtensionChanges,
    pub fips: bool,
    pub kargs: Vec<String>,
    pub actions: Vec<Action>,
    /// Which policy entry chose the actions of each change ([`Decision`]'s display is the
    /// line `diff` and the engine's log print).
    pub decisions: Vec<Decision>,
    pub drain: bool,
    pub reboot: bool,
    /// The full diff (not serialized; the JSON carries its summary).
    #[serde(skip)]
    pub diff: ConfigDiff,
}

fn parse(which: &'static str, mc: &MachineConfig) -> Result<Config, PlanError> {
    mc.ignition().map_err(|error| PlanError::Parse {
        which,
        name: mc.name().to_string(),
        error,
    })
}

fn registries_text(cfg: &Config) -> Result<String, PlanError> {
    let file: Option<&File> = cfg.storage.files.iter().find(|f| f.path == REGISTRIES_CONF);
    let bytes = match file {
        Some(f) => f.decoded_contents()?,
        None => Vec::new(),
    };
    String::from_utf8(bytes).map_err(|_| PlanError::Registries("not UTF-8".into()))
}

impl Plan {
    /// Plans the move from `old` to `new`.
    pub fn new(
        old: &MachineConfig,
        new: &MachineConfig,
        opts: &PolicyOptions,
    ) -> Result<Plan, PlanError> {
        let old_ign = parse("old", old)?;
        let new_ign = parse("new", new)?;
        let diff = ConfigDiff::new(old, new, &old_ign, &new_ign, opts.force)?;
        let reconcile_opts = ReconcileOptions {
            arch: opts.arch.clone(),
            fips_enabled: opts.fips_enabled,
            overrides: opts.overrides.clone(),
        };
        let verdict = reconcile_with(old, new, &reconcile_opts);
        let (decided, drain) = match &verdict {
            Err(_) => (policy::Decided::default(), false),
            Ok(()) => {
                let decided = policy::decide(&diff, &opts.policies, opts.force);
                let actions = &decided.actions;
                let mut registries_error = None;
                let drain = policy::drain_required(actions, || {
                    let verdict = registries_text(&old_ign).and_then(|o| {
                        let n = registries_text(&new_ign)?;
                        registries::unsafe_change(&o, &n).map_err(PlanError::Registries)
                    });
                    match verdict {
                        Ok(v) => v.is_some(),
                        Err(e) => {
                            registries_error = Some(e);
                            true
                        }
                    }
                });
                if let Some(e) = registries_error {
                    return Err(e);
                }
                (decided, drain)
            }
        };
        let policy::Decided { actions, decisions } = decided;
        Ok(Plan {
            reconcilable: verdict.is_ok(),
            reason: verdict.err().map(|e| e.to_string()),
            files: diff.files.clone(),
            units: diff.units.clone(),
            passwd: diff.passwd,
            os_update: diff.os_update,
            kernel_type: diff.kernel_type,
            extensions: diff.extensions.clone(),
            fips: diff.fips,
            kargs: diff.kargs.clone(),
            reboot: actions.contains(&Action::Reboot),
            actions,
            decisions,
            drain,
            diff,
        })
    }

    /// One line per decision: which policy entry chose the actions of each change.
    pub fn explain(&self) -> Vec<String> {
        self.decisions.iter().map(ToString::to_string).collect()
    }

    /// The plan as one JSON object (`diff --json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| crate::ignition::unreachable_json(&e))
    }
}
