//! The pure configuration model shared by the agent and the companion (no I/O).
//!
//! # Ignition configs
//! - [`Config`] is the one internal form: Ignition spec 3.5 types (serde, camelCase, round-trips
//!   to JSON). [`Config::parse`] reads bare Ignition JSON of spec 2.2 or 3.0–3.5 (2.2 is translated
//!   the way the MCO does; 3.x fields newer than the declared version are errors), validates it and
//!   returns the internal form; [`ParsedConfig::parse`] also returns the declared
//!   [`SpecVersion`] and warnings (unknown keys).
//! - [`Config::validate`] / [`validate`]: Ignition's rules plus the MCO's (`invalid mode 04755 for
//!   /etc/x, cannot exceed 0777`) and node rules (only `data:` sources), every problem as an
//!   [`Issue`] with a JSON path.
//! - [`File::decoded_contents`]: `data:` URL (RFC 2397, [`dataurl`]) → gunzip → hash check.
//!
//! # Cluster objects
//! - [`MachineConfig::from_slice`] reads a MachineConfig from YAML (1.1 rules: `mode: 0755` is
//!   octal) or JSON; [`MachineConfig::ignition`] parses its `spec.config`;
//!   [`MachineConfig::to_json`] writes it back (the agent's `currentconfig`).
//! - [`MachineConfigPool`] and [`MachineConfiguration`] (node disruption policies; its API group
//!   is `operator.openshift.io/v1`, not the MCO's own).
//!
//! # Updates
//! - [`reconcile()`]`(old, new, arch)`: the MCD's in-place rules and reason strings
//!   ([`Unreconcilable`] displays as `can't reconcile config A with B: ...`).
//! - [`Plan::new`]`(old, new, &PolicyOptions)`: files/units added/changed/removed, passwd, OS
//!   update, kernel type, extension packages, FIPS, the `rpm-ostree kargs` argv ([`kargs`]),
//!   node-disruption [`Action`]s under [`ClusterPolicies`] (the default table, or the cluster's
//!   with the user's merged in) and the [`Decision`] behind each change ([`policy`]),
//!   drain (with the registries.conf analysis, [`registries`]) and reboot. It serializes to the
//!   `diff --json` shape.
//! - [`legacy_action`]: the first-boot (no policy) calculation.
//!
//! ```
//! use machine_config::{MachineConfig, Plan, PolicyOptions};
//!
//! let old = MachineConfig::from_slice(br#"
//! apiVersion: machineconfiguration.openshift.io/v1
//! kind: MachineConfig
//! metadata: {name: rendered-worker-1}
//! spec:
//!   config: {ignition: {version: 3.2.0}}
//! "#)?;
//! let new = MachineConfig::from_slice(br#"
//! apiVersion: machineconfiguration.openshift.io/v1
//! kind: MachineConfig
//! metadata: {name: rendered-worker-2}
//! spec:
//!   config:
//!     ignition: {version: 2.2.0}
//!     storage:
//!       files:
//!       - {filesystem: root, path: /etc/containers/policy.json, mode: 0644,
//!          contents: {source: "data:,%7B%7D"}}
//! "#)?;
//! let file = &new.ignition()?.storage.files[0];
//! assert_eq!((file.mode, file.decoded_contents()?), (Some(0o644), b"{}".to_vec()));
//! let plan = Plan::new(&old, &new, &PolicyOptions::default())?;
//! assert!(plan.reconcilable && !plan.reboot && !plan.drain);
//! assert!(plan.to_json().contains(r#""actions":[{"type":"Reload","unit":"crio.service"}]"#));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Errors: [`ParseError`] (every message names the field as a JSON path), [`DecodeError`]
//! (names the file).

pub mod closest;
pub mod contents;
pub mod contents_reader;
pub mod controller_config;
pub mod dataurl;
pub mod diff;
pub mod document;
pub mod downtranslate;
pub mod error;
pub mod extensions;
pub mod feature_gates;
pub mod fleetlock;
pub mod ignition;
pub mod ignition_json;
pub mod irreconcilable;
pub mod kargs;
pub mod layering;
pub mod machineconfig;
pub mod machineconfiguration;
pub mod mco;
pub mod pinned_image_set;
pub mod plan;
pub mod policy;
pub mod pool;
pub mod pull_auth;
pub mod reconcile;
pub mod registries;
pub mod render;
pub mod source;
mod tracked;

pub use contents::DecodeError;
pub use contents_reader::ContentsReader;
pub use controller_config::ControllerConfig;
pub use diff::{Changes, ConfigDiff};
pub use error::{Issue, ParseError};
pub use ignition::{
    Config, Directory, Dropin, File, Link, ParsedConfig, Resource, SpecVersion, Unit,
    deferring_contents_base64, validate,
};
pub use ignition_json::IgnitionJson;
pub use machineconfig::{MachineConfig, MachineConfigSpec};
pub use machineconfiguration::{MachineConfiguration, NodeDisruptionPolicy};
pub use pinned_image_set::PinnedImageSet;
pub use plan::{Plan, PlanError, PolicyOptions};
pub use policy::{Action, ClusterPolicies, Decision, LegacyAction, legacy_action};
pub use pool::MachineConfigPool;
pub use reconcile::{ReconcileOptions, Unreconcilable, reconcile, reconcile_with};
pub use source::{Source, SourceTable};
