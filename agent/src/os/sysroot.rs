//! Reading the deployments straight from the ostree sysroot with libostree (no rpm-ostree):
//! checksums, OS names, origins (ostree refspec or container image reference), the BLS
//! `options` kernel arguments, and which deployment is booted, staged, pending or rollback.
//!
//! The sysroot is `/` on a node, a temporary sysroot in tests. libostree is synchronous and its
//! objects stay on one thread: [`read_sysroot`] blocks; call it through
//! [`read_sysroot_async`] from async code.

use std::path::{Path, PathBuf};

use ostree::gio;
use ostree::glib;

use super::error::OsError;
use super::types::{Deployment, OsStatus};

/// The sysroot's deployments, in boot order, with their kernel arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysrootState {
    pub path: PathBuf,
    pub status: OsStatus,
}

impl SysrootState {
    /// The booted deployment (none when the sysroot is not the running system's).
    pub fn booted(&self) -> Option<&Deployment> {
        self.status.booted()
    }

    pub fn staged(&self) -> Option<&Deployment> {
        self.status.staged()
    }

    /// See [`OsStatus::pending`].
    pub fn pending(&self) -> Option<&Deployment> {
        self.status.pending()
    }

    /// The deployment after the booted one (after the default one when not booted).
    pub fn rollback(&self) -> Option<&Deployment> {
        let anchor = self.status.booted_or_default()?;
        let pos = self
            .status
            .deployments
            .iter()
            .position(|d| d.id == anchor.id)?;
        self.status
            .deployments
            .iter()
            .skip(pos + 1)
            .find(|d| d.osname == anchor.osname)
    }

    /// See [`OsStatus::booted_or_default`].
    pub fn booted_or_default(&self) -> Option<&Deployment> {
        self.status.booted_or_default()
    }
}

/// Reads the sysroot at `path` (blocking).
pub fn read_sysroot(path: &Path) -> Result<SysrootState, OsError> {
    let err = |message: String| OsError::Sysroot {
        path: path.to_path_buf(),
        message,
    };
    let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(path)));
    sysroot
        .load(gio::Cancellable::NONE)
        .map_err(|e| err(format!("loading: {e}")))?;
    let repo = sysroot.repo();
    let booted = sysroot.booted_deployment();
    let locked = Path::new("/run/ostree/staged-deployment-locked").exists();
    let mut deployments = Vec::new();
    for d in sysroot.deployments() {
        let checksum = d.csum().to_string();
        let (version, timestamp) = match repo.load_commit(&checksum) {
            Ok((commit, _)) => (
                glib::VariantDict::new(Some(&commit.child_value(0)))
                    .lookup::<String>("version")
                    .ok()
                    .flatten(),
                Some(ostree::commit_get_timestamp(&commit)),
            ),
            Err(e) => return Err(err(format!("loading commit {checksum}: {e}"))),
        };
        let origin = d.origin();
        let get = |group: &str, key: &str| {
            origin
                .as_ref()
                .and_then(|kf| kf.string(group, key).ok())
                .map(|s| s.to_string())
        };
        let list = |group: &str, key: &str| -> Vec<String> {
            origin
                .as_ref()
                .and_then(|kf| kf.string_list(group, key).ok())
                .map(|v| {
                    v.iter()
                        .map(|s| s.to_string())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };
        let staged = d.is_staged();
        deployments.push(Deployment {
            id: format!("{}-{}.{}", d.osname(), checksum, d.deployserial()),
            osname: d.osname().to_string(),
            serial: d.deployserial(),
            // Layering is rpm-ostree's business; libostree alone does not say.
            base_checksum: None,
            version,
            timestamp,
            origin: get("origin", "refspec").or_else(|| get("origin", "baserefspec")),
            container_image_reference: get("origin", "container-image-reference"),
            custom_origin: get("origin", "custom-url")
                .map(|u| (u, get("origin", "custom-description").unwrap_or_default())),
            booted: booted.as_ref().is_some_and(|b| b.equal(&d)),
            staged,
            pinned: d.is_pinned(),
            finalization_locked: staged && locked,
            requested_packages: list("packages", "requested"),
            requested_base_removals: list("overrides", "remove"),
            kargs: Some(
                d.bootconfig()
                    .and_then(|b| b.get("options"))
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
            ),
            checksum,
        });
    }
    Ok(SysrootState {
        path: path.to_path_buf(),
        status: OsStatus { deployments },
    })
}

/// [`read_sysroot`] on a blocking thread.
pub async fn read_sysroot_async(path: &Path) -> Result<SysrootState, OsError> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || read_sysroot(&owned))
        .await
        .map_err(|e| OsError::Sysroot {
            path: path.to_path_buf(),
            message: format!("reader thread: {e}"),
        })?
}
