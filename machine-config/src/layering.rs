//! On-cluster layering objects (image-mode pools): `MachineOSConfig` (a pool's image build
//! settings, and in its status the image the pool runs) and `MachineOSBuild` (one build of a
//! rendered config, and in its status the image it pushed), with the fields the node controller
//! reads; everything else is kept as it came.
//!
//! [`pool_image`] is the node controller's decision: a pool with a MachineOSConfig is in image
//! mode; its nodes are sent to the image once the build of the pool's rendered config has
//! succeeded and is the MachineOSConfig's current image (the MCO's `LayeredNodeState` and
//! `MachineOSConfigState`); until then the rollout waits. The companion builds nothing: a
//! MachineOSConfig/MachineOSBuild pair whose status names a prebuilt image is what it follows.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::MachineConfigPool;
use crate::machineconfig::{API_VERSION, GROUP, nullable};

/// A MachineOSConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfig {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: MachineOSConfigSpec,
    #[serde(default, deserialize_with = "nullable")]
    pub status: MachineOSConfigStatus,
}

/// `spec` of a MachineOSConfig: the pool it builds for (the build settings are kept as given).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub machine_config_pool: NameReference,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// `status` of a MachineOSConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSConfigStatus {
    /// The image the pool's nodes run, by digest.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub current_image_pull_spec: String,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// A MachineOSBuild.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuild {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: MachineOSBuildSpec,
    #[serde(default, deserialize_with = "nullable")]
    pub status: MachineOSBuildStatus,
}

/// `spec` of a MachineOSBuild: which rendered config for which MachineOSConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuildSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub machine_config: NameReference,
    #[serde(rename = "machineOSConfig", default, deserialize_with = "nullable")]
    pub machine_os_config: NameReference,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// `status` of a MachineOSBuild.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineOSBuildStatus {
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
    /// The image the build pushed, by digest.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub digested_image_push_spec: String,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// `{name: ...}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NameReference {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
}

impl MachineOSBuild {
    /// The build finished: its `Succeeded` condition is True.
    pub fn succeeded(&self) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.type_ == "Succeeded" && c.status == "True")
    }
}

/// What a pool's nodes should run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolImage {
    /// No MachineOSConfig names the pool: configs only, no `desiredImage`.
    NotLayered,
    /// Image mode, but the image of the pool's rendered config is not ready: the rollout waits
    /// (nodes keep what they were told), saying why.
    Waiting(String),
    /// Image mode: the pool's nodes get the pool's rendered config and this image.
    Image(String),
}

/// The node controller's decision for `pool` (see the module docs).
pub fn pool_image(
    pool: &MachineConfigPool,
    configs: &[MachineOSConfig],
    builds: &[MachineOSBuild],
) -> PoolImage {
    let pool_name = pool.metadata.name.as_deref().unwrap_or_default();
    let Some(mosc) = configs
        .iter()
        .find(|c| c.spec.machine_config_pool.name == pool_name)
    else {
        return PoolImage::NotLayered;
    };
    let mosc_name = mosc.metadata.name.as_deref().unwrap_or_default();
    let rendered = &pool.spec.configuration.name;
    let build = builds.iter().find(|b| {
        b.spec.machine_os_config.name == mosc_name && b.spec.machine_config.name == *rendered
    });
    let current = &mosc.status.current_image_pull_spec;
    match build {
        None => PoolImage::Waiting(format!(
            "no MachineOSBuild of MachineOSConfig {mosc_name} for {rendered} yet"
        )),
        Some(b) if !b.succeeded() => PoolImage::Waiting(format!(
            "MachineOSBuild {} for {rendered} has not succeeded",
            b.metadata.name.as_deref().unwrap_or_default()
        )),
        Some(b) if current.is_empty() || b.status.digested_image_push_spec != *current => {
            PoolImage::Waiting(format!(
                "MachineOSConfig {mosc_name} does not name the image of MachineOSBuild {} as current",
                b.metadata.name.as_deref().unwrap_or_default()
            ))
        }
        Some(_) => PoolImage::Image(current.clone()),
    }
}

