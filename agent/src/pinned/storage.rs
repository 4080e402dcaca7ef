//! The MCD's storage check before a set's images are pulled: the node must report itself
//! `Ready` and free of `DiskPressure`, and its allocatable ephemeral storage must hold twice
//! the compressed size of the set's missing layers (for decompression) on top of 16Gi
//! ([`check_storage`]). The sizes come from the images' manifests in their registries
//! ([`ImageInspector`]: `skopeo inspect --raw` with the kubelet's pull secret, on the node's
//! registries.conf and certificates).

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;

use async_trait::async_trait;
use machine_config::PinnedImageSet;
use machine_config::mco::pinned_images::{ImageBytes, Platform, check_storage, image_bytes};
use machine_config::registries::REGISTRIES_CONF;

use super::cache::Cache;
use crate::cluster::pinned_watch::NodeView;
use crate::host::cri::ImageService;

/// Reads an image's manifest from its registry.
#[async_trait]
pub trait ImageInspector: Send + Sync {
    /// The raw manifest of `image` (a manifest list as it is).
    async fn raw_manifest(&self, image: &str) -> Result<String, String>;
}

/// [`ImageInspector`] through `skopeo inspect --raw`.
pub struct Skopeo {
    pub program: PathBuf,
    /// The pull secret on the host (the kubelet's `config.json`).
    pub auth_file: PathBuf,
    /// A node root other than the host's `/`: its `registries.conf` and its
    /// `/etc/docker/certs.d/<registry>` CAs are given to skopeo, which otherwise reads the
    /// host's.
    pub test_root: Option<PathBuf>,
}

impl Skopeo {
    /// The command for `image`, pointed at the test root's registry settings when there is one
    /// (`CONTAINERS_REGISTRIES_CONF`, `--cert-dir`).
    fn command(&self, image: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(["inspect", "--raw", "--authfile"])
            .arg(&self.auth_file);
        if let Some(root) = &self.test_root {
            let registries = root.join(REGISTRIES_CONF.trim_start_matches('/'));
            if registries.is_file() {
                command.env("CONTAINERS_REGISTRIES_CONF", registries);
            }
            let host = image.split('/').next().unwrap_or_default();
            let certs = root.join("etc/docker/certs.d").join(host);
            if !host.is_empty() && certs.is_dir() {
                command.arg("--cert-dir").arg(certs);
            }
        }
        command
    }
}

#[async_trait]
impl ImageInspector for Skopeo {
    async fn raw_manifest(&self, image: &str) -> Result<String, String> {
        let out = self
            .command(image)
            .arg(format!("docker://{image}"))
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("running {}: {e}", self.program.display()))?;
        if out.status.success() {
            return String::from_utf8(out.stdout)
                .map_err(|_| format!("the manifest of {image:?} is not UTF-8"));
        }
        // skopeo's last line says why (`... manifest unknown`, `unauthorized: ...`)
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(log_message)
            .unwrap_or_else(|| format!("{} exited with {}", self.program.display(), out.status));
        Err(format!(
            "failed to inspect the manifest of {image:?}: {why}"
        ))
    }
}

/// The message of a logrus line (`time="..." level=fatal msg="..."`), or the line.
fn log_message(line: &str) -> String {
    match line.split_once("msg=\"") {
        Some((_, rest)) => rest.strip_suffix('"').unwrap_or(rest).replace("\\\"", "\""),
        None => line.trim().to_string(),
    }
}

/// What the check reads besides the set.
pub struct Checker<'a> {
    pub node_name: &'a str,
    pub node: &'a NodeView,
    pub cri: &'a dyn ImageService,
    pub inspector: &'a dyn ImageInspector,
    pub cache: &'a Cache,
    pub platform: &'a Platform,
}

impl Checker<'_> {
    /// The check for `set`; `seen` holds the layer digests already counted for the pool (a
    /// layer shared by images or sets counts once).
    pub async fn check(
        &self,
        set: &PinnedImageSet,
        seen: &mut HashSet<String>,
    ) -> Result<(), String> {
        let node = self.node_name;
        if let Some(ready) = self.node.ready.as_deref().filter(|s| *s != "True") {
            return Err(format!("node {node} is reporting NotReady={ready}"));
        }
        if let Some(pressure) = self.node.disk_pressure.as_deref().filter(|s| *s != "False") {
            return Err(format!("node {node} is reporting OutOfDisk={pressure}"));
        }
        // none reported is none at all, as the MCD reads it
        let allocatable = self.node.allocatable_storage.unwrap_or(0);
        // below the minimum, whatever the images
        check_storage(allocatable, 0)?;
        let mut required = 0i64;
        for image in set.images() {
            if self.cache.pulled(image) {
                continue;
            }
            if self
                .cri
                .image_present(image)
                .await
                .map_err(|e| e.to_string())?
            {
                continue;
            }
            required = required.saturating_add(self.missing_bytes(image, seen).await?);
        }
        check_storage(allocatable, required).inspect_err(|_| {
            tracing::error!(
                set = set.name(),
                allocatable,
                required = required.saturating_mul(2),
                "not enough storage for the pinned image set"
            );
        })
    }

    /// The compressed size of `image`'s layers not in `seen`.
    async fn missing_bytes(&self, image: &str, seen: &mut HashSet<String>) -> Result<i64, String> {
        let layers = match self.cache.layers(image) {
            Some(layers) => layers,
            None => {
                let layers = self.layers(image).await?;
                self.cache.set_layers(image, layers.clone());
                layers
            }
        };
        Ok(layers
            .into_iter()
            .filter(|(digest, _)| seen.insert(digest.clone()))
            .map(|(_, size)| size)
            .sum())
    }

    async fn layers(&self, image: &str) -> Result<Vec<(String, i64)>, String> {
        let manifest = self.inspector.raw_manifest(image).await?;
        let invalid = |e: String| format!("the manifest of {image:?}: {e}");
        match image_bytes(&manifest, self.platform).map_err(invalid)? {
            ImageBytes::Layers(layers) => Ok(layers),
            ImageBytes::Entry(digest) => {
                // a manifest list: the image of this node's platform
                let repository = image.split('@').next().unwrap_or(image);
                let entry = format!("{repository}@{digest}");
                let manifest = self.inspector.raw_manifest(&entry).await?;
                match image_bytes(&manifest, self.platform).map_err(invalid)? {
                    ImageBytes::Layers(layers) => Ok(layers),
                    ImageBytes::Entry(_) => {
                        Err(invalid("a manifest list inside a manifest list".into()))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skopeos_message_is_read_from_its_log_line() {
        let line = r#"time="2026-11-28T08:39:15Z" level=fatal msg="Error parsing image name \"docker://r/a@sha256:1\": reading manifest sha256:1 in r/a: manifest unknown: manifest unknown""#;
        assert_eq!(
            log_message(line),
            r#"Error parsing image name "docker://r/a@sha256:1": reading manifest sha256:1 in r/a: manifest unknown: manifest unknown"#
        );
        assert_eq!(log_message(" plain words "), "plain words");
    }
}
