//! The cluster's feature gates, followed as the MCD follows them: `FeatureGate/cluster`'s
//! entry for the cluster's version (`ClusterVersion/version`), read once at start-up (waiting
//! up to a minute), then watched; when the enabled set changes the agent restarts (the MCD's
//! process exits and its DaemonSet brings it back; here systemd does), so every part of the
//! agent runs with one set for its whole life.
//!
//! Where the MCD differs: a cluster that has no FeatureGate (not OpenShift: the types are not
//! served, or the node may not read them) runs with every gate off instead of the MCD's exit
//! after a minute; a set that cannot be resolved within the minute (the FeatureGate has no entry
//! for the cluster's version yet) starts the agent with every gate off too and restarts it once
//! the set is known, where the MCD exits and is restarted until it is; the order of the lists
//! and the disabled list (a gate not enabled is off either way) restart nothing.

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use machine_config::feature_gates::{
    ClusterVersion, FeatureGate, FeatureSet, IMAGE_MODE_STATUS_REPORTING,
    IRRECONCILABLE_MACHINE_CONFIG,
};
use machine_config::mco::node_image_conditions::Gates;

/// How long start-up waits for the gates (the MCD's `FeatureGatesHandler.Connect`).
pub const INITIAL_WAIT: Duration = Duration::from_secs(60);

/// Event reasons the MCD's feature-gate reader records.
pub const FEATURE_GATES_INITIALIZED: &str = "FeatureGatesInitialized";
pub const FEATURE_GATES_MODIFIED: &str = "FeatureGatesModified";

/// What the two objects say together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// The gates of the cluster's version.
    Gates(FeatureSet),
    /// No FeatureGate to read: every gate is off.
    Absent,
    /// The objects exist but say no set yet (why).
    Unresolved(String),
}

/// The gates the agent acts on, from a set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentGates {
    /// `ImageModeStatusReporting`: the MachineConfigNode's image-mode condition set.
    pub image_mode_status_reporting: bool,
    /// `IrreconcilableMachineConfig`: updates honour `spec.irreconcilableValidationOverrides`
    /// and the MachineConfigNode reports irreconcilable differences.
    pub irreconcilable_machine_config: bool,
}

impl AgentGates {
    pub fn of(set: &FeatureSet) -> Self {
        AgentGates {
            image_mode_status_reporting: set.enabled(IMAGE_MODE_STATUS_REPORTING),
            irreconcilable_machine_config: set.enabled(IRRECONCILABLE_MACHINE_CONFIG),
        }
    }

    /// What the MachineConfigNode holds under these gates.
    pub fn node_conditions(&self) -> Gates {
        Gates {
            image_mode_status_reporting: self.image_mode_status_reporting,
        }
    }
}

/// The reading of `gate` (`None`: absent) at the cluster's `version`.
pub fn resolve(gate: Option<&FeatureGate>, version: Option<&ClusterVersion>) -> Reading {
    let Some(gate) = gate else {
        return Reading::Absent;
    };
    let Some(version) = version else {
        return Reading::Unresolved("ClusterVersion/version does not exist".into());
    };
    let Some(v) = version.version() else {
        return Reading::Unresolved("ClusterVersion/version names no version yet".into());
    };
    match FeatureSet::of(gate, v) {
        Ok(set) => Reading::Gates(set),
        Err(why) => Reading::Unresolved(why),
    }
}

/// The readings of the two followed objects: one each time either changes, once both have
/// said something.
pub fn readings(
    gate: BoxStream<'static, Option<FeatureGate>>,
    version: BoxStream<'static, Option<ClusterVersion>>,
) -> BoxStream<'static, Reading> {
    enum Change {
        Gate(Option<FeatureGate>),
        Version(Option<ClusterVersion>),
    }
    futures::stream::select(gate.map(Change::Gate), version.map(Change::Version))
        .scan((None, None), |(g, v), change| {
            match change {
                Change::Gate(x) => *g = Some(x),
                Change::Version(x) => *v = Some(x),
            }
            let out = match (&*g, &*v) {
                // A FeatureGate that is absent needs no version.
                (Some(None), _) => Some(Reading::Absent),
                (Some(Some(gate)), Some(version)) => Some(resolve(Some(gate), version.as_ref())),
                _ => None,
            };
            futures::future::ready(Some(out))
        })
        .filter_map(futures::future::ready)
        .boxed()
}

/// The set to start with: the first definite reading within `wait` (absent: every gate off);
/// without one, every gate off, said in a warning (the agent restarts once the set is known).
pub async fn initial<S: Stream<Item = Reading> + Unpin>(
    readings: &mut S,
    wait: Duration,
) -> FeatureSet {
    let first = tokio::time::timeout(wait, async {
        let mut last = None;
        while let Some(reading) = readings.next().await {
            match reading {
                Reading::Gates(set) => return Some(set),
                Reading::Absent => {
                    tracing::info!("no FeatureGate/cluster to read: every feature gate is off");
                    return Some(FeatureSet::default());
                }
                Reading::Unresolved(why) => {
                    tracing::info!("feature gates not known yet: {why}");
                    last = Some(why);
                }
            }
        }
        last.map(|_| FeatureSet::default())
    })
    .await;
    match first {
        Ok(Some(set)) => set,
        Ok(None) | Err(_) => {
            tracing::warn!(
                "the feature gates could not be read within {wait:?}: every gate is off until they can (the agent restarts then)"
            );
            FeatureSet::default()
        }
    }
}

