//! Post-config actions of a rebootless update, in the plan's order, through systemd: `Reload`
//! and `Restart` of a service (waiting for the job), `DaemonReload`, `Special` (reload crio
//! after a registries.conf change), `None` (say no reboot is needed), `Drain` (done before
//! writing). Without a live systemd (`--root`), they are skipped and listed as skipped.

use anyhow::{Context, Result};
use machine_config::Action;
use machine_config::mco::events::reason;
use machine_config::mco::node_conditions::Progress;

use super::report::Reporter;
use crate::host::systemd::Systemd;

/// What the actions did.
#[derive(Debug, Default)]
pub(crate) struct ActionsRun {
    pub run: Vec<String>,
    pub skipped: Vec<String>,
}

fn describe(a: &Action) -> String {
    match a.unit() {
        Some(u) => format!("{} {u}", a.type_name()),
        None => a.type_name().to_string(),
    }
}

/// The unit whose restart falls back to running `update-ca-trust` (as the MCD does).
const CA_TRUST_UNIT: &str = "coreos-update-ca-trust.service";

/// Runs `actions`. `systemd` is `None` when there is no live systemd (alternate root).
pub(crate) async fn run(
    actions: &[Action],
    systemd: Option<&dyn Systemd>,
    reporter: &Reporter,
    config: &str,
) -> Result<ActionsRun> {
    let mut out = ActionsRun::default();
    for action in actions {
        let what = describe(action);
        tracing::info!(
            action = what,
            config,
            "Performing post config change action"
        );
        match action {
            Action::None => {
                reporter
                    .event(reason::SKIP_REBOOT, "Config changes do not require reboot.")
                    .await;
                reporter.progress(Progress::NoRebootRequired).await;
                tracing::info!(config, "Node has Desired Config {config}, skipping reboot");
                continue;
            }
            Action::Drain | Action::Reboot => continue,
            _ => {}
        }
        let Some(systemd) = systemd else {
            tracing::info!(
                action = what,
                "skipped: no live systemd for an alternate root"
            );
            out.skipped
                .push(format!("{what} (no live systemd for an alternate root)"));
            continue;
        };
        match action {
            Action::Reload(unit) => {
                reloaded(reporter, unit, systemd.reload_unit(unit).await).await?;
            }
            // The MCD's `Special` is `systemctl reload crio`: the service is `crio` in its event,
            // condition and error.
            Action::Special => {
                let r = systemd.reload_unit(CRIO_UNIT).await;
                reloaded(reporter, CRIO_SERVICE, r).await?;
            }
            // The MCD reports a daemon-reload as the reload of a service named `daemon-reload`.
            Action::DaemonReload => {
                let r = systemd.daemon_reload().await;
                reloaded(reporter, DAEMON_RELOAD, r).await?;
            }
            Action::Restart(unit) => {
                restarted(reporter, unit, systemd.restart_unit(unit).await).await?
            }
            Action::None | Action::Drain | Action::Reboot => {}
        }
        out.run.push(what);
    }
    Ok(out)
}

/// The unit `Special` reloads, and the name the MCD gives it (`constants.CRIOServiceName`).
const CRIO_UNIT: &str = "crio.service";
const CRIO_SERVICE: &str = "crio";

/// The name the MCD gives a daemon-reload in its messages (`constants.DaemonReloadCommand`).
const DAEMON_RELOAD: &str = "daemon-reload";

/// A reload's outcome as the MCD's `executeReloadServiceNodeDisruptionAction` reports it: on
/// success the post-action condition, then the `ServiceReload` event; on failure the
/// `FailedServiceReload` event and the update's error.
async fn reloaded<E: std::fmt::Display>(
    reporter: &Reporter,
    service: &str,
    result: std::result::Result<(), E>,
) -> Result<()> {
    if let Err(e) = result {
        reporter
            .event(
                reason::FAILED_SERVICE_RELOAD,
                &format!("Reloading service {service} failed. Error: {e}"),
            )
            .await;
        anyhow::bail!(
            "could not apply update: reloading {service} configuration failed. Error: {e}"
        );
    }
    let unit = service.to_string();
    reporter.progress(Progress::ServiceReloaded { unit }).await;
    reporter
        .event(
            reason::SERVICE_RELOAD,
            &format!("Config changes do not require reboot. Service {service} was reloaded."),
        )
        .await;
    Ok(())
}

/// A restart's outcome as the MCD's `performPostConfigChangeNodeDisruptionAction` reports it:
/// a failed restart of the CA-trust unit falls back to running `update-ca-trust` (RHEL nodes
/// have no such unit), and only a failed fallback is a failure; no condition either way.
async fn restarted<E: std::fmt::Display>(
    reporter: &Reporter,
    unit: &str,
    result: std::result::Result<(), E>,
) -> Result<()> {
    let failed = |e: String| async move {
        reporter
            .event(
                reason::FAILED_SERVICE_RESTART,
                &format!("Restarting {unit} service failed. Error: {e}"),
            )
            .await;
    };
    if let Err(e) = result {
        if unit != CA_TRUST_UNIT {
            failed(e.to_string()).await;
            anyhow::bail!("could not apply update: restarting {unit} service failed. Error: {e}");
        }
        tracing::warn!(unit, error = %e, "Error executing {unit} unit, falling back to command");
        if let Err(e) = run_update_ca_trust().await {
            failed(format!("{e:#}")).await;
            return Err(e);
        }
    }
    reporter
        .event(
            reason::SERVICE_RESTART,
            &format!("Config changes do not require reboot. Service {unit} was restarted."),
        )
        .await;
    Ok(())
}

/// Runs `update-ca-trust` with the usual umask 022: the agent's own (`UMask=0077` in its unit)
/// would make the CA bundles it extracts readable by root only, and every other program on the
/// node reads them. (The agent sets every mode it writes explicitly; a child does not.)
async fn run_update_ca_trust() -> Result<()> {
    let out = tokio::process::Command::new("/bin/sh")
        .args(["-c", "umask 022 && exec update-ca-trust"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("running update-ca-trust")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(
        out.status.success(),
        "error running update-ca-trust: {}: {}",
        stderr.trim_end(),
        out.status
    );
    Ok(())
}
