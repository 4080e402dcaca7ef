//! Leader election among the companion's replicas, on a `coordination.k8s.io/v1` Lease in its
//! namespace: only the leader runs the controllers (render, node, drain); every replica serves.
//!
//! - [`elector`]: the candidacy (acquire, renew, release), as client-go's leader election runs
//!   it, over [`lease_api`] (get, create, replace of the Lease, behind a trait for tests).
//! - [`fence`]: whether this replica may write, and the layer under the controllers' clients
//!   that refuses a write once the leadership ended.
//! - [`timings`]: the lease duration, renew deadline and retry period, and the margins they
//!   leave between the leader's last write and another replica taking over.
//!
//! Why not a crate: the maintained ones (kube-lease-manager, kube-leader-election) decide that a
//! Lease expired by comparing its `renewTime`, written by another replica's wall clock, with the
//! local wall clock; fencing needs each replica to count only on its own monotonic clock from
//! the moment it *observed* a change, as client-go does.

pub mod elector;
pub mod fence;
pub mod lease_api;
pub mod timings;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use tokio::sync::watch;

use elector::Elector;
use fence::Fence;
use lease_api::KubeLease;
use timings::Timings;

/// The Lease's default name.
pub const DEFAULT_LEASE_NAME: &str = "mco-companion-controller";

/// `serve --controller` and `controller`: leader election options.
#[derive(Debug, Clone, Args)]
pub struct LeaderArgs {
    /// Run the controllers without leader election (a single replica only: two replicas
    /// without it would both act).
    #[arg(long)]
    pub no_leader_elect: bool,
    /// How long the other replicas wait, after they last saw the Lease renewed, before they
    /// take it (whole seconds). OpenShift's value for controllers.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "137s")]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps acting after its last successful renewal.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "107s")]
    pub leader_elect_renew_deadline: Duration,
    /// Time between tries to acquire or renew the Lease.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "26s")]
    pub leader_elect_retry_period: Duration,
    /// The Lease's name.
    #[arg(long, default_value = DEFAULT_LEASE_NAME)]
    pub leader_elect_lease_name: String,
    /// The Lease's namespace. Default: the pod's (POD_NAMESPACE), else the kubeconfig's.
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_elect_namespace: Option<String>,
    /// This replica's name in the Lease. Default: the pod's name (POD_NAME, from the downward
    /// API), else the host name with a random suffix (two processes on one host never share).
    #[arg(long, env = "POD_NAME")]
    pub leader_elect_identity: Option<String>,
}

impl LeaderArgs {
    /// The timings, checked.
    pub fn timings(&self) -> Result<Timings> {
        let timings = Timings {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        };
        if let Err(why) = timings.validate() {
            bail!("leader election: {why}");
        }
        Ok(timings)
    }

    /// This replica's identity.
    pub fn identity(&self) -> String {
        if let Some(id) = self
            .leader_elect_identity
            .as_ref()
            .filter(|i| !i.is_empty())
        {
            return id.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "mco-companion".to_string());
        format!("{host}_{:016x}", rand::random::<u64>())
    }
}

/// A started election: its fence, for the controllers' clients, and the candidacy, to run.
pub struct Election {
    pub fence: Fence,
    pub elector: Elector,
    pub timings: Timings,
}

impl Election {
    /// A candidacy for the Lease in `args`' namespace (or `client`'s).
    pub fn new(args: &LeaderArgs, client: kube::Client) -> Result<Self> {
        let timings = args.timings()?;
        let namespace = args
            .leader_elect_namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| client.default_namespace().to_string());
        let identity = args.identity();
        let api = Arc::new(KubeLease::new(
            client,
            &namespace,
            &args.leader_elect_lease_name,
        ));
        let fence = Fence::new(timings.write_cutoff());
        tracing::info!(
            lease = %format!("{namespace}/{}", args.leader_elect_lease_name),
            %identity,
            "leader election: lease {:?}, renew deadline {:?}, retry period {:?}",
            timings.lease_duration,
            timings.renew_deadline,
            timings.retry_period
        );
        let elector = Elector::new(api, &identity, timings, fence.clone());
        Ok(Election {
            fence,
            elector,
            timings,
        })
    }
}

/// Runs `term` for each leadership: started when this replica becomes the leader, told to stop
/// (its receiver turns true) when the leadership ends or `shutdown` fires, and abandoned if it
/// has not stopped `grace` later (its writes are fenced off by then anyway). Returns when
/// `shutdown` fires, or with `term`'s error if a term fails while leading.
pub async fn while_leading<F, Fut>(
    fence: Fence,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
    mut term: F,
) -> Result<()>
where
    F: FnMut(watch::Receiver<bool>) -> Fut,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    let mut leadership = fence.subscribe();
    loop {
        tokio::select! {
            led = leadership.wait_for(|until| until.is_some()) => {
                if led.is_err() {
                    return Ok(());
                }
            }
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        }
        if *shutdown.borrow() {
            return Ok(());
        }
        let (stop, stopped) = watch::channel(false);
        let mut running = tokio::spawn(term(stopped));
        let ended = tokio::select! {
            ended = &mut running => Some(ended),
            _ = leadership.wait_for(|until| until.is_none()) => None,
            _ = shutdown.wait_for(|stop| *stop) => None,
        };
        match ended {
            Some(Ok(Ok(()))) => {
                // a term that ends on its own while leading: wait for the next leadership
                // (it stopped because shutdown fired, or will be started again)
                if fence.is_leading() && !*shutdown.borrow() {
                    bail!("the controllers stopped while this replica leads");
                }
            }
            Some(Ok(Err(err))) => return Err(err),
            Some(Err(panic)) => bail!("the controllers panicked: {panic}"),
            None => {
                let _ = stop.send(true);
                if tokio::time::timeout(grace, &mut running).await.is_err() {
                    tracing::warn!("the controllers did not stop within {grace:?}; abandoned");
                    running.abort();
                }
                tracing::info!("controllers stopped (no longer the leader)");
            }
        }
    }
}

#[cfg(test)]
mod tests;
