//! `start`'s update strategy options (flattened into [`super::start::Args`]) and the
//! [`Strategy`] they make.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Exit, exit};
use machine_config::fleetlock::DEFAULT_GROUP;

use crate::strategy::fleet_lock::FleetLockClient;
use crate::strategy::window::{Schedule, Window};
use crate::strategy::{DEFAULT_LOCK_RETRY, Kind, Strategy, SystemClock};

/// The update strategy.
#[derive(Debug, Clone, clap::Args)]
pub struct StrategyArgs {
    /// When an update may drain and reboot the node: `immediate` (at once), `periodic` (inside
    /// the `--window`s), `fleet_lock` (holding a reboot slot from a FleetLock server).
    #[arg(
        long,
        env = "MCO_AGENT_STRATEGY",
        value_enum,
        default_value = "immediate"
    )]
    pub strategy: StrategyName,
    /// `periodic`: a weekly maintenance window, `DAYS HH:MM LENGTH` (`Sat,Sun 22:00 3h`); repeat
    /// for more. In a fragment: `window = ["Sat 22:00 3h"]`, or Zincati's tables
    /// `[[window]] days = ["Sat"], start_time = "22:00", length_minutes = 180`.
    #[arg(
        long = "window",
        env = "MCO_AGENT_WINDOW",
        value_delimiter = ';',
        value_parser = parse_window,
        action = clap::ArgAction::Append
    )]
    pub windows: Vec<Window>,
    /// `periodic`: the windows' time zone: `UTC`, `localtime` (/etc/localtime) or an IANA name
    /// (`Europe/Berlin`); wall-clock times are obeyed across DST changes.
    #[arg(long, env = "MCO_AGENT_TIME_ZONE", default_value = "UTC", value_parser = parse_time_zone)]
    pub time_zone: String,
    /// `periodic`: updates that neither drain nor reboot may run outside the windows.
    #[arg(long, env = "MCO_AGENT_REBOOTLESS_OUTSIDE_WINDOWS")]
    pub rebootless_outside_windows: bool,
    /// `fleet_lock`: the FleetLock server's base URL (`/v1/pre-reboot` and `/v1/steady-state`
    /// are under it). Default: the config server (mco-companion serves FleetLock there), with
    /// its CA and the node's client certificate.
    #[arg(long, env = "MCO_AGENT_FLEET_LOCK_URL")]
    pub fleet_lock_url: Option<String>,
    /// `fleet_lock`: the reboot group (`^[a-zA-Z0-9.-]+$`). Default: the node's pool when the
    /// agent knows it (`--pool`, or asked of the config server for), else `default`.
    #[arg(long, env = "MCO_AGENT_FLEET_LOCK_GROUP")]
    pub fleet_lock_group: Option<String>,
    /// `fleet_lock`: this node's client id, the owner of its slot. Default: the node name.
    #[arg(long, env = "MCO_AGENT_FLEET_LOCK_ID")]
    pub fleet_lock_id: Option<String>,
    /// `fleet_lock`: how long before a refused slot is asked for again.
    #[arg(
        long,
        hide = true,
        env = "MCO_AGENT_FLEET_LOCK_RETRY",
        value_parser = humantime::parse_duration,
        default_value = "60s"
    )]
    pub fleet_lock_retry: Duration,
}

/// `--strategy`, with Zincati's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyName {
    #[value(name = "immediate")]
    Immediate,
    #[value(name = "periodic")]
    Periodic,
    #[value(name = "fleet_lock")]
    FleetLock,
}

fn parse_window(s: &str) -> Result<Window, String> {
    s.parse()
}

/// A time zone the windows can be read in (checked where it is given: the command line, the
/// environment or a fragment's line).
fn parse_time_zone(s: &str) -> Result<String, String> {
    crate::strategy::window::time_zone(s).map(|_| s.to_string())
}

