//! Node annotation keys of the MCD protocol (`machineconfiguration.openshift.io/*`), and the
//! values with a fixed spelling.

/// Prefix of every annotation key of the protocol.
pub const PREFIX: &str = "machineconfiguration.openshift.io/";
/// The config the node is in.
pub const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";
/// The config the node is asked to be in.
pub const DESIRED_CONFIG: &str = "machineconfiguration.openshift.io/desiredConfig";
/// The config the node was provisioned with (written by the config server only).
pub const FIRST_PIVOT_CONFIG: &str = "machineconfiguration.openshift.io/firstPivotConfig";
/// The node's [`NodeState`](super::NodeState).
pub const STATE: &str = "machineconfiguration.openshift.io/state";
/// Why the node is Degraded or Unreconcilable (empty otherwise).
pub const REASON: &str = "machineconfiguration.openshift.io/reason";
/// A drain or uncordon request to the drain controller (`drain-<config>`, `uncordon-<config>`).
pub const DESIRED_DRAIN: &str = "machineconfiguration.openshift.io/desiredDrain";
/// The request the drain controller finished last.
pub const LAST_APPLIED_DRAIN: &str = "machineconfiguration.openshift.io/lastAppliedDrain";
/// What happens after the config is written ([`POST_CONFIG_ACTION_REBOOTING`] or empty).
pub const POST_CONFIG_ACTION: &str = "machineconfiguration.openshift.io/post-config-action";
/// The cluster's control-plane topology (`SingleReplica` nodes are not drained).
pub const CONTROL_PLANE_TOPOLOGY: &str = "machineconfiguration.openshift.io/controlPlaneTopology";

/// `post-config-action` value written just before a reboot.
pub const POST_CONFIG_ACTION_REBOOTING: &str = "Rebooting";
/// `desiredDrain` verbs.
pub const DRAIN_VERB: &str = "drain";
pub const UNCORDON_VERB: &str = "uncordon";
/// `controlPlaneTopology` of a single-node cluster.
pub const SINGLE_REPLICA: &str = "SingleReplica";

/// The OS image the node runs in an image-mode (on-cluster layering) pool; absent otherwise.
pub const CURRENT_IMAGE: &str = "machineconfiguration.openshift.io/currentImage";
/// The OS image the node is asked to run in an image-mode pool; absent otherwise.
pub const DESIRED_IMAGE: &str = "machineconfiguration.openshift.io/desiredImage";
/// On a MachineConfig copy with a layered image in its `osImageURL`: the `osImageURL` the
/// rendered config had (the MCD's in-memory marker, never on a cluster object).
pub const ORIGINAL_OS_IMAGE_URL: &str = "machineconfiguration.openshift.io/original-osimageurl";
/// On a MachineConfig copy with a layered image in its `osImageURL`: that image.
pub const OCL_OS_IMAGE_URL: &str = "machineconfiguration.openshift.io/ocl-osimageurl";

/// The ControllerConfig `resourceVersion` whose certificates the node last wrote.
pub const LAST_SYNCED_CONTROLLER_CONFIG_RESOURCE_VERSION: &str =
    "machineconfiguration.openshift.io/lastSyncedControllerConfigResourceVersion";
/// The ControllerConfig's `service-ca-rotate` value the node last acted on.
pub const LAST_OBSERVED_SERVER_CA: &str =
    "machineconfiguration.openshift.io/lastObservedServerCAAnnotation";
/// The first `error:` line `ostree-finalize-staged.service` logged in the previous boot (`""`
/// once there is none).
pub const OSTREE_FINALIZE_STAGED_FAILURE: &str =
    "machineconfiguration.openshift.io/ostree-finalize-staged-failure";
