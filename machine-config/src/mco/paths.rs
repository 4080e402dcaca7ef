//! Files on the node, by their absolute path inside the node's root.

/// The MachineConfig the node is in, as compact JSON (the MCD's `currentconfig`).
pub const CURRENT_CONFIG: &str = "/etc/machine-config-daemon/currentconfig";

/// The node's first annotations, written by the config server at provisioning.
pub const NODE_ANNOTATIONS: &str = "/etc/machine-config-daemon/node-annotations.json";

/// Where the MCD moves [`NODE_ANNOTATIONS`] once consumed (note the singular "annotation").
pub const NODE_ANNOTATIONS_BAK: &str = "/etc/machine-config-daemon/node-annotation.json.bak";

/// The rendered MachineConfig the config server serves, as a file of the served Ignition
/// config (indented JSON).
pub const SERVED_CONTENT: &str = "/etc/mcs-machine-config-content.json";

/// The target MachineConfig with an empty Ignition config, left by the config server for first
/// boot (`firstboot-complete-machineconfig` consumes it).
pub const ENCAPSULATED: &str = "/etc/ignition-machine-config-encapsulated.json";

/// Where [`ENCAPSULATED`] goes once first boot has staged its OS changes.
pub const ENCAPSULATED_BAK: &str = "/etc/ignition-machine-config-encapsulated.json.bak";

/// Present: the next sync skips validation and re-applies the config; a config may not create
/// it.
pub const FORCE_FILE: &str = "/run/machine-config-daemon-force";

/// Where originals of the files a config replaces are kept (`<path>.mcdorig`).
pub const ORIG_DIR: &str = "/etc/machine-config-daemon/orig";

/// Where "there was no original" stamps are kept (`<path>.mcdnoorig`).
pub const NOORIG_DIR: &str = "/etc/machine-config-daemon/noorig";

/// The layered OS image the node is in (image-mode pools), one line, empty when none: the
/// companion of [`CURRENT_CONFIG`] (the MCD's `currentimage`).
pub const CURRENT_IMAGE: &str = "/etc/machine-config-daemon/currentimage";

/// Where rpm-ostree looks for registry credentials when it pulls an OS image.
pub const OSTREE_AUTH: &str = "/run/ostree/auth.json";

/// The cluster's merged pull secret (global pull secret and the internal registry's), written
/// by the MCD from the ControllerConfig; the OS image secret of choice.
pub const MERGED_PULL_SECRET: &str = "/etc/mco/internal-registry-pull-secret.json";

/// The kubelet's pull secret (from a MachineConfig): the fallback OS image secret.
pub const KUBELET_PULL_SECRET: &str = "/var/lib/kubelet/config.json";

/// The kubelet's client CA bundle (`clientCAFile`), kept by the certificate writer from the
/// ControllerConfig's `kubeAPIServerServingCAData`.
pub const KUBELET_CA: &str = "/etc/kubernetes/kubelet-ca.crt";

/// The cloud provider's CA bundle, kept by the certificate writer from the ControllerConfig's
/// `cloudProviderCAData` (a file holding a newline on platforms with none).
pub const CLOUD_CA_BUNDLE: &str =
    "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem";

/// Registry CAs: `<registry>/ca.crt` for each of the ControllerConfig's registry bundles
/// (containers/image reads them when pulling from `<registry>`).
pub const REGISTRY_CERTS_DIR: &str = "/etc/docker/certs.d";

/// The kubelet's bootstrap kubeconfig, whose API server CA the service-CA rotation updates.
pub const BOOTSTRAP_KUBECONFIG: &str = "/etc/kubernetes/kubeconfig";

/// The kubelet's kubeconfig (its client certificate; also the agent's credentials).
pub const KUBELET_KUBECONFIG: &str = "/var/lib/kubelet/kubeconfig";
