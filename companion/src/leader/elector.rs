//! The election, as client-go's leader election runs it on a Lease: every retry period each
//! replica reads the Lease; the holder renews it, the others take it once it has gone
//! `leaseDurationSeconds` without a change *they observed* (so no clocks are compared), and
//! every write is a replace at the resourceVersion read, so that of two replicas taking it at
//! once the API server refuses one.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::sync::watch;
use tokio::time::Instant;

use super::fence::Fence;
use super::lease_api::{LeaseApi, LeaseError};
use super::timings::Timings;

/// What one round found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Round {
    /// Acquired or renewed.
    Leading,
    /// Someone else holds a Lease that has not expired (as far as this replica observed), or
    /// won the race to it.
    Following(String),
    /// The API failed; the round changed nothing.
    Failed(String),
}

/// The last version of the Lease this replica saw, and when it saw it (its own clock).
struct Observed {
    resource_version: String,
    holder: Option<String>,
    lease_duration: Duration,
    at: Instant,
}

/// One replica's candidacy.
pub struct Elector {
    api: Arc<dyn LeaseApi>,
    identity: String,
    timings: Timings,
    fence: Fence,
    observed: Option<Observed>,
}

impl Elector {
    /// A candidate named `identity` for the Lease behind `api`; leads through `fence`.
    pub fn new(api: Arc<dyn LeaseApi>, identity: &str, timings: Timings, fence: Fence) -> Self {
        Elector {
            api,
            identity: identity.to_string(),
            timings,
            fence,
            observed: None,
        }
    }

    /// One try to acquire or renew.
    pub async fn round(&mut self) -> Round {
        let lease = match self.api.get().await {
            Ok(lease) => lease,
            Err(err) => return Round::Failed(err.to_string()),
        };
        let Some(lease) = lease else {
            let sent = Instant::now();
            return match self.api.create(self.taken(&LeaseSpec::default())).await {
                Ok(lease) => self.won(sent, &lease),
                Err(LeaseError::Conflict) => Round::Following("another replica".into()),
                Err(err) => Round::Failed(err.to_string()),
            };
        };
        self.observe(&lease);
        let spec = lease.spec.clone().unwrap_or_default();
        if let Some(observed) = &self.observed
            && let Some(holder) = &observed.holder
            && *holder != self.identity
            && Instant::now() < observed.at + observed.lease_duration
        {
            return Round::Following(holder.clone());
        }
        let sent = Instant::now();
        match self.api.replace(lease, self.taken(&spec)).await {
            Ok(lease) => self.won(sent, &lease),
            Err(LeaseError::Conflict) => {
                Round::Following(holder_of(&spec).unwrap_or_else(|| "another replica".into()))
            }
            Err(err) => Round::Failed(err.to_string()),
        }
    }

    /// Remembers the Lease's version when it is new to this replica: the time it was first
    /// seen is what its expiry counts from.
    fn observe(&mut self, lease: &Lease) {
        let resource_version = lease.metadata.resource_version.clone().unwrap_or_default();
        if self
            .observed
            .as_ref()
            .is_some_and(|o| o.resource_version == resource_version)
        {
            return;
        }
        let spec = lease.spec.as_ref();
        let declared = spec
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .filter(|s| *s > 0);
        self.observed = Some(Observed {
            resource_version,
            holder: spec.and_then(holder_of),
            // a holder that declared no duration gets this replica's own
            lease_duration: declared
                .map(Duration::from_secs)
                .unwrap_or(self.timings.lease_duration),
            at: Instant::now(),
        });
    }

    /// The write succeeded: leading until the renew deadline, counted from before it was sent.
    fn won(&mut self, sent: Instant, lease: &Lease) -> Round {
        self.fence.extend(sent + self.timings.renew_deadline);
        self.observe(lease);
        Round::Leading
    }

