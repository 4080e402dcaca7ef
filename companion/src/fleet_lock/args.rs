//! `serve`'s FleetLock options and the service they make.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::access::{PoolGroups, StandaloneGroups};
use super::file_store::FileStore;
use super::lease_store::LeaseStore;
use super::{FleetLock, LockStore, Slots};
use crate::standalone::Standalone;

/// Where the standalone state file goes unless `--fleet-lock-state` says: systemd's
/// `StateDirectory=` when set, else this directory.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/mco-companion";
pub const STATE_FILE_NAME: &str = "fleet-lock.json";

/// FleetLock (reboot coordination) on the config server's listeners.
#[derive(Debug, Clone, Args)]
pub struct FleetLockArgs {
    /// Do not serve FleetLock (`/v1/pre-reboot`, `/v1/steady-state`).
    #[arg(long, env = "MCO_COMPANION_NO_FLEET_LOCK")]
    pub no_fleet_lock: bool,
    /// Reboot slots per group (nodes of one group that may be rebooting at once).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub fleet_lock_slots: u32,
    /// Slots of one group, `GROUP=N` (repeat for more); other groups get --fleet-lock-slots.
    #[arg(long = "fleet-lock-group-slots", value_parser = parse_group_slots)]
    pub fleet_lock_group_slots: Vec<(String, u32)>,
    /// Standalone: the file the holders are kept in, so that a restart does not forget them.
    /// Default: $STATE_DIRECTORY/fleet-lock.json, or /var/lib/mco-companion/fleet-lock.json
    /// (the directory is created).
    #[arg(long, env = "MCO_COMPANION_FLEET_LOCK_STATE")]
    pub fleet_lock_state: Option<PathBuf>,
    /// Cluster mode: the namespace of the Leases holding the semaphores. Default: the
    /// kubeconfig's namespace (the companion's own).
    #[arg(long)]
    pub fleet_lock_namespace: Option<String>,
}

fn parse_group_slots(s: &str) -> Result<(String, u32), String> {
    let (group, n) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected GROUP=N"))?;
    machine_config::fleetlock::check_group(group).map_err(|e| format!("{s:?}: {e}"))?;
    let n: u32 = n
        .parse()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("{s:?}: N must be a whole number of at least 1"))?;
    Ok((group.to_string(), n))
}

impl FleetLockArgs {
    fn slots(&self) -> Slots {
        Slots {
            default: self.fleet_lock_slots,
            per_group: self.fleet_lock_group_slots.iter().cloned().collect(),
        }
    }

    /// The groups given slots on the command line.
    fn configured_groups(&self) -> std::collections::BTreeSet<String> {
        self.fleet_lock_group_slots
            .iter()
            .map(|(g, _)| g.clone())
            .collect()
    }

    /// Standalone: semaphores in the state file; the groups are `source`'s pools.
    /// `nodes_only`: clients must prove to be nodes (`--client-ca`).
    pub fn standalone(
        &self,
        source: Arc<Standalone>,
        nodes_only: bool,
    ) -> Result<Option<Arc<FleetLock>>> {
        if self.no_fleet_lock {
            return Ok(None);
        }
        let path = match &self.fleet_lock_state {
            Some(p) => p.clone(),
            None => {
                let dir = std::env::var_os("STATE_DIRECTORY")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
                std::fs::create_dir_all(&dir).with_context(|| {
                    format!(
                        "creating {} for the FleetLock state (--fleet-lock-state FILE puts it \
                         elsewhere, --no-fleet-lock turns FleetLock off)",
                        dir.display()
                    )
                })?;
                dir.join(STATE_FILE_NAME)
            }
        };
        let store: Arc<dyn LockStore> = Arc::new(FileStore::open(&path)?);
        let groups = Arc::new(StandaloneGroups {
            source,
            configured: self.configured_groups(),
        });
        Ok(Some(Arc::new(FleetLock::new(
            store,
            self.slots(),
            groups,
            nodes_only,
        ))))
    }

    /// Cluster mode: semaphores in Leases, shared by every replica; the groups are the
    /// MachineConfigPools. `nodes_only`: clients must prove to be nodes (`--client-ca`).
    pub fn cluster(
        &self,
        client: kube::Client,
        nodes_only: bool,
    ) -> Result<Option<Arc<FleetLock>>> {
        if self.no_fleet_lock {
            return Ok(None);
        }
        if self.fleet_lock_state.is_some() {
            bail!("--fleet-lock-state is for standalone mode: in a cluster the holders are Leases");
        }
        let namespace = self
            .fleet_lock_namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let groups = Arc::new(PoolGroups {
            pools: kube::Api::all(client.clone()),
            nodes: kube::Api::all(client.clone()),
            configured: self.configured_groups(),
        });
        let store: Arc<dyn LockStore> = Arc::new(LeaseStore::new(client, &namespace));
        Ok(Some(Arc::new(FleetLock::new(
            store,
            self.slots(),
            groups,
            nodes_only,
        ))))
    }
}
