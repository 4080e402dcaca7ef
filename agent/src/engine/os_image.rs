//! How the OS image reaches rpm-ostree, as the MCD's `updateLayeredOS` decides
//! (upstream `pkg/daemon/update.go`, `podman.go`, `rpm-ostree.go`):
//! - an image podman already holds in local container storage (pinned by a PinnedImageSet,
//!   pulled for the bootloader update, pre-pulled by an administrator on a disconnected node)
//!   is rebased from there (`ostree-unverified-image:containers-storage:...`), under a
//!   temporary signature policy when `/etc/containers/policy.json` is restrictive, and never
//!   retried;
//! - any other image is pulled from its registry, with the MCD's retry (3 attempts, 10 s and
//!   20 s apart: OCPBUGS-43406, a rebase that meets a CoreDNS restart).
//!
//! Without the host's programs ([`HostCommands`]: an alternate root, a test without podman)
//! every image is pulled from its registry.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use machine_config::mco::node_conditions::Progress;
use serde::Deserialize;

use super::report::Reporter;
use crate::host::command::{CommandError, HostCommands};
use crate::host::systemd::{ActiveState, Systemd};
use crate::os::{OsImage, OsUpdater};
use crate::rootfs::{DEFAULT_FILE_MODE, Owner, Root};

/// The containers signature policy.
pub const POLICY: &str = "/etc/containers/policy.json";
/// The patched policy, bound over [`POLICY`] in rpm-ostreed's mount namespace.
pub const TEMP_POLICY: &str = "/run/tmp-rpm-ostree-policy.json";
/// The drop-in that binds it.
pub const POLICY_DROP_IN: &str =
    "/run/systemd/system/rpm-ostreed.service.d/temporal-policy-binding.conf";
const RPM_OSTREED: &str = "rpm-ostreed.service";

/// The waits before the 2nd and 3rd registry attempt: the MCD's backoff (10 s doubling, capped
/// at 60 s with 7 steps) gives 3 attempts. Its final 40 s wait, after which it tries nothing
/// more, is left out.
pub const REMOTE_RETRY_WAITS: [Duration; 2] = [Duration::from_secs(10), Duration::from_secs(20)];

/// The host around rpm-ostree that the rebase needs.
#[derive(Clone, Copy)]
pub struct ImageHost<'a> {
    pub root: &'a Root,
    pub commands: &'a dyn HostCommands,
    /// Restarts rpm-ostreed under the temporary policy; `None`: the policy is not patched.
    pub systemd: Option<&'a dyn Systemd>,
}

/// What podman reports of an image (`podman images --format=json`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct LocalImage {
    #[serde(rename = "Id", default)]
    pub id: String,
    #[serde(rename = "RepoDigests", default, deserialize_with = "null_as_empty")]
    pub repo_digests: Vec<String>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// The MCD's `GetPodmanImageInfoByReference`: the first image podman lists for `image`, `None`
/// when it lists none. A podman that runs and fails, or prints what is not its JSON, is an
/// error: the MCD aborts the update then too. A node without podman (it cannot be started) has
/// no local container storage to look in: `None`, and the image comes from its registry (the
/// MCD's nodes always have podman; a non-CoreOS ostree node may not).
pub async fn local_image(cmds: &dyn HostCommands, image: &str) -> Result<Option<LocalImage>> {
    let filter = format!("reference={image}");
    let out = match cmds
        .stdout(&["podman", "images", "--format=json", "--filter", &filter])
        .await
    {
        Err(CommandError::Spawn { message, .. }) => {
            tracing::info!(
                image,
                why = message,
                "podman cannot be run: no local container storage to rebase from"
            );
            return Ok(None);
        }
        other => {
            other.with_context(|| format!("asking podman whether {image} is in local storage"))?
        }
    };
    let listed: Vec<LocalImage> = serde_json::from_str(&out)
        .with_context(|| format!("reading podman's list of images for {image}"))?;
    Ok(listed.into_iter().next())
}

/// The reference rebased to from local storage: the image's repo digest equal to `image`
/// (as the MCD picks it), else `image` itself. (The MCD leaves it empty then, so a tag
/// reference fails its local rebase; a tag is a valid containers-storage reference.)
pub fn storage_reference(image: &str, local: &LocalImage) -> String {
    local
        .repo_digests
        .iter()
        .find(|d| *d == image)
        .cloned()
        .unwrap_or_else(|| image.to_string())
}