/// Resolves with the new set once a reading's enabled gates differ from `started`'s; absent
/// or unresolved readings change nothing (the MCD's reader keeps its set then too).
pub async fn changed<S: Stream<Item = Reading> + Unpin>(
    readings: &mut S,
    started: &FeatureSet,
) -> Option<FeatureSet> {
    while let Some(reading) = readings.next().await {
        if let Reading::Gates(set) = reading
            && set.enabled != started.enabled
        {
            return Some(set);
        }
    }
    None
}

/// `Enabled: [A B], Disabled: [C]`, for the journal and the events.
pub fn describe(set: &FeatureSet) -> String {
    let list =
        |s: &std::collections::BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(" ");
    format!(
        "Enabled: [{}], Disabled: [{}]",
        list(&set.enabled),
        list(&set.disabled)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gate(enabled: &[&str]) -> FeatureGate {
        let names: Vec<_> = enabled.iter().map(|n| json!({"name": n})).collect();
        serde_json::from_value(json!({"status": {"featureGates": [
            {"version": "4.18.3", "enabled": names, "disabled": [{"name": "Other"}]}
        ]}}))
        .unwrap()
    }

    fn version(v: &str) -> ClusterVersion {
        serde_json::from_value(json!({"status": {"desired": {"version": v}}})).unwrap()
    }

    #[test]
    fn readings_of_the_two_objects() {
        let on = gate(&[IMAGE_MODE_STATUS_REPORTING]);
        let set = FeatureSet::of(&on, "4.18.3").unwrap();
        for (g, v, expected) in [
            (None, None, Reading::Absent),
            (Some(&on), Some(version("4.18.3")), Reading::Gates(set.clone())),
            (
                Some(&on),
                None,
                Reading::Unresolved("ClusterVersion/version does not exist".into()),
            ),
            (
                Some(&on),
                Some(version("")),
                Reading::Unresolved("ClusterVersion/version names no version yet".into()),
            ),
            (
                Some(&on),
                Some(version("4.19.0")),
                Reading::Unresolved(
                    "missing desired version \"4.19.0\" in featuregates.config.openshift.io/cluster"
                        .into(),
                ),
            ),
        ] {
            assert_eq!(resolve(g, v.as_ref()), expected);
        }
        assert!(AgentGates::of(&set).image_mode_status_reporting);
        assert!(!AgentGates::of(&set).irreconcilable_machine_config);
        assert_eq!(
            describe(&set),
            "Enabled: [ImageModeStatusReporting], Disabled: [Other]"
        );
    }

    /// Start-up takes the first definite reading; a change of the enabled set (not of the
    /// order, not of the disabled list) is what restarts the agent.
    #[tokio::test(start_paused = true)]
    async fn initial_set_and_changes() {
        let (gate_tx, gate_rx) = tokio::sync::mpsc::unbounded_channel();
        let (version_tx, version_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut r = readings(
            tokio_stream::wrappers::UnboundedReceiverStream::new(gate_rx).boxed(),
            tokio_stream::wrappers::UnboundedReceiverStream::new(version_rx).boxed(),
        );
        gate_tx.send(Some(gate(&["A"]))).unwrap();
        version_tx.send(Some(version("4.19.0"))).unwrap();
        version_tx.send(Some(version("4.18.3"))).unwrap();
        let started = initial(&mut r, INITIAL_WAIT).await;
        assert_eq!(started, FeatureSet::of(&gate(&["A"]), "4.18.3").unwrap());

        let mut same_enabled = gate(&["A"]);
        same_enabled.status.feature_gates[0].disabled.clear();
        gate_tx.send(Some(same_enabled)).unwrap();
        gate_tx.send(None).unwrap();
        gate_tx.send(Some(gate(&["A", "B"]))).unwrap();
        let new = changed(&mut r, &started).await.unwrap();
        assert!(new.enabled("B"));
    }

    /// No answer within the wait: every gate off.
    #[tokio::test(start_paused = true)]
    async fn no_answer_starts_with_every_gate_off() {
        let mut r = readings(
            futures::stream::pending().boxed(),
            futures::stream::pending().boxed(),
        );
        assert_eq!(initial(&mut r, INITIAL_WAIT).await, FeatureSet::default());
        let mut absent = readings(
            futures::stream::iter([None])
                .chain(futures::stream::pending())
                .boxed(),
            futures::stream::pending().boxed(),
        );
        assert_eq!(
            initial(&mut absent, INITIAL_WAIT).await,
            FeatureSet::default()
        );
    }
}
