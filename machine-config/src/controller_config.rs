//! The MCO's `ControllerConfig` (`machineconfiguration.openshift.io/v1`, cluster-scoped): the
//! operator's digest of the cluster for its controllers and daemons. A node reads only the
//! object named [`NAME`], and of it only what the MCD's certificate writer writes to disk: the
//! kubelet's client CA, the cloud provider's CA, the image registries' CAs and the merged pull
//! secret (the rest of the object, infrastructure and network details, is ignored when decoded).
//!
//! Every byte field is a Go `[]byte`: base64 in JSON, `null` when the operator has nothing.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ParseError;
use crate::ignition::typed;
use crate::machineconfig::{check_type_meta_of, nullable};

/// The one ControllerConfig the MCO keeps, and the only one a node acts on.
pub const NAME: &str = "machine-config-controller";
/// `apiVersion` of ControllerConfig.
pub const API_VERSION: &str = "machineconfiguration.openshift.io/v1";
/// `kind` of ControllerConfig.
pub const KIND: &str = "ControllerConfig";

/// Annotation on the ControllerConfig: `"true"` in the operator's sync that changed the
/// `kubeconfig-data` ConfigMap (the API server's serving CA was rotated), `"false"` otherwise.
pub const SERVICE_CA_ROTATE: &str = "machineconfiguration.openshift.io/service-ca-rotate";
/// The [`SERVICE_CA_ROTATE`] value that asks nodes to take the new serving CA.
pub const SERVICE_CA_ROTATE_TRUE: &str = "true";

/// Namespace of the MCO's own objects (the `kubeconfig-data` ConfigMap among them).
pub const MCO_NAMESPACE: &str = "openshift-machine-config-operator";
/// ConfigMap holding the API server's serving CA bundle, copied there by the operator.
pub const KUBECONFIG_DATA: &str = "kubeconfig-data";
/// Key of the CA bundle in [`KUBECONFIG_DATA`].
pub const KUBECONFIG_DATA_KEY: &str = "ca-bundle.crt";

/// A ControllerConfig, with the fields a node uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerConfig {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: ControllerConfigSpec,
}

/// `spec` of a ControllerConfig: the data of the files the certificate writer keeps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerConfigSpec {
    /// The kubelet's client CA bundle, for `/etc/kubernetes/kubelet-ca.crt` (despite the name:
    /// the CAs the kubelet accepts client certificates from, the API server's among them).
    #[serde(
        default,
        deserialize_with = "nullable_bytes",
        rename = "kubeAPIServerServingCAData"
    )]
    pub kube_api_server_serving_ca_data: Vec<u8>,
    /// The cloud provider's CA bundle (empty on most platforms).
    #[serde(
        default,
        deserialize_with = "nullable_bytes",
        rename = "cloudProviderCAData"
    )]
    pub cloud_provider_ca_data: Vec<u8>,
    /// Registry CAs of the cluster's own registry (`openshift-config-managed/image-registry-ca`).
    #[serde(default, deserialize_with = "nullable")]
    pub image_registry_bundle_data: Vec<ImageRegistryBundle>,
    /// Registry CAs the administrator added (`image.config.openshift.io/cluster`
    /// `spec.additionalTrustedCA`).
    #[serde(default, deserialize_with = "nullable")]
    pub image_registry_bundle_user_data: Vec<ImageRegistryBundle>,
    /// The merged pull secret (`{"auths": ...}`): the internal registry's credentials and the
    /// cluster's global pull secret; empty while the operator has none.
    #[serde(default, deserialize_with = "nullable_bytes")]
    pub internal_registry_pull_secret: Vec<u8>,
}

/// One registry CA: `file` names the registry (`host`, or `host..port` for `host:port`, since
/// a ConfigMap key cannot hold `:`), `data` is the PEM bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRegistryBundle {
    #[serde(default)]
    pub file: String,
    #[serde(default, deserialize_with = "nullable_bytes")]
    pub data: Vec<u8>,
}

crate::api_resource!(
    ControllerConfig,
    crate::machineconfig::GROUP,
    API_VERSION,
    "v1",
    "ControllerConfig",
    "controllerconfigs",
    k8s_openapi::ClusterResourceScope
);

/// Go's `[]byte`: base64 text, or `null` for none.
fn nullable_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    Ok(Option::<ByteString>::deserialize(d)?
        .map(|b| b.0)
        .unwrap_or_default())
}

impl ControllerConfig {
    /// Parses a ControllerConfig from a decoded JSON value (as the API server sends it).
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        check_type_meta_of(&value, API_VERSION, KIND)?;
        typed(value)
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// `metadata.resourceVersion` (empty when unset).
    pub fn resource_version(&self) -> &str {
        self.metadata
            .resource_version
            .as_deref()
            .unwrap_or_default()
    }

    /// The [`SERVICE_CA_ROTATE`] annotation's value (empty when absent).
    pub fn service_ca_rotate(&self) -> &str {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SERVICE_CA_ROTATE))
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// Whether the operator asks nodes to take a rotated API server serving CA.
    pub fn rotates_service_ca(&self) -> bool {
        self.service_ca_rotate() == SERVICE_CA_ROTATE_TRUE
    }
}

