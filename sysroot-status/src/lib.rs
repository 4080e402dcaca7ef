//! Reading the deployments straight from an ostree sysroot with libostree (no rpm-ostree):
//! checksums, OS names, origins (ostree refspec or container image reference), the BLS
//! `options` kernel arguments, and which deployment is booted, staged or pinned.
//!
//! This is the only code of the node's binaries that links libostree (and with it glib, gio,
//! gpgme, curl, ...): `mco-agent status` runs it as a separate executable,
//! `mco-sysroot-status SYSROOT`, which prints the [`OsStatus`] as JSON, so that the daemon does
//! not map and relocate some sixty shared libraries at every start (docs/benchmarks.md).
//! libostree is synchronous; [`read_sysroot`] blocks.

use std::path::Path;

use mco_agent::os::{Deployment, OsError, OsStatus};
use ostree::gio;
use ostree::glib;

/// Reads the sysroot at `path` (blocking).
pub fn read_sysroot(path: &Path) -> Result<OsStatus, OsError> {
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
    Ok(OsStatus { deployments })
}
