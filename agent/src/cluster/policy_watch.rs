//! `MachineConfiguration/cluster`, followed: the latest object a watch delivered
//! ([`PolicyWatch`]), and the MCD's wait, before it plans an update, for the node disruption
//! policy status computed from the object's current spec (`status.observedGeneration ==
//! metadata.generation`): a look every 5 s for up to 2 minutes, then the MCD's error
//! ([`PolicyNotReady`]).

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use machine_config::MachineConfiguration;
use machine_config::machineconfiguration::CLUSTER_NAME;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// What is known of `MachineConfiguration/cluster`.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// The watch has not answered yet.
    Unknown,
    /// It does not exist.
    Absent,
    Present(Box<MachineConfiguration>),
}

/// Why the cluster's policies cannot be used (the MCD's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyNotReady {
    #[error(
        "NodeDisruptionPolicyStatus was not ready: MachineConfiguration/cluster has not been created yet"
    )]
    NotCreated,
    #[error(
        "NodeDisruptionPolicyStatus was not ready: NodeDisruptionPolicyStatus is not up to date"
    )]
    NotUpToDate,
}

/// The MCD's pacing of the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyWait {
    /// Between looks (the MCD's 5 s).
    pub poll: Duration,
    /// Gives up after this long (the MCD's 2 minutes).
    pub timeout: Duration,
}

impl Default for PolicyWait {
    fn default() -> Self {
        Self {
            poll: Duration::from_secs(5),
            timeout: Duration::from_secs(120),
        }
    }
}

/// The latest `MachineConfiguration/cluster`, kept by a task fed by a watch.
pub struct PolicyWatch {
    latest: watch::Receiver<Observed>,
    task: JoinHandle<()>,
}

impl Drop for PolicyWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PolicyWatch {
    /// Follows `objects` (from [`super::NodeApi::machine_configuration`]) in a task; logs
    /// every change of generation or status.
    pub fn spawn(mut objects: BoxStream<'static, Option<MachineConfiguration>>) -> Self {
        let (tx, latest) = watch::channel(Observed::Unknown);
        let task = tokio::spawn(async move {
            while let Some(object) = objects.next().await {
                let observed = match object {
                    Some(mc) => {
                        info!(
                            generation = mc.generation(),
                            observed_generation = mc.status.observed_generation,
                            "MachineConfiguration/{CLUSTER_NAME} changed"
                        );
                        Observed::Present(Box::new(mc))
                    }
                    None => {
                        info!("MachineConfiguration/{CLUSTER_NAME} does not exist");
                        Observed::Absent
                    }
                };
                tx.send_replace(observed);
            }
        });
        PolicyWatch { latest, task }
    }

    /// What is known now.
    pub fn observed(&self) -> Observed {
        self.latest.borrow().clone()
    }

    /// The object once its policy status is current, waiting as the MCD does (a look every
    /// `wait.poll`, a change delivered by the watch looked at at once) up to `wait.timeout`.
    pub async fn ready(&self, wait: PolicyWait) -> Result<MachineConfiguration, PolicyNotReady> {
        let mut latest = self.latest.clone();
        let mut last = PolicyNotReady::NotCreated;
        let waiting = async {
            loop {
                match check(&latest.borrow_and_update()) {
                    Ok(mc) => return mc,
                    Err(why) => last = why,
                }
                warn!("calculating NodeDisruptionPolicies: {}", detail(&last));
                tokio::select! {
                    _ = latest.changed() => {}
                    _ = tokio::time::sleep(wait.poll) => {}
                }
            }
        };
        match tokio::time::timeout(wait.timeout, waiting).await {
            Ok(mc) => Ok(mc),
            Err(_) => {
                let err = check(&self.latest.borrow()).err().unwrap_or(last);
                warn!("{err}");
                Err(err)
            }
        }
    }
}

/// The object when its status is current, else why not.
fn check(observed: &Observed) -> Result<MachineConfiguration, PolicyNotReady> {
    match observed {
        Observed::Present(mc) if mc.policy_status_current() => Ok((**mc).clone()),
        Observed::Present(_) => Err(PolicyNotReady::NotUpToDate),
        Observed::Unknown | Observed::Absent => Err(PolicyNotReady::NotCreated),
    }
}

/// The MCD's log line for a look that found the status not ready.
fn detail(why: &PolicyNotReady) -> &'static str {
    match why {
        PolicyNotReady::NotCreated => "MachineConfiguration/cluster has not been created yet",
        PolicyNotReady::NotUpToDate => "NodeDisruptionPolicyStatus is not up to date",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{FakeNodeApi, NodeApi};

    fn object(generation: i64, observed: i64) -> MachineConfiguration {
        let mut mc = MachineConfiguration::from_slice(
            b"apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\n",
        )
        .unwrap();
        mc.metadata.generation = Some(generation);
        mc.status = mc.computed_policy_status();
        mc.status.observed_generation = observed;
        mc
    }

    fn quick() -> PolicyWait {
        PolicyWait {
            poll: Duration::from_secs(5),
            timeout: Duration::from_secs(120),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn waits_for_the_status_of_the_current_generation() {
        let api = FakeNodeApi::new("n1");
        api.set_machine_configuration(Some(object(2, 1)));
        let watch = PolicyWatch::spawn(api.machine_configuration());
        let started = tokio::time::Instant::now();
        let waiter = tokio::spawn({
            let wait = quick();
            async move { (watch.ready(wait).await, watch) }
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!waiter.is_finished());
        api.set_machine_configuration(Some(object(2, 2)));
        let (ready, watch) = waiter.await.unwrap();
        assert_eq!(ready.unwrap().generation(), 2);
        // The watch delivered it at once: no need to wait for the next look.
        assert!(started.elapsed() < Duration::from_secs(31));
        assert!(matches!(watch.observed(), Observed::Present(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_two_minutes_with_the_mcd_message() {
        let api = FakeNodeApi::new("n1");
        let watch = PolicyWatch::spawn(api.machine_configuration());
        let started = tokio::time::Instant::now();
        let err = watch.ready(quick()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "NodeDisruptionPolicyStatus was not ready: MachineConfiguration/cluster has not been created yet"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(120));

        api.set_machine_configuration(Some(object(3, 2)));
        let err = watch.ready(quick()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "NodeDisruptionPolicyStatus was not ready: NodeDisruptionPolicyStatus is not up to date"
        );
        api.set_machine_configuration(None);
        tokio::task::yield_now().await;
        assert_eq!(watch.observed(), Observed::Absent);
    }
}
