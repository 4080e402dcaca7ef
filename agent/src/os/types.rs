//! What the OS seam talks about: deployments, kernel-argument changes, image targets, package
//! changes, cleanup targets and transaction outcomes.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One ostree deployment, as rpm-ostree's `Deployments` property or the sysroot describes it.
/// Serialized: `mco-sysroot-status` hands the sysroot's deployments to `mco-agent status` as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Deployment {
    /// rpm-ostree's id: `<osname>-<checksum>.<serial>`.
    pub id: String,
    pub osname: String,
    /// The deployed commit.
    pub checksum: String,
    /// The base commit under client-side package layering (rpm-ostree's `base-checksum`, only
    /// present for a layered deployment).
    pub base_checksum: Option<String>,
    pub serial: i32,
    /// The commit's `version` metadata.
    pub version: Option<String>,
    /// The commit timestamp (seconds since the epoch).
    pub timestamp: Option<u64>,
    /// The ostree refspec the deployment follows, when it is not a container image.
    pub origin: Option<String>,
    /// The ostree container image reference (`ostree-unverified-registry:<image>`, ...).
    pub container_image_reference: Option<String>,
    /// rpm-ostree's custom origin `(url, description)`, e.g. `pivot://<image>`.
    pub custom_origin: Option<(String, String)>,
    pub booted: bool,
    pub staged: bool,
    pub pinned: bool,
    /// A staged deployment that will not be finalized at shutdown until unlocked.
    pub finalization_locked: bool,
    /// Layered package requests (`[packages] requested` of the origin).
    pub requested_packages: Vec<String>,
    /// Base packages removed by override (`[overrides] remove` of the origin).
    pub requested_base_removals: Vec<String>,
    /// The BLS `options` line, when read from the sysroot (not part of `Deployments`).
    pub kargs: Option<String>,
}

impl Deployment {
    /// What `FinalizeDeployment`'s `checksum` option is compared with: the base commit of a
    /// layered deployment, else the deployment's commit.
    pub fn finalize_checksum(&self) -> &str {
        self.base_checksum.as_deref().unwrap_or(&self.checksum)
    }

    /// The OS image URL this deployment runs, the way the MCD derives it: the container image
    /// reference without its ostree (and containers) transport, else a `pivot://` custom origin.
    pub fn image_url(&self) -> Option<String> {
        if let Some(r) = &self.container_image_reference {
            return Some(strip_image_transport(r).to_string());
        }
        let (url, _) = self.custom_origin.as_ref()?;
        url.strip_prefix("pivot://").map(str::to_string)
    }
}

/// `ostree-unverified-registry:quay.io/x@sha256:..` → `quay.io/x@sha256:..`; also strips
/// `ostree-unverified-image:<transport>:`, `ostree-remote-registry:<remote>:`,
/// `ostree-remote-image:<remote>:<transport>:` and `ostree-image-signed:<transport>:`.
pub fn strip_image_transport(reference: &str) -> &str {
    let rest = if let Some(r) = reference.strip_prefix("ostree-unverified-registry:") {
        return r;
    } else if let Some(r) = reference.strip_prefix("ostree-remote-registry:") {
        return r.split_once(':').map_or(r, |(_, i)| i);
    } else if let Some(r) = reference
        .strip_prefix("ostree-unverified-image:")
        .or_else(|| reference.strip_prefix("ostree-image-signed:"))
    {
        r
    } else if let Some(r) = reference.strip_prefix("ostree-remote-image:") {
        r.split_once(':').map_or(r, |(_, i)| i)
    } else {
        return reference;
    };
    if let Some(i) = rest.strip_prefix("docker://") {
        return i;
    }
    [
        "registry:",
        "containers-storage:",
        "oci:",
        "oci-archive:",
        "docker-archive:",
        "dir:",
    ]
    .iter()
    .find_map(|t| rest.strip_prefix(t))
    .unwrap_or(rest)
}

/// The deployments of the sysroot, in boot order (index 0 boots next).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OsStatus {
    pub deployments: Vec<Deployment>,
}

impl OsStatus {
    pub fn booted(&self) -> Option<&Deployment> {
        self.deployments.iter().find(|d| d.booted)
    }

    pub fn staged(&self) -> Option<&Deployment> {
        self.deployments.iter().find(|d| d.staged)
    }

    /// The deployment that boots next: the first one.
    pub fn default_deployment(&self) -> Option<&Deployment> {
        self.deployments.first()
    }

    /// On a booted system, the deployment that boots next when it is not the booted one
    /// (staged, or written as the new default).
    pub fn pending(&self) -> Option<&Deployment> {
        self.booted()?;
        self.deployments.first().filter(|d| !d.booted)
    }

    /// The booted deployment, or on a sysroot that is not booted (a `--root` or test sysroot)
    /// the one that would boot: the default.
    pub fn booted_or_default(&self) -> Option<&Deployment> {
        self.booted().or_else(|| self.default_deployment())
    }
}

