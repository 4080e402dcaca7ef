//! Reading the Node annotations of the MCD protocol (the keys are
//! [`machine_config::mco::annotations`]), and the merge patches that write them.

use std::collections::BTreeMap;

use machine_config::mco::annotations::{
    CONTROL_PLANE_TOPOLOGY, CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_DRAIN,
    DESIRED_IMAGE, LAST_APPLIED_DRAIN, POST_CONFIG_ACTION, REASON, SINGLE_REPLICA, STATE,
};
use machine_config::mco::{NodeState, UnknownState};
use serde_json::{Map, Value, json};

/// The MCD keeps `reason` to 2000 characters (the annotation size limit is 256 kB).
pub const REASON_MAX_CHARS: usize = 2000;

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

/// What the node is asked to run: its `desiredConfig` and, in an image-mode pool, its
/// `desiredImage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredTarget {
    pub config: String,
    pub image: Option<String>,
}

impl DesiredTarget {
    /// A config with no layered image.
    pub fn config(config: &str) -> Self {
        DesiredTarget {
            config: config.to_string(),
            image: None,
        }
    }
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

    /// The layered image the node runs (image-mode pools; empty is absent, as the MCD reads it).
    pub fn current_image(&self) -> Option<&str> {
        self.non_empty(CURRENT_IMAGE)
    }

    /// The layered image the node is asked to run (image-mode pools).
    pub fn desired_image(&self) -> Option<&str> {
        self.non_empty(DESIRED_IMAGE)
    }

    /// `desiredConfig` with `desiredImage`; `None` while there is no `desiredConfig`.
    pub fn desired_target(&self) -> Option<DesiredTarget> {
        Some(DesiredTarget {
            config: self.desired_config()?.to_string(),
            image: self.desired_image().map(str::to_string),
        })
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
        self.get(CONTROL_PLANE_TOPOLOGY) == Some(SINGLE_REPLICA)
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
    use machine_config::mco::annotations::DRAIN_VERB;

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
        assert_eq!(
            a.desired_target(),
            Some(DesiredTarget::config("rendered-worker-1"))
        );
        let mut all = a.all.clone();
        all.insert(
            DESIRED_IMAGE.to_string(),
            "registry.example/os@sha256:1".into(),
        );
        all.insert(CURRENT_IMAGE.to_string(), String::new());
        let a = NodeAnnotations::new(all);
        assert_eq!(a.desired_image(), Some("registry.example/os@sha256:1"));
        assert_eq!(a.current_image(), None);
        assert_eq!(
            a.desired_target().and_then(|t| t.image).as_deref(),
            Some("registry.example/os@sha256:1")
        );
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
