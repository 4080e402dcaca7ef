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
                let r = systemd.reload_unit(unit).await;
                service_event(reporter, &RELOAD, unit, &r).await;
                r.with_context(|| format!("reloading {unit}"))?;
                let unit = unit.clone();
                reporter.progress(Progress::ServiceReloaded { unit }).await;
            }
            Action::Restart(unit) => {
                let r = systemd.restart_unit(unit).await;
                service_event(reporter, &RESTART, unit, &r).await;
                if let Err(e) = r {
                    if unit != CA_TRUST_UNIT {
                        return Err(e).with_context(|| format!("restarting {unit}"));
                    }
                    tracing::warn!(unit, error = %e, "restart failed; running update-ca-trust instead");
                    run_update_ca_trust().await?;
                }
            }
            Action::DaemonReload => systemd
                .daemon_reload()
                .await
                .context("systemd daemon-reload")?,
            Action::Special => {
                let r = systemd.reload_unit("crio.service").await;
                service_event(reporter, &RELOAD, "crio.service", &r).await;
                r.context("reloading crio.service after a registries.conf change")?;
                reporter.progress(Progress::CrioReloaded).await;
            }
            Action::None | Action::Drain | Action::Reboot => {}
        }
        out.run.push(what);
    }
    Ok(out)
}

/// The events of a reload or a restart, as the MCD words them.
struct ServiceEvents {
    past: &'static str,
    succeeded: &'static str,
    failed: &'static str,
    failure: fn(&str, &str) -> String,
}

const RELOAD: ServiceEvents = ServiceEvents {
    past: "reloaded",
    succeeded: reason::SERVICE_RELOAD,
    failed: reason::FAILED_SERVICE_RELOAD,
    failure: |unit, e| format!("Reloading service {unit} failed. Error: {e}"),
};

const RESTART: ServiceEvents = ServiceEvents {
    past: "restarted",
    succeeded: reason::SERVICE_RESTART,
    failed: reason::FAILED_SERVICE_RESTART,
    failure: |unit, e| format!("Restarting {unit} service failed. Error: {e}"),
};

async fn service_event<E: std::fmt::Display>(
    reporter: &Reporter,
    events: &ServiceEvents,
    unit: &str,
    result: &std::result::Result<(), E>,
) {
    match result {
        Ok(()) => {
            reporter
                .event(
                    events.succeeded,
                    &format!(
                        "Config changes do not require reboot. Service {unit} was {}.",
                        events.past
                    ),
                )
                .await
        }
        Err(e) => {
            reporter
                .event(events.failed, &(events.failure)(unit, &e.to_string()))
                .await
        }
    }
}

/// Runs `update-ca-trust` with the usual umask 022: the agent's own (`UMask=0077` in its unit)
/// would make the CA bundles it extracts readable by root only, and every other program on the
/// node reads them. (The agent sets every mode it writes explicitly; a child does not.)
async fn run_update_ca_trust() -> Result<()> {
    let status = tokio::process::Command::new("/bin/sh")
        .args(["-c", "umask 022 && exec update-ca-trust"])
        .status()
        .await
        .context("running update-ca-trust")?;
    anyhow::ensure!(status.success(), "update-ca-trust failed: {status}");
    Ok(())
}
