//! Start-up, before the daemon watches for desired configs (the MCD's `checkStateOnFirstRun`):
//! finish an update recorded before the restart or reboot, seed the current config of a node
//! that has none recorded, and validate the disk (and OS) against the current config.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use machine_config::MachineConfig;
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{
    CURRENT_CONFIG as CURRENT_KEY, CURRENT_IMAGE as CURRENT_IMAGE_KEY,
};
use machine_config::mco::events::reason;
use machine_config::mco::image::{embed_image, layered_image};
use machine_config::mco::node_conditions::Progress;
use machine_config::mco::paths::{
    FORCE_FILE, NODE_ANNOTATIONS, NODE_ANNOTATIONS_BAK, SERVED_CONTENT as PROVISIONED_CONTENT,
};

use super::source::ConfigSource;
use crate::engine::{Engine, Outcome};
use crate::input;
use crate::rootfs::{DEFAULT_FILE_MODE, Owner};

/// Where start-up left the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// No update in progress.
    Ready,
    /// A reboot was requested (again): nothing more to do until it happens.
    Rebooting,
    /// An update waits for a reboot nobody will request (`--skip-reboot`).
    NeedsReboot,
}

/// Links `/run/ostree/auth.json` to the cluster's pull secret at start-up, as the MCD does
/// when it initializes its rpm-ostree client: `/run` is empty after every boot, and a pull
/// outside the agent's updates (an admin's `rpm-ostree rebase` or `upgrade`) needs the
/// credentials too. Only with rpm-ostree; a
/// failure is logged and start-up goes on (each pull arranges the link again and fails there).
pub fn link_pull_secret(engine: &Engine) {
    if !engine.checks_os() {
        return;
    }
    if let Err(e) = crate::os::arrange_pull_secret(engine.root()) {
        tracing::error!(error = %e, "error while linking rpm-ostree pull secrets");
    }
}

/// Removes a temporary signature policy a crash left bound over rpm-ostreed's (as the MCD
/// does when its rpm-ostree client starts; [`crate::engine::os_image`]).
pub async fn remove_policy_patch(engine: &Engine) {
    if let (true, Some(systemd)) = (engine.checks_os(), engine.seams().systemd.as_deref()) {
        crate::engine::os_image::remove_policy_patch(engine.root(), systemd).await;
    }
}

/// The MCD's `removeRollback` (BZ 2104619, disk use): `rpm-ostree cleanup -r` once per start
/// on a CoreOS node. Only with no update in progress, unlike the MCD: the deployment a boot
/// being verified would roll back to is kept until the update is committed. A failure makes
/// the node Degraded (`failed to remove rollback: ...`) and fails the start (systemd starts
/// the agent again, which tries again), as it fails the MCD's first sync.
pub async fn remove_rollback(engine: &Engine) -> Result<()> {
    let Some(os) = engine.seams().os.as_deref() else {
        return Ok(());
    };
    if !engine.checks_os() || !crate::os::host_os::is_coreos(engine.root()) {
        return Ok(());
    }
    if let Err(e) = os.cleanup(&[crate::os::CleanupTarget::Rollback]).await {
        let reason = format!("failed to remove rollback: {e}");
        engine
            .reporter()
            .state(engine.root(), NodeState::Degraded, &reason)
            .await;
        anyhow::bail!(reason);
    }
    tracing::info!("Removed the rollback deployment (rpm-ostree cleanup -r)");
    Ok(())
}

/// Finishes a recorded update, if any.
pub async fn resume(engine: &Engine) -> Started {
    let Some(report) = engine.resume().await else {
        return Started::Ready;
    };
    tracing::info!(from = report.from, to = report.to, outcome = ?report.outcome, "finished the recorded update");
    engine.reporter().publish_progress();
    match report.outcome {
        Outcome::Rebooting => Started::Rebooting,
        Outcome::NeedsReboot => Started::NeedsReboot,
        _ => Started::Ready,
    }
}

