//! `mco-agent pivot IMAGE`: rebase the OS to an image by hand, the recovery the MCO's
//! documentation spells out as `rpm-ostree rebase` plus the force file ("forcing a pivot"), as
//! one command. The image is staged through rpm-ostree like an update's (pull secret arranged,
//! `cleanup -p` first, `lock-finalization` when the agent reboots), why is logged to the
//! journal, the reboot goes through the normal rebooter (unless `--skip-reboot`), and with a
//! cluster the Node gets the MCD's OS events and `post-config-action`.
//!
//! Nothing is changed when the image is malformed, when an update is in progress (its record
//! exists: pivoting under it would race its OS step), or with `--dry-run`, which says what
//! would change.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use machine_config::mco::annotations::{POST_CONFIG_ACTION, POST_CONFIG_ACTION_REBOOTING};
use machine_config::mco::events::reason;
use machine_config::mco::image::pinned_by_digest;

use crate::cluster::NodeApi;
use crate::engine::live::{self, SeamOptions};
use crate::engine::{record, running_deployment};
use crate::os::{CleanupTarget, OsImage, arrange_pull_secret};
use crate::rootfs::Root;

/// How long a Node write may take before the pivot goes on without it.
const NODE_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What to do.
#[derive(Debug, Clone)]
pub struct PivotOptions {
    /// The image, without transport: `registry/repo@sha256:<digest>` (or `:tag`).
    pub image: String,
    /// Say what would change; change nothing.
    pub dry_run: bool,
    /// Reboot into the image once it is staged.
    pub reboot: bool,
    /// Stage with rpm-ostree's `lock-finalization` when rebooting (as updates do).
    pub lock_finalization: bool,
}

/// What the pivot did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PivotOutcome {
    /// The node already runs the image: nothing to do.
    AlreadyThere { image: String },
    /// `--dry-run`: what a pivot would do.
    WouldRebase {
        from: Option<String>,
        to: String,
        reboot: bool,
        /// Why the running OS is not known (no system bus, no rpm-ostree): the dry run still
        /// says the rest.
        unknown: Option<String>,
    },
    /// Staged; rebooting, or why not.
    Staged {
        from: Option<String>,
        to: String,
        /// `None`: the reboot was requested. Else why the node is not rebooted.
        no_reboot: Option<String>,
    },
}

/// What a pivot would do: from the running deployment when rpm-ostree answers, else with the
/// reason it is unknown (a dry run needs neither the system bus nor rpm-ostree to say the
/// target and what it would do).
async fn dry_run(
    seams: Result<crate::engine::Seams>,
    opts: &PivotOptions,
    reboot: bool,
) -> Result<PivotOutcome> {
    let to = opts.image.clone();
    let running = match &seams {
        Ok(seams) => match &seams.os {
            Some(os) => running_deployment(os.as_ref())
                .await
                .map(|d| d.image_url())
                .map_err(|e| format!("{e:#}")),
            None => Err(format!(
                "rpm-ostree is not available: {}",
                seams.os_unavailable
            )),
        },
        Err(e) => Err(format!("{e:#}")),
    };
    match running {
        Ok(from) if from.as_deref() == Some(to.as_str()) => {
            Ok(PivotOutcome::AlreadyThere { image: to })
        }
        Ok(from) => Ok(PivotOutcome::WouldRebase {
            from,
            to,
            reboot,
            unknown: None,
        }),
        Err(why) => Ok(PivotOutcome::WouldRebase {
            from: None,
            to,
            reboot,
            unknown: Some(why),
        }),
    }
}