/// Rebases to `image`: from local storage when podman has it, else from its registry with
/// the MCD's retry; the registry pull is reported to `pulls`' MachineConfigNode
/// (`ImagePulledFromRegistry`).
pub async fn rebase(
    os: &dyn OsUpdater,
    image: &str,
    pulls: Option<&Reporter>,
    host: Option<ImageHost<'_>>,
) -> Result<()> {
    if let Some(host) = host {
        // Before the rebase, as the MCD's updateLayeredOS: the new image's bootloader on a
        // Secure Boot node (never fails the update).
        let bootloader = super::bootloader::BootloaderHost {
            root: host.root,
            commands: host.commands,
            systemd: host.systemd,
            arch: std::env::consts::ARCH,
        };
        super::bootloader::update(&bootloader, image).await;
    }
    if let Some(host) = host
        && let Some(local) = local_image(host.commands, image).await?
    {
        return rebase_local(os, image, &local, host).await;
    }
    rebase_remote(os, image, pulls).await
}

async fn rebase_local(
    os: &dyn OsUpdater,
    image: &str,
    local: &LocalImage,
    host: ImageHost<'_>,
) -> Result<()> {
    let reference = storage_reference(image, local);
    tracing::info!(
        image,
        reference,
        "Rebasing to the OS image in local container storage"
    );
    if let Some(systemd) = host.systemd
        && let Err(e) = patch_policy(host.root, host.commands, systemd, &reference, local).await
    {
        tracing::warn!(error = %format!("{e:#}"), "could not patch the signature policy for containers-storage; rebasing under the node's policy");
    }
    let result = os.rebase(&OsImage::ContainersStorage(reference)).await;
    if let Some(systemd) = host.systemd {
        remove_policy_patch(host.root, systemd).await;
    }
    result.with_context(|| format!("failed to update OS from local storage: {image}"))?;
    Ok(())
}

async fn rebase_remote(os: &dyn OsUpdater, image: &str, pulls: Option<&Reporter>) -> Result<()> {
    let progress = |p: Progress| async move {
        if let Some(r) = pulls {
            r.progress(p).await;
        }
    };
    progress(Progress::PullingImage {
        image: image.to_string(),
    })
    .await;
    let mut waits = REMOTE_RETRY_WAITS.iter();
    let outcome = loop {
        match os.rebase(&OsImage::Registry(image.to_string())).await {
            Ok(_) => break Ok(()),
            Err(e) => {
                let e = anyhow::Error::new(e);
                // rpm-ostreed refusing work while its reboot is queued is not a failed pull
                if super::os::reboot_queued(&e) {
                    break Err(e.context(format!("rebasing to {image}")));
                }
                let Some(wait) = waits.next() else {
                    break Err(e.context(format!(
                        "failed to update OS to {image} after retries: timed out waiting for the condition"
                    )));
                };
                tracing::warn!(retry_in = ?wait, "Failed to update OS to {image} (will retry): {e:#}");
                tokio::time::sleep(*wait).await;
            }
        }
    };
    match &outcome {
        Ok(()) => {
            progress(Progress::ImagePulled {
                image: image.to_string(),
            })
            .await
        }
        Err(e) => {
            progress(Progress::ImagePullFailed {
                image: image.to_string(),
                error: format!("{e:#}"),
            })
            .await
        }
    }
    outcome
}

/// Whether `policy` (the text of policy.json) needs no patch: its default accepts anything
/// and it says nothing about containers-storage (the MCD's check).
pub fn policy_accepts_storage(policy: &serde_json::Value) -> bool {
    let default_accepts =
        policy.get("default") == Some(&serde_json::json!([{"type": "insecureAcceptAnything"}]));
    let storage_rules = policy
        .get("transports")
        .and_then(|t| t.get("containers-storage"))
        .is_some();
    default_accepts && !storage_rules
}

/// `policy` with a rule accepting the image in local storage, keyed as the MCD keys it:
/// `[<driver>@<graph root>]<reference>@<image id>`, the identity containers/image gives
/// `containers-storage:<reference>` once it has found the image (no run root: the store is
/// named by its driver and graph root). The ID pins the image: what the reference names after
/// it moved to another image is refused (`agent/tests/os_local_image.rs`, with skopeo).
pub fn patched_policy(
    mut policy: serde_json::Value,
    driver: &str,
    graph_root: &str,
    reference: &str,
    image_id: &str,
) -> Result<serde_json::Value> {
    let key = format!("[{driver}@{graph_root}]{reference}@{image_id}");
    let root = policy
        .as_object_mut()
        .context("the policy is not a JSON object")?;
    let transports = root
        .entry("transports")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .context("the policy's \"transports\" is not a JSON object")?;
    let storage = transports
        .entry("containers-storage")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .context("the policy's containers-storage transport is not a JSON object")?;
    storage.insert(key, serde_json::json!([{"type": "insecureAcceptAnything"}]));
    Ok(policy)
}

