//! The `PinnedImageSet` object (`machineconfiguration.openshift.io/v1`, cluster-scoped): images,
//! each referenced by digest, that the nodes of the pools selecting the set pull ahead of time
//! and keep (CRI-O's `pinned_images`). The references are checked with the CRD's own rules
//! ([`check_image_ref`]); which sets a pool lists is decided as the MCO's controller decides it
//! ([`pool_set_names`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::machineconfig::{API_VERSION, GROUP, nullable};
use crate::pool::{MachineConfigPool, selector_is_empty};

pub const KIND: &str = "PinnedImageSet";
/// At most this many images in one set (the CRD's `maxItems`).
pub const MAX_IMAGES: usize = 500;
/// At most this long, a reference (the CRD's `maxLength`).
pub const MAX_REF_LEN: usize = 447;
/// At most this many sets in a pool's `spec.pinnedImageSets` (the CRD's `maxItems`).
pub const MAX_SETS_PER_POOL: usize = 100;

/// A PinnedImageSet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PinnedImageSet {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: PinnedImageSetSpec,
    /// Kept as it is: nothing here reads or writes it.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub status: Value,
}

/// `spec` of a set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PinnedImageSetSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub pinned_images: Vec<PinnedImageRef>,
}

/// One image of a set (and, in a pool's spec, one set of the pool: both are `{name}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PinnedImageRef {
    pub name: String,
}

impl PinnedImageSet {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// `metadata.generation` (0 when the server has not set one).
    pub fn generation(&self) -> i64 {
        self.metadata.generation.unwrap_or_default()
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.metadata.uid.as_deref().unwrap_or_default()
    }

    /// The set's labels.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.metadata.labels.clone().unwrap_or_default()
    }

    /// The image references, in the set's order.
    pub fn images(&self) -> impl Iterator<Item = &str> {
        self.spec.pinned_images.iter().map(|i| i.name.as_str())
    }

    /// The CRD's rules: 1 to [`MAX_IMAGES`] images, each a digest reference
    /// ([`check_image_ref`]), no name twice. The error names the set and the offending entry.
    pub fn validate(&self) -> Result<(), String> {
        let set = self.name();
        let images = &self.spec.pinned_images;
        if images.is_empty() || images.len() > MAX_IMAGES {
            return Err(format!(
                "PinnedImageSet {set:?}: spec.pinnedImages must have 1 to {MAX_IMAGES} items, it has {}",
                images.len()
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, image) in images.iter().enumerate() {
            check_image_ref(&image.name).map_err(|why| {
                format!(
                    "PinnedImageSet {set:?}: spec.pinnedImages[{i}].name {:?}: {why}",
                    image.name
                )
            })?;
            if !seen.insert(image.name.as_str()) {
                return Err(format!(
                    "PinnedImageSet {set:?}: spec.pinnedImages[{i}]: Duplicate value: {{\"name\":{:?}}}",
                    image.name
                ));
            }
        }
        Ok(())
    }
}

impl k8s_openapi::Resource for PinnedImageSet {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = KIND;
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pinnedimagesets";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for PinnedImageSet {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The CRD's message for a reference without a valid digest.
pub const DIGEST_MESSAGE: &str = "the OCI Image reference must end with a valid '@sha256:<digest>' suffix, where '<digest>' is 64 characters long";
/// The CRD's message for a reference whose name part is not `host[:port][/namespace]/name`.
pub const NAME_MESSAGE: &str = "the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the scheme";

/// Checks `image` against the CRD's rules for `spec.pinnedImages[].name`: 1 to
/// [`MAX_REF_LEN`] characters, `host[:port][/namespace]/name@sha256:<64 lowercase hex>`, the
/// host made of at least two dot-separated labels of letters, digits and `-`, the port 2 to 5
/// digits, at most one namespace of up to 61 of `[A-Za-z0-9_-]`, the name of `[A-Za-z0-9_.-]`.
/// The error is the CRD's message.
pub fn check_image_ref(image: &str) -> Result<(), String> {
    if image.is_empty() || image.len() > MAX_REF_LEN {
        return Err(format!(
            "must be 1 to {MAX_REF_LEN} characters long, it is {}",
            image.len()
        ));
    }
    let parts: Vec<&str> = image.split('@').collect();
    let digest_ok = parts.len() == 2
        && parts[1].strip_prefix("sha256:").is_some_and(|hex| {
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
    if !digest_ok {
        return Err(DIGEST_MESSAGE.to_string());
    }
    if !name_ok(parts[0]) {
        return Err(NAME_MESSAGE.to_string());
    }
    Ok(())
}

fn name_ok(name: &str) -> bool {
    let Some((host_port, path)) = name.split_once('/') else {
        return false;
    };
    let (host, port) = match host_port.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (host_port, None),
    };
    let label =
        |l: &str| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let labels: Vec<&str> = host.split('.').collect();
    let host_ok = labels.len() >= 2 && labels.iter().all(|l| label(l));
    let port_ok =
        port.is_none_or(|p| (2..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    let namespace_char = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let path_ok = match path.split_once('/') {
        Some((namespace, rest)) => {
            namespace.len() <= 61
                && namespace.bytes().all(namespace_char)
                && rest.bytes().all(|b| namespace_char(b) || b == b'.')
        }
        None => path.bytes().all(|b| namespace_char(b) || b == b'.'),
    };
    host_ok && port_ok && path_ok
}

/// The sets a pool lists in `spec.pinnedImageSets`, as the MCO's controller fills it: the sets
/// whose labels the pool's `machineConfigSelector` selects, sorted by name. `None` when the
/// controller leaves the pool alone (its selector is empty, `{}`); a pool without a selector
/// selects nothing and lists no set.
pub fn pool_set_names(pool: &MachineConfigPool, sets: &[PinnedImageSet]) -> Option<Vec<String>> {
    if pool
        .spec
        .machine_config_selector
        .as_ref()
        .is_some_and(selector_is_empty)
    {
        return None;
    }
    let mut names: Vec<String> = sets
        .iter()
        .filter(|set| pool.selects_machine_config(&set.labels()))
        .map(|set| set.name().to_string())
        .collect();
    names.sort();
    Some(names)
}

#[cfg(test)]
#[path = "pinned_image_set_tests.rs"]
mod tests;
