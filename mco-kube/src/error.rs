//! Errors of the cluster module: the API's ([`ClusterError`]) and a drain's ([`DrainError`],
//! naming each pod left and what holds it).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },
    #[error("{action}: {message} (HTTP {code} {reason})")]
    Api {
        action: String,
        code: u16,
        reason: String,
        message: String,
    },
    #[error("{action}: {message}")]
    Client { action: String, message: String },
    /// The MCD's lister message when the rendered config it needs is gone.
    #[error("machineconfig.machineconfiguration.openshift.io \"{0}\" not found")]
    MachineConfigNotFound(String),
    #[error("machineconfig {name:?} from the API server is invalid: {message}")]
    InvalidMachineConfig { name: String, message: String },
    #[error(transparent)]
    Drain(#[from] DrainError),
    /// The drain controller did not answer a `desiredDrain` request in time.
    #[error("{0}")]
    Handshake(String),
    #[error("cannot determine the node name: {0}")]
    NodeName(String),
}

impl ClusterError {
    /// The HTTP code of an API error.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub(crate) fn from_kube(action: &str, err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => Self::Api {
                action: action.to_string(),
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            other => Self::Client {
                action: action.to_string(),
                message: other.to_string(),
            },
        }
    }
}

/// What keeps a pod on the node.
#[derive(Debug, Clone, PartialEq)]
pub enum Blocker {
    /// A PodDisruptionBudget refuses the eviction.
    Budget { pdb: String, detail: String },
    /// Evicted, but the pod has not gone away.
    Terminating { finalizers: Vec<String> },
    /// The API failed.
    Error(String),
    /// Still on the node, and no PodDisruptionBudget of its namespace refuses its eviction
    /// now: a drain controller's drain seen from the node ([`crate::drain::holders`]).
    NotEvictableYet,
    /// What holds it could not be read (the message says why).
    Unknown(String),
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Budget { pdb, detail } => {
                write!(
                    f,
                    "eviction refused by PodDisruptionBudget {pdb:?} ({detail})"
                )
            }
            Self::Terminating { finalizers } if finalizers.is_empty() => {
                f.write_str("evicted but still terminating")
            }
            Self::Terminating { finalizers } => {
                write!(
                    f,
                    "evicted but still terminating (finalizers: {})",
                    finalizers.join(", ")
                )
            }
            Self::Error(message) => f.write_str(message),
            Self::NotEvictableYet => f.write_str("not evictable yet"),
            Self::Unknown(why) => write!(f, "unknown ({why})"),
        }
    }
}

/// A pod a drain could not remove.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockedPod {
    pub namespace: String,
    pub name: String,
    pub blocker: Blocker,
}

impl fmt::Display for BlockedPod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pod {}/{}: {}", self.namespace, self.name, self.blocker)
    }
}

/// A duration in whole seconds, for messages.
fn seconds(d: &Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_secs(d.as_secs_f64().round() as u64))
}

pub(crate) fn describe(blocked: &[BlockedPod]) -> String {
    blocked
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// How every message the companion's drain controller writes into the node's `reason` begins
/// (the MCO's log line for a failed try): while one is there, the agent waiting on that drain
/// leaves the reason to the controller.
pub const DRAIN_CONTROLLER_FAILED: &str = "Drain failed.";

/// How the node's `reason` begins while the agent waits on a drain controller and names what
/// holds the drain ([`waiting_for_drain_controller`]): the agent clears only a reason of its own.
pub const WAITING_FOR_DRAIN_CONTROLLER: &str = "Waiting for the drain controller:";

/// The node's `reason` while a drain controller has been draining `node` for `elapsed`: each
/// pod left and what holds it, in the words of a drain's own errors ([`DrainError::Blocked`]).
pub fn waiting_for_drain_controller(
    node: &str,
    elapsed: Duration,
    blocked: &[BlockedPod],
) -> String {
    let left = if blocked.is_empty() {
        "no pod left to evict".to_string()
    } else {
        describe(blocked)
    };
    format!(
        "{WAITING_FOR_DRAIN_CONTROLLER} node {node} not drained after {}: {left}",
        seconds(&elapsed)
    )
}

impl ClusterError {
    /// The error's text without its leading `action: `, for a caller that says the action
    /// itself (`failed to cordon node n1: timed out`, not `…: cordon node n1: timed out`).
    pub fn without_action(&self, action: &str) -> String {
        let text = self.to_string();
        match text.strip_prefix(action).and_then(|t| t.strip_prefix(": ")) {
            Some(rest) => rest.to_string(),
            None => text,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    #[error(
        "failed to drain node {node} after {}: {}",
        seconds(elapsed),
        describe(blocked)
    )]
    Blocked {
        node: String,
        elapsed: Duration,
        blocked: Vec<BlockedPod>,
    },
    #[error("failed to drain node {node} after {}: {message}", seconds(elapsed))]
    Failed {
        node: String,
        elapsed: Duration,
        message: String,
    },
    #[error("failed to {verb} node {node}: {message}")]
    Cordon {
        verb: &'static str,
        node: String,
        message: String,
    },
}