/// Checks that `image` is an image reference rpm-ostree can pull (no transport, no URL, a
/// well-formed digest); the error says what is wrong.
pub fn check_image(image: &str) -> Result<()> {
    if image.is_empty() {
        bail!("the image is empty");
    }
    if image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        bail!("{image:?}: an image reference has no spaces or control characters");
    }
    if image.contains("://") {
        bail!("{image}: a URL; give an image reference such as quay.io/org/os@sha256:<digest>");
    }
    if image.starts_with("ostree-") {
        bail!(
            "{image}: give the image without an ostree transport (the agent pulls it as ostree-unverified-registry:IMAGE)"
        );
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest
        && !pinned_by_digest(image)
    {
        bail!("{image}: the digest {d:?} is not sha256:<64 hex digits>");
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "._-/:".contains(c);
    if name.is_empty() || name.starts_with(['/', ':', '.', '-']) || !name.chars().all(ok_char) {
        bail!("{image}: not an image name (registry/repository[:tag][@sha256:<digest>])");
    }
    Ok(())
}

/// Pivots the OS of the node at `root_path` to `opts.image`, reporting to `node` when given.
pub async fn pivot(
    root_path: &Path,
    opts: &PivotOptions,
    node: Option<Arc<dyn NodeApi>>,
) -> Result<PivotOutcome> {
    check_image(&opts.image)?;
    let live = live::is_host_root(root_path);
    let root = crate::host::selinux::label_files(Root::open(root_path)?, live);
    if let Some(rec) = record::load(&root)? {
        bail!(
            "an update is in progress ({} at step {}): let it finish or roll back first; a pivot now would race its OS step",
            rec.describe(),
            rec.step
        );
    }
    let no_reboot = if !opts.reboot {
        Some("not rebooting (--skip-reboot)".to_string())
    } else if !live {
        Some("not rebooting: an alternate root is never rebooted".to_string())
    } else {
        None
    };
    let seams = live::connect(
        root_path,
        &SeamOptions {
            live,
            skip_os: false,
            no_reboot: no_reboot.clone(),
            lock_finalization: opts.lock_finalization,
        },
    )
    .await;
    if opts.dry_run {
        return dry_run(seams, opts, no_reboot.is_none()).await;
    }
    let seams = seams?;
    let os = seams
        .os
        .clone()
        .with_context(|| format!("the pivot needs rpm-ostree: {}", seams.os_unavailable))?;
    let from = running_deployment(os.as_ref()).await?.image_url();
    let to = opts.image.clone();
    if from.as_deref() == Some(to.as_str()) {
        tracing::info!(image = %to, "Already in desired image {to}");
        return Ok(PivotOutcome::AlreadyThere { image: to });
    }
    if !pinned_by_digest(&to) {
        tracing::warn!(image = %to, "OS image {to} is not pinned by digest: what it names may change");
    }
    let was = from.as_deref().unwrap_or("an OS that is not an image");
    let why = format!("mco-agent pivot: rebasing the OS from {was} to {to}, requested by hand");
    tracing::warn!(from = was, to = %to, "{why}");
    note(&node, reason::OS_UPDATE_STARTED, &why).await;
    arrange_pull_secret(&root).context("arranging the OS image pull secret")?;
    os.resume()
        .await
        .context("waiting for a running rpm-ostree transaction")?;
    os.cleanup(&[CleanupTarget::Pending])
        .await
        .context("removing pending deployments (cleanup -p)")?;
    os.rebase(&OsImage::Registry(to.clone()))
        .await
        .with_context(|| format!("rebasing to {to}"))?;
    let staged = format!("Changes to OS staged: rebased to {to} (mco-agent pivot)");
    tracing::info!(image = %to, "{staged}");
    note(&node, reason::OS_UPDATE_STAGED, &staged).await;
    let Some(rebooter) = seams.rebooter.clone() else {
        let why = no_reboot.unwrap_or_else(|| seams.no_reboot.clone());
        return Ok(PivotOutcome::Staged {
            from,
            to,
            no_reboot: Some(why),
        });
    };
    let reboot_reason = format!("Node will reboot into image {to} (mco-agent pivot)");
    note(&node, reason::REBOOT, &reboot_reason).await;
    if let Some(api) = &node {
        let mark = api.set_annotations(&[(POST_CONFIG_ACTION, Some(POST_CONFIG_ACTION_REBOOTING))]);
        match tokio::time::timeout(NODE_WRITE_TIMEOUT, mark).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not record the reboot on the node"),
            Err(_) => tracing::warn!("recording the reboot on the node timed out"),
        }
    }
    rebooter
        .reboot(&reboot_reason)
        .await
        .context("requesting the reboot (the image stays staged for the next boot)")?;
    Ok(PivotOutcome::Staged {
        from,
        to,
        no_reboot: None,
    })
}

/// An event on the Node, when there is one; a cluster that does not answer does not stop a
/// recovery.
async fn note(node: &Option<Arc<dyn NodeApi>>, reason: &str, message: &str) {
    let Some(api) = node else { return };
    match tokio::time::timeout(NODE_WRITE_TIMEOUT, api.event(reason, message)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, event = reason, "could not record the event"),
        Err(_) => tracing::warn!(event = reason, "recording the event timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_checked_before_anything_changes() {
        let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        for good in [
            format!("quay.io/openshift/rhcos@{digest}"),
            "registry.example:5000/os:4.18".to_string(),
            "localhost/os".to_string(),
        ] {
            assert!(check_image(&good).is_ok(), "{good}");
        }
        let cases = [
            ("", "empty"),
            ("quay.io/os latest", "no spaces"),
            ("https://quay.io/os", "a URL"),
            (
                "ostree-unverified-registry:quay.io/os",
                "without an ostree transport",
            ),
            ("quay.io/os@sha256:abc", "not sha256:<64 hex digits>"),
            ("/os", "not an image name"),
            ("quay.io/os$", "not an image name"),
        ];
        for (bad, want) in cases {
            let e = check_image(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }
}