/// Where podman keeps its images: the store that a `containers-storage` policy scope names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalStore {
    /// The storage driver (`overlay` on a node).
    pub driver: String,
    /// The store's graph root (`/var/lib/containers/storage` on a node).
    pub graph_root: String,
}

/// The store podman uses, from `podman system info --format=json` (as the MCD asks it): with
/// the host's storage configuration, the store `containers-storage:<reference>` opens.
pub async fn local_store(cmds: &dyn HostCommands) -> Result<LocalStore> {
    let info = cmds
        .stdout(&["podman", "system", "info", "--format=json"])
        .await
        .context("asking podman where its storage is")?;
    let info: serde_json::Value =
        serde_json::from_str(&info).context("reading podman system info")?;
    let field = |k: &str| {
        info.pointer(&format!("/store/{k}"))
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .with_context(|| format!("podman system info has no store.{k}"))
    };
    Ok(LocalStore {
        driver: field("graphDriverName")?,
        graph_root: field("graphRoot")?,
    })
}

/// The MCD's `patchPoliciesForContainerStorage`: when the node's policy would refuse the
/// image in local storage, rpm-ostreed is restarted with a patched copy bound over it. `Ok`
/// without doing anything when the policy needs no patch.
async fn patch_policy(
    root: &Root,
    cmds: &dyn HostCommands,
    systemd: &dyn Systemd,
    reference: &str,
    local: &LocalImage,
) -> Result<()> {
    let Some(text) = root.read_to_string(Path::new(POLICY))? else {
        return Ok(());
    };
    let policy: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("reading {POLICY}"))?;
    if policy_accepts_storage(&policy) {
        return Ok(());
    }
    let store = local_store(cmds).await?;
    let patched = patched_policy(
        policy,
        &store.driver,
        &store.graph_root,
        reference,
        &local.id,
    )?;
    let mut json = serde_json::to_vec_pretty(&patched)?;
    json.push(b'\n');
    root.write_atomic(
        Path::new(TEMP_POLICY),
        &json,
        DEFAULT_FILE_MODE,
        Owner::ROOT,
    )?;
    let drop_in = format!("[Service]\nBindReadOnlyPaths={TEMP_POLICY}:{POLICY}\n");
    root.write_atomic(
        Path::new(POLICY_DROP_IN),
        drop_in.as_bytes(),
        DEFAULT_FILE_MODE,
        Owner::ROOT,
    )?;
    tracing::info!(
        policy = TEMP_POLICY,
        "rpm-ostreed restarted with a policy accepting {reference} from containers-storage"
    );
    systemd.daemon_reload().await?;
    try_restart(systemd).await
}

/// `systemctl try-restart rpm-ostreed`: restarted only when it runs (it starts on the next
/// call otherwise, with the current drop-ins).
async fn try_restart(systemd: &dyn Systemd) -> Result<()> {
    let state = systemd.unit_active_state(RPM_OSTREED).await?;
    if matches!(
        state.active_state,
        ActiveState::Active | ActiveState::Activating | ActiveState::Reloading
    ) {
        systemd.restart_unit(RPM_OSTREED).await?;
    }
    Ok(())
}

/// Undoes `patch_policy`: the drop-in goes (rpm-ostreed restarted without it when it was
/// there), then the patched policy. Also at start-up, for a patch a crash left behind.
/// Failures are logged: the drop-in lives in `/run`, so a reboot removes it anyway.
pub async fn remove_policy_patch(root: &Root, systemd: &dyn Systemd) {
    match root.remove_file(Path::new(POLICY_DROP_IN)) {
        Ok(true) => {
            let restarted = async {
                systemd.daemon_reload().await?;
                try_restart(systemd).await
            };
            if let Err(e) = restarted.await {
                tracing::warn!(error = %format!("{e:#}"), "restarting rpm-ostreed without the temporary policy failed");
            }
        }
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "removing {POLICY_DROP_IN} failed"),
    }
    if let Err(e) = root.remove_file(Path::new(TEMP_POLICY)) {
        tracing::warn!(error = %e, "removing {TEMP_POLICY} failed");
    }
}