/// What else a strategy needs from `start`: the connection to the config server, the node.
pub struct StrategyContext<'a> {
    pub config_server: Option<&'a str>,
    pub ca: Option<&'a Path>,
    pub client_cert: Option<&'a Path>,
    pub insecure_http: bool,
    pub node: &'a str,
    pub pool: Option<&'a str>,
}

impl StrategyArgs {
    /// Refuses a setting that belongs to another strategy, or one missing, naming it; part of
    /// [`super::start::Args::check`], so `config show` refuses what `start` refuses.
    /// `config_server`: the `--config-server` (a FleetLock server's default).
    pub fn check(&self, config_server: Option<&str>) -> Result<()> {
        self.schedule(config_server).map(drop)
    }

    /// [`Self::check`], and the periodic strategy's schedule.
    fn schedule(&self, config_server: Option<&str>) -> Result<Option<Schedule>> {
        let periodic_only =
            !self.windows.is_empty() || self.time_zone != "UTC" || self.rebootless_outside_windows;
        let lock_only = self.fleet_lock_url.is_some()
            || self.fleet_lock_group.is_some()
            || self.fleet_lock_id.is_some();
        if periodic_only && self.strategy != StrategyName::Periodic {
            return Err(exit::error(
                Exit::Usage,
                "--window, --time-zone and --rebootless-outside-windows are for --strategy periodic",
            ));
        }
        if lock_only && self.strategy != StrategyName::FleetLock {
            return Err(exit::error(
                Exit::Usage,
                "--fleet-lock-url, --fleet-lock-group and --fleet-lock-id are for --strategy fleet_lock",
            ));
        }
        match self.strategy {
            StrategyName::Immediate => Ok(None),
            StrategyName::Periodic => Schedule::new(self.windows.clone(), &self.time_zone)
                .map(Some)
                .map_err(|e| {
                    exit::error(
                        Exit::InvalidInput,
                        format!("--strategy periodic: {e} (--window, --time-zone)"),
                    )
                }),
            StrategyName::FleetLock if self.fleet_lock_url.is_none() && config_server.is_none() => {
                Err(exit::error(
                    Exit::Usage,
                    "--strategy fleet_lock needs --fleet-lock-url (or a --config-server, \
                     where mco-companion serves FleetLock)",
                ))
            }
            StrategyName::FleetLock => Ok(None),
        }
    }

    /// The strategy; a setting that belongs to another strategy, or one missing, is an error
    /// naming it ([`Self::check`]).
    pub fn build(&self, ctx: &StrategyContext<'_>) -> Result<Strategy> {
        let schedule = self.schedule(ctx.config_server)?;
        let kind = match (self.strategy, schedule) {
            (StrategyName::Immediate, _) => Kind::Immediate,
            (StrategyName::Periodic, schedule) => Kind::Periodic {
                schedule: schedule.context("the periodic strategy's schedule")?,
                rebootless_anytime: self.rebootless_outside_windows,
            },
            (StrategyName::FleetLock, _) => {
                let Some(url) = self.fleet_lock_url.as_deref().or(ctx.config_server) else {
                    // refused by `schedule` above
                    anyhow::bail!("--strategy fleet_lock needs --fleet-lock-url");
                };
                let group = self
                    .fleet_lock_group
                    .as_deref()
                    .or(ctx.pool)
                    .unwrap_or(DEFAULT_GROUP);
                let id = self.fleet_lock_id.as_deref().unwrap_or(ctx.node);
                Kind::FleetLock {
                    client: FleetLockClient::new(
                        url,
                        ctx.ca,
                        ctx.client_cert,
                        ctx.insecure_http,
                        id,
                        group,
                    )?,
                    retry: if self.fleet_lock_retry.is_zero() {
                        DEFAULT_LOCK_RETRY
                    } else {
                        self.fleet_lock_retry
                    },
                }
            }
        };
        let strategy = Strategy::new(kind, Arc::new(SystemClock));
        let status = strategy.status();
        tracing::info!(
            strategy = status.name,
            detail = status.detail,
            window = status.window,
            "update strategy"
        );
        Ok(strategy)
    }
}
