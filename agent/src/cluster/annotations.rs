//! The Node annotations of the MCD protocol (`machineconfiguration.openshift.io/*`), the node
//! state enum, and the merge patches that write them.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};

/// Prefix of every annotation key of the protocol.
pub const PREFIX: &str = "machineconfiguration.openshift.io/";
pub const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";
pub const DESIRED_CONFIG: &str = "machineconfiguration.openshift.io/desiredConfig";
pub const STATE: &str = "machineconfiguration.openshift.io/state";
pub const REASON: &str = "machineconfiguration.openshift.io/reason";
pub const DESIRED_DRAIN: &str = "machineconfiguration.openshift.io/desiredDrain";
pub const LAST_APPLIED_DRAIN: &str = "machineconfiguration.openshift.io/lastAppliedDrain";
pub const POST_CONFIG_ACTION: &str = "machineconfiguration.openshift.io/post-config-action";
pub const CONTROL_PLANE_TOPOLOGY: &str = "machineconfiguration.openshift.io/controlPlaneTopology";

/// `post-config-action` value written just before a reboot.
pub const POST_CONFIG_ACTION_REBOOTING: &str = "Rebooting";
/// `desiredDrain` verbs.
pub const DRAIN_VERB: &str = "drain";
pub const UNCORDON_VERB: &str = "uncordon";

/// The MCD keeps `reason` to 2000 characters (the annotation size limit is 256 kB).
pub const REASON_MAX_CHARS: usize = 2000;

/// `machineconfiguration.openshift.io/state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeState {
    Done,
    Working,
    Degraded,
    Unreconcilable,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "Done",
            Self::Working => "Working",
            Self::Degraded => "Degraded",
            Self::Unreconcilable => "Unreconcilable",
        }
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown state value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown node state {0:?} (expected Done, Working, Degraded or Unreconcilable)")]
pub struct UnknownState(pub String);

impl FromStr for NodeState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Done" => Ok(Self::Done),
            "Working" => Ok(Self::Working),
            "Degraded" => Ok(Self::Degraded),
            "Unreconcilable" => Ok(Self::Unreconcilable),
            other => Err(UnknownState(other.to_string())),
        }
    }
}

/// `reason` as the MCD writes it: at most 2000 characters (never splitting one).
pub fn truncate_reason(reason: &str) -> &str {
    match reason.char_indices().nth(REASON_MAX_CHARS) {
        Some((byte, _)) => &reason[..byte],
        None => reason,
    }
}

/// `drain-<config>` or `uncordon-<config>`.
pub fn drain_request(verb: &str, config: &str) -> String {
    format!("{verb}-{config}")
}

/// The protocol's annotations as read from a Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAnnotations {
    /// Every annotation of the node.
    pub all: BTreeMap<String, String>,
}

impl NodeAnnotations {
    pub fn new(all: BTreeMap<String, String>) -> Self {
        Self { all }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.all.get(key).map(String::as_str)
    }

    /// A value, with empty treated as absent.
    fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    pub fn current_config(&self) -> Option<&str> {
        self.non_empty(CURRENT_CONFIG)
    }

    pub fn desired_config(&self) -> Option<&str> {
        self.non_empty(DESIRED_CONFIG)
    }

    /// The state; absent or empty is `Done`, as the MCD reads it (the MCS once did not write
    /// it). An unrecognised value is an error.
    pub fn state(&self) -> Result<NodeState, UnknownState> {
        self.non_empty(STATE)
            .map_or(Ok(NodeState::Done), str::parse)
    }

    pub fn reason(&self) -> &str {
        self.get(REASON).unwrap_or_default()
    }

    pub fn desired_drain(&self) -> Option<&str> {
        self.non_empty(DESIRED_DRAIN)
    }

    pub fn last_applied_drain(&self) -> Option<&str> {
        self.non_empty(LAST_APPLIED_DRAIN)
    }

    pub fn post_config_action(&self) -> Option<&str> {
        self.non_empty(POST_CONFIG_ACTION)
    }

    /// `controlPlaneTopology` is `SingleReplica`: the MCD does not drain such nodes.
    pub fn single_replica(&self) -> bool {
        self.get(CONTROL_PLANE_TOPOLOGY) == Some("SingleReplica")
    }
}

/// A JSON merge patch setting (Some) or removing (None) annotations.
pub fn merge_patch(changes: &[(&str, Option<&str>)]) -> Value {
    let annotations: Map<String, Value> = changes
        .iter()
        .map(|(k, v)| (k.to_string(), v.map_or(Value::Null, |v| json!(v))))
        .collect();
    json!({"metadata": {"annotations": annotations}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_truncation_counts_characters() {
        let ascii = "x".repeat(2500);
        assert_eq!(truncate_reason(&ascii).len(), 2000);
        let wide = "é".repeat(2100);
        let cut = truncate_reason(&wide);
        assert_eq!(cut.chars().count(), 2000);
        assert_eq!(cut.len(), 4000);
        let mixed = format!("{}€tail", "a".repeat(1999));
        assert_eq!(truncate_reason(&mixed), format!("{}€", "a".repeat(1999)));
        assert_eq!(truncate_reason("short"), "short");
        assert_eq!(truncate_reason(&"y".repeat(2000)).len(), 2000);
    }

    #[test]
    fn states_round_trip_and_default_to_done() {
        for state in [
            NodeState::Done,
            NodeState::Working,
            NodeState::Degraded,
            NodeState::Unreconcilable,
        ] {
            assert_eq!(state.as_str().parse::<NodeState>(), Ok(state));
        }
        assert!("done".parse::<NodeState>().is_err());
        let empty = NodeAnnotations::default();
        assert_eq!(empty.state(), Ok(NodeState::Done));
        let mut all = BTreeMap::new();
        all.insert(STATE.to_string(), "Bogus".to_string());
        all.insert(CURRENT_CONFIG.to_string(), String::new());
        all.insert(DESIRED_CONFIG.to_string(), "rendered-worker-1".to_string());
        let a = NodeAnnotations::new(all);
        assert_eq!(a.state(), Err(UnknownState("Bogus".into())));
        assert_eq!(a.current_config(), None);
        assert_eq!(a.desired_config(), Some("rendered-worker-1"));
    }

    #[test]
    fn patches() {
        assert_eq!(
            merge_patch(&[(STATE, Some("Done")), (REASON, None)]),
            json!({"metadata": {"annotations": {STATE: "Done", REASON: null}}})
        );
        assert_eq!(
            drain_request(DRAIN_VERB, "rendered-w-1"),
            "drain-rendered-w-1"
        );
    }
}
