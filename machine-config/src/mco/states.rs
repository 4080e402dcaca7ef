//! The node's state, as the `machineconfiguration.openshift.io/state` annotation says it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `machineconfiguration.openshift.io/state`; absent or empty reads as `Done`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeState {
    #[default]
    Done,
    Working,
    Degraded,
    Unreconcilable,
}

impl NodeState {
    /// The annotation value.
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