/// When no `currentconfig` is recorded: the current config from `node-annotations.json` (its
/// `currentConfig`, found in the provisioned content or fetched by name), recorded and the
/// annotations file moved aside as the MCD does; else the provisioned content itself. `None`
/// when the node has no current config at all (its first update is a first application).
///
/// With a cluster, `annotated` is the node's `currentConfig` annotation: when there is no
/// `node-annotations.json`, that config is fetched by name.
pub async fn seed_current(
    engine: &Engine,
    source: &dyn ConfigSource,
    annotated: Option<&str>,
) -> Result<Option<String>> {
    let root = engine.root();
    if let Some(c) = input::read_current(root)? {
        return Ok(Some(c.machine_config.name().to_string()));
    }
    let provisioned = match root.read(Path::new(PROVISIONED_CONTENT))? {
        Some(bytes) => Some(
            MachineConfig::from_slice(&bytes).with_context(|| PROVISIONED_CONTENT.to_string())?,
        ),
        None => None,
    };
    let seed = match root.read(Path::new(NODE_ANNOTATIONS))? {
        Some(bytes) => {
            let map: BTreeMap<String, String> =
                serde_json::from_slice(&bytes).with_context(|| {
                    format!("{NODE_ANNOTATIONS}: expected a JSON object of strings")
                })?;
            let name = map
                .get(CURRENT_KEY)
                .filter(|n| !n.is_empty())
                .with_context(|| format!("{NODE_ANNOTATIONS}: no {CURRENT_KEY}"))?
                .clone();
            let mc = match provisioned.filter(|p| p.name() == name) {
                Some(p) => p,
                None => source
                    .fetch(Some(&name))
                    .await
                    .with_context(|| format!("getting the node's current config {name}"))?,
            };
            tracing::info!(
                config = name,
                "seeding the current config from {NODE_ANNOTATIONS}"
            );
            // A node provisioned into an image-mode pool runs its pool's layered image.
            let image = map.get(CURRENT_IMAGE_KEY).map(String::as_str);
            Some(embed_image(&mc, image))
        }
        None => match annotated {
            Some(name) if provisioned.as_ref().is_none_or(|p| p.name() != name) => {
                tracing::info!(
                    config = name,
                    "seeding the current config from the node's currentConfig"
                );
                Some(
                    source
                        .fetch(Some(name))
                        .await
                        .with_context(|| format!("getting the node's current config {name}"))?,
                )
            }
            _ => provisioned.inspect(|p| {
                tracing::info!(
                    config = p.name(),
                    "seeding the current config from {PROVISIONED_CONTENT}"
                )
            }),
        },
    };
    let Some(mc) = seed else {
        tracing::warn!(
            "no current config recorded or provisioned: the first update is a first application"
        );
        return Ok(None);
    };
    input::write_current(root, &mc)?;
    if let Some(bytes) = root.read(Path::new(NODE_ANNOTATIONS))? {
        root.write_atomic(
            Path::new(NODE_ANNOTATIONS_BAK),
            &bytes,
            DEFAULT_FILE_MODE,
            Owner::ROOT,
        )?;
        root.remove_file(Path::new(NODE_ANNOTATIONS))?;
        tracing::info!("No bootstrap pivot required; unlinking bootstrap node annotations");
    }
    Ok(Some(mc.name().to_string()))
}

/// Validates the node against its current config (skipped with the force file): Done, or
/// Degraded with every mismatch. Returns whether it matched.
pub async fn validate_current(engine: &Engine) -> Result<bool> {
    let Some(current) = input::read_current(engine.root())? else {
        return Ok(true);
    };
    let name = current.machine_config.name().to_string();
    engine
        .reporter()
        .update_status(engine.root(), |s| s.current = Some(name.clone()));
    if engine.force_file_present()? {
        tracing::info!("Skipping on-disk validation; {} present", FORCE_FILE);
        return Ok(true);
    }
    let v = engine
        .validate_node(&current.machine_config, &current.ignition)
        .await;
    if v.is_ok() {
        tracing::info!(config = name, "Validated on-disk state");
        if let Err(reason) = engine.verify_extensions(&current.machine_config).await {
            engine
                .reporter()
                .state(engine.root(), NodeState::Degraded, &reason)
                .await;
            return Ok(false);
        }
        let image = layered_image(&current.machine_config);
        engine.reporter().done(engine.root(), &name, image).await;
        let resumed = Progress::Resumed {
            config: name,
            applying: false,
        };
        engine.reporter().progress(resumed).await;
        return Ok(true);
    }
    let reason = v.reason();
    engine
        .reporter()
        .event(reason::ON_DISK_STATE_VALIDATION_FAILED, &reason)
        .await;
    engine
        .reporter()
        .state(engine.root(), NodeState::Degraded, &reason)
        .await;
    Ok(false)
}