/// `k8s_openapi::Resource` and `Metadata` (hence `kube::Resource`) for a type with a
/// `metadata: ObjectMeta` field: `api_resource!(Type, group, apiVersion, version, "Kind",
/// "plural", scope)` (the core group is `""`, its apiVersion `"v1"`). Used for the MCO's own types here and for slim copies of core types elsewhere
/// (the agent's Pod and Node), so `Api<T>` uses the same paths as the API server's type.
#[macro_export]
macro_rules! api_resource {
    (
        $ty:ty,
        $group:expr,
        $api_version:expr,
        $version:literal,
        $kind:literal,
        $plural:literal,
        $scope:ty
    ) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = $api_version;
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}

/// [`api_resource!`] for a cluster-scoped type of the MCO's group.
macro_rules! resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        $crate::api_resource!(
            $ty,
            GROUP,
            API_VERSION,
            "v1",
            $kind,
            $plural,
            k8s_openapi::ClusterResourceScope
        );
    };
}

/// For the other cluster-scoped types of the group, defined beside theirs.
pub(crate) use resource;

resource!(MachineOSConfig, "MachineOSConfig", "machineosconfigs");
resource!(MachineOSBuild, "MachineOSBuild", "machineosbuilds");

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const IMAGE: &str = "registry.example/ocl/worker@sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn pool() -> MachineConfigPool {
        MachineConfigPool::from_value(json!({
            "apiVersion": API_VERSION, "kind": "MachineConfigPool",
            "metadata": {"name": "worker"},
            "spec": {"configuration": {"name": "rendered-worker-1"}},
        }))
        .unwrap()
    }

    fn mosc(current: &str) -> MachineOSConfig {
        serde_json::from_value(json!({
            "apiVersion": API_VERSION, "kind": "MachineOSConfig",
            "metadata": {"name": "worker-os"},
            "spec": {"machineConfigPool": {"name": "worker"}, "imageBuilder": {"imageBuilderType": "Job"},
                     "renderedImagePushSpec": "registry.example/ocl/worker:latest",
                     "renderedImagePushSecret": {"name": "push"}},
            "status": {"currentImagePullSpec": current},
        }))
        .unwrap()
    }

    fn mosb(config: &str, succeeded: &str, image: &str) -> MachineOSBuild {
        serde_json::from_value(json!({
            "apiVersion": API_VERSION, "kind": "MachineOSBuild",
            "metadata": {"name": format!("worker-os-{config}")},
            "spec": {"machineConfig": {"name": config}, "machineOSConfig": {"name": "worker-os"},
                     "renderedImagePushSpec": "registry.example/ocl/worker:latest"},
            "status": {"conditions": [{"type": "Succeeded", "status": succeeded, "reason": "x",
                        "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
                       "digestedImagePushSpec": image},
        }))
        .unwrap()
    }

    #[test]
    fn the_node_controllers_image_decision() {
        let waiting = |r: &PoolImage| matches!(r, PoolImage::Waiting(_));
        struct Case {
            name: &'static str,
            configs: Vec<MachineOSConfig>,
            builds: Vec<MachineOSBuild>,
            check: Box<dyn Fn(&PoolImage) -> bool>,
        }
        let cases = [
            Case {
                name: "no MachineOSConfig",
                configs: vec![],
                builds: vec![],
                check: Box::new(|r| *r == PoolImage::NotLayered),
            },
            Case {
                name: "no build yet",
                configs: vec![mosc("")],
                builds: vec![],
                check: Box::new(waiting),
            },
            Case {
                name: "a build of another config",
                configs: vec![mosc(IMAGE)],
                builds: vec![mosb("rendered-worker-0", "True", IMAGE)],
                check: Box::new(waiting),
            },
            Case {
                name: "build running",
                configs: vec![mosc("")],
                builds: vec![mosb("rendered-worker-1", "False", "")],
                check: Box::new(waiting),
            },
            Case {
                name: "built, not yet current",
                configs: vec![mosc("")],
                builds: vec![mosb("rendered-worker-1", "True", IMAGE)],
                check: Box::new(waiting),
            },
            Case {
                name: "built and current",
                configs: vec![mosc(IMAGE)],
                builds: vec![mosb("rendered-worker-1", "True", IMAGE)],
                check: Box::new(|r| *r == PoolImage::Image(IMAGE.into())),
            },
        ];
        for c in cases {
            let got = pool_image(&pool(), &c.configs, &c.builds);
            assert!((c.check)(&got), "{}: {got:?}", c.name);
        }
    }

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let m = mosc(IMAGE);
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v["spec"]["renderedImagePushSpec"],
            "registry.example/ocl/worker:latest"
        );
        assert_eq!(v["status"]["currentImagePullSpec"], IMAGE);
    }
}