impl ControllerConfigSpec {
    /// The registry CAs in the order they are written: the cluster's, then the administrator's
    /// (so an administrator's CA for the same registry wins).
    pub fn registry_bundles(&self) -> impl Iterator<Item = &ImageRegistryBundle> {
        self.image_registry_bundle_data
            .iter()
            .chain(&self.image_registry_bundle_user_data)
    }
}

impl ImageRegistryBundle {
    /// The directory name under `/etc/docker/certs.d`: `file` with each `..` made `:`
    /// (`host..5000` is `host:5000`).
    pub fn registry(&self) -> String {
        registry_dir_name(&self.file)
    }
}

/// `file` with each `..` replaced by `:`, left to right (the MCD's rule: `a...b` is `a:.b`).
pub fn registry_dir_name(file: &str) -> String {
    file.replace("..", ":")
}

/// The CA bundle in a `kubeconfig-data` ConfigMap, the MCD's way: `binaryData[key]` if
/// present, else `data[key]` base64-decoded when it decodes, else taken as it is. `None` when
/// the key is in neither.
pub fn config_map_bytes(cm: &ConfigMap, key: &str) -> Option<Vec<u8>> {
    if let Some(b) = cm.binary_data.as_ref().and_then(|d| d.get(key)) {
        return Some(b.0.clone());
    }
    let text = cm
        .data
        .as_ref()
        .and_then(|d: &BTreeMap<String, String>| d.get(key))?;
    use base64::Engine as _;
    Some(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap_or_else(|_| text.as_bytes().to_vec()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The fields a node uses, decoded from the API's JSON: base64 bytes, `null` for none,
    /// everything else of the (large) object ignored.
    #[test]
    fn decodes_the_fields_a_node_uses() {
        let cc = ControllerConfig::from_value(json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": NAME, "resourceVersion": "42",
                         "annotations": {SERVICE_CA_ROTATE: "true"}},
            "spec": {
                "kubeAPIServerServingCAData": "Y2E=",
                "cloudProviderCAData": null,
                "imageRegistryBundleData": [{"file": "reg..5000", "data": "cmVn"}],
                "imageRegistryBundleUserData": null,
                "internalRegistryPullSecret": "e30=",
                "infra": {"status": {"platform": "None"}},
                "releaseImage": "quay.io/x@sha256:1"
            },
            "status": {"observedGeneration": 3}
        }))
        .unwrap();
        assert_eq!(cc.name(), NAME);
        assert_eq!(cc.resource_version(), "42");
        assert!(cc.rotates_service_ca());
        assert_eq!(cc.spec.kube_api_server_serving_ca_data, b"ca");
        assert!(cc.spec.cloud_provider_ca_data.is_empty());
        assert_eq!(cc.spec.internal_registry_pull_secret, b"{}");
        let bundles: Vec<_> = cc.spec.registry_bundles().collect();
        assert_eq!(bundles.len(), 1);
        assert_eq!(bundles[0].registry(), "reg:5000");
        assert_eq!(bundles[0].data, b"reg");
    }

    #[test]
    fn a_wrong_kind_or_bad_base64_is_refused() {
        let err = ControllerConfig::from_value(
            json!({"apiVersion": API_VERSION, "kind": "MachineConfig"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("ControllerConfig"), "{err}");
        let err = ControllerConfig::from_value(json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "spec": {"kubeAPIServerServingCAData": "not base64!"}
        }))
        .unwrap_err();
        assert!(
            err.to_string().contains("kubeAPIServerServingCAData"),
            "{err}"
        );
    }

    #[test]
    fn registry_dir_names() {
        for (file, dir) in [
            ("quay.io", "quay.io"),
            ("host..5000", "host:5000"),
            ("a...b", "a:.b"),
            ("a....b", "a::b"),
            ("[fd00::1]..5000", "[fd00::1]:5000"),
        ] {
            assert_eq!(registry_dir_name(file), dir, "{file}");
        }
    }

    #[test]
    fn kubeconfig_data_bytes() {
        let cm = |data: Value| -> ConfigMap { serde_json::from_value(data).unwrap() };
        let key = KUBECONFIG_DATA_KEY;
        for (object, expected) in [
            (
                json!({"binaryData": {key: "Ymlu"}, "data": {key: "dGV4dA=="}}),
                Some(&b"bin"[..]),
            ),
            (json!({"data": {key: "dGV4dA=="}}), Some(&b"text"[..])),
            (
                json!({"data": {key: "-----BEGIN CERTIFICATE-----"}}),
                Some(&b"-----BEGIN CERTIFICATE-----"[..]),
            ),
            (json!({"data": {"other": "x"}}), None),
            (json!({}), None),
        ] {
            assert_eq!(
                config_map_bytes(&cm(object.clone()), key).as_deref(),
                expected,
                "{object}"
            );
        }
    }
}