    /// The spec that takes (or keeps) the Lease for this replica.
    fn taken(&self, before: &LeaseSpec) -> LeaseSpec {
        let now = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        let ours = holder_of(before).as_deref() == Some(self.identity.as_str());
        let transitions = before.lease_transitions.unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.timings.lease_duration_seconds()),
            acquire_time: if ours {
                before.acquire_time.clone()
            } else {
                now.clone()
            },
            renew_time: now,
            lease_transitions: Some(if ours { transitions } else { transitions + 1 }),
            ..LeaseSpec::default()
        }
    }

    /// Campaigns (and, while leading, renews) until `shutdown`, then releases the Lease.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let lease = self.api.describe();
        let mut last = None;
        let mut leading = false;
        loop {
            let limit = match self.fence.leading_until() {
                Some(until) => until.min(Instant::now() + self.timings.retry_period),
                None => Instant::now() + self.timings.retry_period,
            };
            let round = tokio::select! {
                round = tokio::time::timeout_at(limit, self.round()) => round.unwrap_or_else(
                    |_| Round::Failed("the API server did not answer in time".into())
                ),
                _ = shutdown.wait_for(|stop| *stop) => break,
            };
            if matches!(round, Round::Following(_)) {
                // someone else holds it: whatever this replica believed, it stops at once
                self.fence.revoke();
            }
            let now_leading = self.fence.is_leading();
            match &round {
                Round::Leading if !leading => {
                    tracing::info!(%lease, identity = %self.identity, "became the leader");
                }
                Round::Following(holder) if last.as_ref() != Some(&round) => {
                    tracing::info!(%lease, %holder, "following the leader");
                }
                Round::Failed(err) => tracing::warn!(%lease, "leader election: {err}"),
                _ => {}
            }
            if leading && !now_leading {
                self.lost(&lease, Some(&round));
            }
            leading = now_leading;
            last = Some(round);
            let next = match self.fence.leading_until() {
                Some(until) => until.min(Instant::now() + self.timings.retry_period),
                None => Instant::now() + jittered(self.timings.retry_period),
            };
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
            if leading && !self.fence.is_leading() {
                leading = false;
                self.lost(&lease, last.as_ref());
            }
        }
        self.release().await;
    }

    fn lost(&self, lease: &str, last: Option<&Round>) {
        self.fence.revoke();
        let why = match last {
            Some(Round::Failed(err)) => format!("the last try failed: {err}"),
            Some(Round::Following(holder)) => format!("{holder} holds it"),
            _ => "no renewal succeeded in time".to_string(),
        };
        tracing::warn!(
            %lease,
            "lost the leadership ({why}): stopped writing {:?} after the last renewal",
            self.timings.renew_deadline
        );
    }

    /// Stops leading at once and, once this replica's last writes ended, hands the Lease back
    /// (holder cleared, so that another replica takes it at its next try instead of waiting
    /// for it to expire).
    pub async fn release(&mut self) {
        self.fence.revoke();
        if tokio::time::timeout(self.timings.write_cutoff(), self.fence.writes_done())
            .await
            .is_err()
        {
            tracing::warn!("writes still in flight at release; they were abandoned");
        }
        let lease = self.api.describe();
        let release = async {
            let Some(found) = self.api.get().await? else {
                return Ok(false);
            };
            let spec = found.spec.clone().unwrap_or_default();
            if holder_of(&spec).as_deref() != Some(self.identity.as_str()) {
                return Ok(false);
            }
            let released = LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(1),
                acquire_time: None,
                renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
                lease_transitions: spec.lease_transitions,
                ..LeaseSpec::default()
            };
            self.api.replace(found, released).await.map(|_| true)
        };
        match tokio::time::timeout(self.timings.retry_period, release).await {
            Ok(Ok(true)) => tracing::info!(%lease, "released the leader Lease"),
            Ok(Ok(false)) => {}
            Ok(Err(err)) => tracing::warn!(%lease, "could not release the leader Lease: {err}"),
            Err(_) => tracing::warn!(%lease, "could not release the leader Lease in time"),
        }
    }
}

fn holder_of(spec: &LeaseSpec) -> Option<String> {
    spec.holder_identity.clone().filter(|h| !h.is_empty())
}

/// client-go's jitter: up to 1.2 retry periods, so that candidates spread their tries.
fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + 0.2 * rand::random::<f64>())
}
