//! Every resource type the test server serves, as one table. Built-in types follow the API
//! server's strategies (unconditional updates allowed, no generation unless the type keeps one);
//! custom resources follow the CRDs the MCO installs (openshift/api), served like the
//! apiextensions server serves them.

use super::registry::ResourceDef;

const CORE: &str = "";
const MCO: &str = "machineconfiguration.openshift.io";
const OPERATOR: &str = "operator.openshift.io";
const RBAC: &str = "rbac.authorization.k8s.io";
const AUTHORIZATION: &str = "authorization.k8s.io";
const CONFIG: &str = "config.openshift.io";

/// The verbs of an ordinary stored resource, as discovery lists them.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// A built-in type of the API server.
const BUILTIN: ResourceDef = ResourceDef {
    group: CORE,
    version: "v1",
    plural: "",
    kind: "",
    namespaced: false,
    short_names: &[],
    status_subresource: false,
    generation: false,
    custom: false,
    fields: &[],
    verbs: ALL_VERBS,
    unconditional_update: true,
    create_on_update: false,
    review: false,
};

/// A custom resource (cluster-scoped, v1): generation kept, updates need a resourceVersion.
const CRD: ResourceDef = ResourceDef {
    generation: true,
    custom: true,
    unconditional_update: false,
    ..BUILTIN
};

/// A create-only review: answered from the authorizer, never stored.
const REVIEW: ResourceDef = ResourceDef {
    group: AUTHORIZATION,
    verbs: &["create"],
    review: true,
    ..BUILTIN
};

/// Every served resource type. Indices into this table identify a resource in the store.
pub static RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        plural: "namespaces",
        kind: "Namespace",
        short_names: &["ns"],
        status_subresource: true,
        fields: &["status.phase"],
        ..BUILTIN
    },
    ResourceDef {
        plural: "nodes",
        kind: "Node",
        short_names: &["no"],
        status_subresource: true,
        fields: &["spec.unschedulable"],
        ..BUILTIN
    },
    ResourceDef {
        plural: "pods",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        status_subresource: true,
        fields: &[
            "spec.nodeName",
            "status.phase",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ..BUILTIN
    },
    ResourceDef {
        plural: "events",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        create_on_update: true,
        fields: &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ..BUILTIN
    },
    // Secrets: `stringData` is folded into `data` on every write, as the API server does.
    ResourceDef {
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
        fields: &["type"],
        ..BUILTIN
    },
    ResourceDef {
        group: "policy",
        plural: "poddisruptionbudgets",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short_names: &["pdb"],
        status_subresource: true,
        generation: true,
        ..BUILTIN
    },
    ResourceDef {
        group: "apps",
        plural: "daemonsets",
        kind: "DaemonSet",
        namespaced: true,
        short_names: &["ds"],
        status_subresource: true,
        generation: true,
        ..BUILTIN
    },
    ResourceDef {
        group: "apps",
        plural: "replicasets",
        kind: "ReplicaSet",
        namespaced: true,
        short_names: &["rs"],
        status_subresource: true,
        generation: true,
        ..BUILTIN
    },
    ResourceDef {
        group: "apps",
        plural: "deployments",
        kind: "Deployment",
        namespaced: true,
        short_names: &["deploy"],
        status_subresource: true,
        generation: true,
        ..BUILTIN
    },
    // coordination.k8s.io: leases refuse unconditional updates and may be created by PUT.
    ResourceDef {
        group: "coordination.k8s.io",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        unconditional_update: false,
        create_on_update: true,
        ..BUILTIN
    },
    ResourceDef {
        group: RBAC,
        plural: "clusterroles",
        kind: "ClusterRole",
        create_on_update: true,
        ..BUILTIN
    },
    ResourceDef {
        group: RBAC,
        plural: "clusterrolebindings",
        kind: "ClusterRoleBinding",
        create_on_update: true,
        ..BUILTIN
    },
    ResourceDef {
        group: RBAC,
        plural: "roles",
        kind: "Role",
        namespaced: true,
        create_on_update: true,
        ..BUILTIN
    },
    ResourceDef {
        group: RBAC,
        plural: "rolebindings",
        kind: "RoleBinding",
        namespaced: true,
        create_on_update: true,
        ..BUILTIN
    },
    ResourceDef {
        plural: "selfsubjectaccessreviews",
        kind: "SelfSubjectAccessReview",
        ..REVIEW
    },
    ResourceDef {
        plural: "selfsubjectrulesreviews",
        kind: "SelfSubjectRulesReview",
        ..REVIEW
    },
    ResourceDef {
        group: "authentication.k8s.io",
        plural: "selfsubjectreviews",
        kind: "SelfSubjectReview",
        ..REVIEW
    },
    ResourceDef {
        plural: "subjectaccessreviews",
        kind: "SubjectAccessReview",
        ..REVIEW
    },
    ResourceDef {
        group: "authentication.k8s.io",
        plural: "tokenreviews",
        kind: "TokenReview",
        ..REVIEW
    },
    ResourceDef {
        group: MCO,
        plural: "machineconfigs",
        kind: "MachineConfig",
        short_names: &["mc"],
        ..CRD
    },
    ResourceDef {
        group: MCO,
        plural: "machineconfigpools",
        kind: "MachineConfigPool",
        short_names: &["mcp"],
        status_subresource: true,
        ..CRD
    },
    ResourceDef {
        group: MCO,
        plural: "machineconfignodes",
        kind: "MachineConfigNode",
        status_subresource: true,
        ..CRD
    },
    ResourceDef {
        group: MCO,
        plural: "machineosconfigs",
        kind: "MachineOSConfig",
        status_subresource: true,
        ..CRD
    },
    ResourceDef {
        group: MCO,
        plural: "machineosbuilds",
        kind: "MachineOSBuild",
        status_subresource: true,
        ..CRD
    },
    ResourceDef {
        group: MCO,
        plural: "pinnedimagesets",
        kind: "PinnedImageSet",
        status_subresource: true,
        ..CRD
    },
    ResourceDef {
        group: OPERATOR,
        plural: "machineconfigurations",
        kind: "MachineConfiguration",
        status_subresource: true,
        ..CRD
    },
    // ConfigMaps: the MCO's `kubeconfig-data` (the API server's serving CA) among them.
    ResourceDef {
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        ..BUILTIN
    },
    ResourceDef {
        group: MCO,
        plural: "controllerconfigs",
        kind: "ControllerConfig",
        status_subresource: true,
        ..CRD
    },
    // config.openshift.io: the cluster's feature gates and its version.
    ResourceDef {
        group: CONFIG,
        plural: "featuregates",
        kind: "FeatureGate",
        status_subresource: true,
        ..CRD
    },
    ResourceDef {
        group: CONFIG,
        plural: "clusterversions",
        kind: "ClusterVersion",
        status_subresource: true,
        ..CRD
    },
];
