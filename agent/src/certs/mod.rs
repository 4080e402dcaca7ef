//! The certificate writer's files: what the MCD writes from the ControllerConfig
//! `machine-config-controller` outside any update (no drain, no reboot, no `Working` state),
//! written here on a root.
//!
//! In the MCD's order:
//! 1. `/etc/mco/internal-registry-pull-secret.json`, the merged pull secret
//!    (`spec.internalRegistryPullSecret`);
//! 2. `/etc/kubernetes/kubelet-ca.crt` (`spec.kubeAPIServerServingCAData`);
//! 3. the cloud provider's `ca-bundle.pem` (`spec.cloudProviderCAData`);
//! 4. `/etc/docker/certs.d/<registry>/ca.crt` for each registry bundle, the cluster's then the
//!    administrator's, `<registry>` being the bundle's `file` with `..` made `:`; a directory
//!    under `certs.d` that no bundle names is removed with what it holds.
//!
//! The rules (module `files`): data that does not end in a newline gets one, so empty data is a file
//! holding `"\n"` (never a deletion); an existing file keeps its mode and owner, a new one is
//! 0644 root:root in directories created 0755 (the pull secret: 0600, it holds credentials);
//! every write is atomic and durable (temp file, fsync, rename, fsync of the directory), and a
//! file that already holds the data is not rewritten. Bad input (a registry name that is not one
//! directory name) is refused before anything is written, naming the offending value.
//!
//! The service-CA rotation ([`server_ca`]) updates the API server CA of the kubelet's
//! kubeconfigs. Where this differs from the MCD, and why: `docs/mcd-compatibility.md`.

mod files;
mod registry;
pub mod server_ca;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::PathBuf;

use machine_config::controller_config::ControllerConfigSpec;
use machine_config::mco::paths::{CLOUD_CA_BUNDLE, KUBELET_CA, MERGED_PULL_SECRET};

use crate::rootfs::{Root, RootError};

pub use registry::registry_dirs_of;

/// Mode of a new merged pull secret: it holds registry credentials.
const PULL_SECRET_MODE: u32 = 0o600;

/// Why the certificates could not be written. Every message names the file (or the value)
/// at fault: it becomes the node's Degraded reason.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A registry bundle whose `file` is not a registry name; nothing was written.
    #[error(
        "ControllerConfig registry CA {file:?} (directory {dir:?} under /etc/docker/certs.d): {why}"
    )]
    InvalidRegistry {
        file: String,
        dir: String,
        why: &'static str,
    },
    /// A file could not be read, written or removed.
    /// (The cause is said in the text, not returned as `source()`: a chain says it once.)
    #[error("could not write {}: {error}", path.display())]
    Write { path: PathBuf, error: RootError },
    /// The kubeconfig-data bundle or a kubeconfig cannot be used (service-CA rotation).
    #[error("{}: {message}", path.display())]
    Kubeconfig { path: PathBuf, message: String },
}

impl CertError {
    pub(crate) fn write(path: impl Into<PathBuf>, source: RootError) -> Self {
        CertError::Write {
            path: path.into(),
            error: source,
        }
    }
}

/// What a [`write_certificates`] changed on disk.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Written {
    /// Files written (absent, or holding other data or another mode before).
    pub files: Vec<PathBuf>,
    /// Registry directories removed from `/etc/docker/certs.d` (no bundle names them).
    pub removed: Vec<String>,
}

impl Written {
    /// Whether anything changed.
    pub fn changed(&self) -> bool {
        !self.files.is_empty() || !self.removed.is_empty()
    }
}

/// Writes the certificate writer's files from `spec` into `root` (see the module docs).
/// Registry directories `keep` names (those the node's current MachineConfig writes files
/// into; asked only when some directory is not a bundle's) are not removed even when no bundle
/// names them.
pub fn write_certificates(
    root: &Root,
    spec: &ControllerConfigSpec,
    keep: impl FnOnce() -> BTreeSet<String>,
) -> Result<Written, CertError> {
    let registries = registry::plan(spec)?;
    let mut written = Written::default();
    let bundles: [(&str, &[u8], Option<u32>); 3] = [
        (
            MERGED_PULL_SECRET,
            &spec.internal_registry_pull_secret,
            Some(PULL_SECRET_MODE),
        ),
        (KUBELET_CA, &spec.kube_api_server_serving_ca_data, None),
        (CLOUD_CA_BUNDLE, &spec.cloud_provider_ca_data, None),
    ];
    for (path, data, mode) in bundles {
        if files::write_bundle(root, path, data, mode)? {
            written.files.push(PathBuf::from(path));
        }
    }
    registry::write(root, &registries, keep, &mut written)?;
    Ok(written)
}
