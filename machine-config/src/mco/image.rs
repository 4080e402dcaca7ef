//! Image mode (on-cluster layering): a node in an image-mode pool runs the OS image named by
//! its `desiredImage` annotation instead of its rendered config's `osImageURL`.
//!
//! As the MCD does, the layered image travels inside a copy of the rendered config: its
//! `osImageURL` is replaced by the image and two annotations remember both values
//! ([`ORIGINAL_OS_IMAGE_URL`], [`OCL_OS_IMAGE_URL`]). Everything that compares, plans and
//! verifies configs then decides on the image too (an image change is an `osImageURL` change:
//! one update, one reboot with any config change), and the on-disk record splits it again
//! into `currentconfig` (the rendered config as the cluster has it) and `currentimage`.

use crate::MachineConfig;
use crate::mco::annotations::{OCL_OS_IMAGE_URL, ORIGINAL_OS_IMAGE_URL};

/// `mc` with `image` as its OS image (a copy; `None` or empty: `mc` unchanged, the pool is not
/// in image mode). A config that already carries an image is embedded from its original
/// `osImageURL`, so embedding twice is embedding once.
pub fn embed_image(mc: &MachineConfig, image: Option<&str>) -> MachineConfig {
    let (mut out, _) = extract_image(mc);
    let Some(image) = image.filter(|i| !i.is_empty()) else {
        return out;
    };
    let annotations = out
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(
        ORIGINAL_OS_IMAGE_URL.to_string(),
        out.spec.os_image_url.clone(),
    );
    annotations.insert(OCL_OS_IMAGE_URL.to_string(), image.to_string());
    out.spec.os_image_url = image.to_string();
    out
}

/// The rendered config inside `mc` and the layered image it carries (`None`: not embedded).
pub fn extract_image(mc: &MachineConfig) -> (MachineConfig, Option<String>) {
    let mut out = mc.clone();
    let Some(annotations) = out.metadata.annotations.as_mut() else {
        return (out, None);
    };
    if !annotations.contains_key(ORIGINAL_OS_IMAGE_URL)
        && !annotations.contains_key(OCL_OS_IMAGE_URL)
    {
        return (out, None);
    }
    let original = annotations
        .remove(ORIGINAL_OS_IMAGE_URL)
        .unwrap_or_default();
    let image = annotations
        .remove(OCL_OS_IMAGE_URL)
        .filter(|i| !i.is_empty());
    if annotations.is_empty() {
        out.metadata.annotations = None;
    }
    out.spec.os_image_url = original;
    (out, image)
}

/// The layered image `mc` carries, if any.
pub fn layered_image(mc: &MachineConfig) -> Option<&str> {
    mc.metadata
        .annotations
        .as_ref()?
        .get(OCL_OS_IMAGE_URL)
        .map(String::as_str)
        .filter(|i| !i.is_empty())
}

/// Whether `image` names its content by digest (`...@sha256:<64 hex>`): the MCD warns about an
/// OS image that does not, since a tag can move under a node.
pub fn pinned_by_digest(image: &str) -> bool {
    image.rsplit_once('@').is_some_and(|(_, d)| {
        d.strip_prefix("sha256:")
            .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MachineConfigSpec;

    const BASE: &str = "quay.io/openshift/rhcos@sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const LAYERED: &str = "registry.example/ocl/worker@sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn rendered() -> MachineConfig {
        MachineConfig::new(
            "rendered-worker-1",
            MachineConfigSpec {
                os_image_url: BASE.into(),
                ..Default::default()
            },
        )
    }

    #[test]
    fn embedding_and_extracting() {
        struct Case {
            name: &'static str,
            image: Option<&'static str>,
            os_image_url: &'static str,
            carried: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "no image: unchanged",
                image: None,
                os_image_url: BASE,
                carried: None,
            },
            Case {
                name: "empty image: unchanged",
                image: Some(""),
                os_image_url: BASE,
                carried: None,
            },
            Case {
                name: "an image replaces osImageURL",
                image: Some(LAYERED),
                os_image_url: LAYERED,
                carried: Some(LAYERED),
            },
        ];
        for c in cases {
            let mc = rendered();
            let embedded = embed_image(&mc, c.image);
            assert_eq!(embedded.spec.os_image_url, c.os_image_url, "{}", c.name);
            assert_eq!(layered_image(&embedded), c.carried, "{}", c.name);
            let (back, image) = extract_image(&embedded);
            assert_eq!(
                back, mc,
                "{}: extracting gives the rendered config back",
                c.name
            );
            assert_eq!(image.as_deref(), c.carried, "{}", c.name);
            // Embedding again (another image, or none) starts from the rendered config.
            assert_eq!(embed_image(&embedded, c.image), embedded, "{}", c.name);
            assert_eq!(embed_image(&embedded, None), mc, "{}", c.name);
        }
    }

    #[test]
    fn other_annotations_survive() {
        let mut mc = rendered();
        mc.metadata.annotations = Some([("keep".to_string(), "me".to_string())].into());
        let (back, image) = extract_image(&embed_image(&mc, Some(LAYERED)));
        assert_eq!(back, mc);
        assert_eq!(image.as_deref(), Some(LAYERED));
    }

    #[test]
    fn digests() {
        assert!(pinned_by_digest(LAYERED));
        assert!(!pinned_by_digest("registry.example/ocl/worker:latest"));
        assert!(!pinned_by_digest("registry.example/ocl/worker@sha256:abc"));
    }
}