/// Whose kernel arguments to read (`GetDeploymentBootConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KargsTarget {
    /// The first deployment of the OS: the pending one if any, else the booted one. What
    /// `rpm-ostree kargs` shows and what a `KernelArgs` call starts from.
    Pending,
    /// The merge deployment: the booted one on a booted system.
    Booted,
    /// A deployment by its index in boot order.
    Index(u32),
}

/// A deployment's boot entry as `GetDeploymentBootConfig` returns it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BootConfig {
    /// The kernel arguments (BLS `options`).
    pub options: String,
    pub staged: bool,
}

/// The OS image to rebase to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OsImage {
    /// Pulled from its registry: `ostree-unverified-registry:<image>`.
    Registry(String),
    /// Already in local container storage (pulled by podman): `ostree-unverified-image:
    /// containers-storage:<image>`.
    ContainersStorage(String),
}

impl OsImage {
    /// The refspec `Rebase` takes.
    pub fn refspec(&self) -> String {
        match self {
            OsImage::Registry(i) => format!("ostree-unverified-registry:{i}"),
            OsImage::ContainersStorage(i) => {
                format!("ostree-unverified-image:containers-storage:{i}")
            }
        }
    }

    /// The image itself.
    pub fn image(&self) -> &str {
        match self {
            OsImage::Registry(i) | OsImage::ContainersStorage(i) => i,
        }
    }
}

/// What `Cleanup` removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CleanupTarget {
    /// `rpm-ostree cleanup -p`: pending (and staged) deployments.
    Pending,
    /// `rpm-ostree cleanup -r`: the rollback deployment.
    Rollback,
    /// `rpm-ostree cleanup -b`: temporary files, unreferenced objects.
    Base,
    /// `rpm-ostree cleanup -m`: cached rpm-md repository data.
    RepoMetadata,
}

impl CleanupTarget {
    /// The element name `Cleanup` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupTarget::Pending => "pending-deploy",
            CleanupTarget::Rollback => "rollback-deploy",
            CleanupTarget::Base => "base",
            CleanupTarget::RepoMetadata => "repomd",
        }
    }
}

impl fmt::Display for CleanupTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a transaction went, when it succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TransactionOutcome {
    /// The rpm-ostree method, e.g. `KernelArgs` (`-` when nothing was called).
    pub method: String,
    /// The transaction's title.
    pub title: String,
    /// The `Message` lines it sent (e.g. `No changes.`).
    pub messages: Vec<String>,
    /// False when this client attached to a transaction someone else had started.
    pub started_here: bool,
}

impl TransactionOutcome {
    /// An outcome for a change that needed no transaction.
    pub fn nothing_to_do(method: &str, why: &str) -> Self {
        TransactionOutcome {
            method: method.into(),
            title: String::new(),
            messages: vec![why.to_string()],
            started_here: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_refspecs() {
        let i = "quay.io/openshift/rhcos@sha256:0123";
        assert_eq!(
            OsImage::Registry(i.into()).refspec(),
            format!("ostree-unverified-registry:{i}")
        );
        assert_eq!(
            OsImage::ContainersStorage(i.into()).refspec(),
            format!("ostree-unverified-image:containers-storage:{i}")
        );
        for r in [
            format!("ostree-unverified-registry:{i}"),
            format!("ostree-unverified-image:containers-storage:{i}"),
            format!("ostree-unverified-image:docker://{i}"),
            format!("ostree-remote-registry:rhcos:{i}"),
            format!("ostree-remote-image:rhcos:registry:{i}"),
            format!("ostree-image-signed:registry:{i}"),
            i.to_string(),
        ] {
            assert_eq!(strip_image_transport(&r), i, "{r}");
        }
    }

    #[test]
    fn image_url_prefers_the_container_reference_then_pivot() {
        let mut d = Deployment {
            custom_origin: Some(("pivot://quay.io/old@sha256:1".into(), "".into())),
            ..Default::default()
        };
        assert_eq!(d.image_url().as_deref(), Some("quay.io/old@sha256:1"));
        d.container_image_reference =
            Some("ostree-unverified-registry:quay.io/new@sha256:2".into());
        assert_eq!(d.image_url().as_deref(), Some("quay.io/new@sha256:2"));
        d.container_image_reference = None;
        d.custom_origin = Some(("https://example".into(), "".into()));
        assert_eq!(d.image_url(), None);
    }

    #[test]
    fn status_picks_booted_staged_pending() {
        let s = OsStatus {
            deployments: vec![
                Deployment {
                    id: "new".into(),
                    staged: true,
                    ..Default::default()
                },
                Deployment {
                    id: "cur".into(),
                    booted: true,
                    ..Default::default()
                },
            ],
        };
        assert_eq!(s.booted().unwrap().id, "cur");
        assert_eq!(s.staged().unwrap().id, "new");
        assert_eq!(s.pending().unwrap().id, "new");
        assert_eq!(s.booted_or_default().unwrap().id, "cur");
        let unbooted = OsStatus {
            deployments: vec![Deployment {
                id: "only".into(),
                ..Default::default()
            }],
        };
        assert_eq!(unbooted.booted_or_default().unwrap().id, "only");
        assert_eq!(unbooted.pending(), None);
        assert_eq!(CleanupTarget::Pending.to_string(), "pending-deploy");
    }
}
