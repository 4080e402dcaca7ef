//! The election against an in-memory Lease with the API's semantics (a replace at a stale
//! resourceVersion is refused), on a paused clock: who leads, when, and that a leader cut off
//! from the API stops writing before anyone else may start.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use tokio::sync::watch;
use tokio::time::Instant;

use super::elector::{Elector, Round};
use super::fence::Fence;
use super::lease_api::{LeaseApi, LeaseError};
use super::timings::Timings;
use super::while_leading;

/// The API server's copy of the Lease.
#[derive(Default)]
struct Store {
    lease: Mutex<Option<Lease>>,
    version: AtomicUsize,
}

/// One replica's connection to it, which a test can cut.
struct Connection {
    store: Arc<Store>,
    cut: AtomicBool,
}

impl Connection {
    fn check(&self) -> Result<(), LeaseError> {
        if self.cut.load(Ordering::SeqCst) {
            return Err(LeaseError::Other("connection refused".into()));
        }
        Ok(())
    }

    fn stored(&self, mut lease: Lease) -> Lease {
        let version = self.store.version.fetch_add(1, Ordering::SeqCst) + 1;
        lease.metadata.resource_version = Some(version.to_string());
        *self.store.lease.lock().unwrap() = Some(lease.clone());
        lease
    }
}

#[async_trait]
impl LeaseApi for Connection {
    async fn get(&self) -> Result<Option<Lease>, LeaseError> {
        self.check()?;
        Ok(self.store.lease.lock().unwrap().clone())
    }

    async fn create(&self, spec: LeaseSpec) -> Result<Lease, LeaseError> {
        self.check()?;
        if self.store.lease.lock().unwrap().is_some() {
            return Err(LeaseError::Conflict);
        }
        Ok(self.stored(Lease {
            spec: Some(spec),
            ..Lease::default()
        }))
    }

    async fn replace(&self, mut lease: Lease, spec: LeaseSpec) -> Result<Lease, LeaseError> {
        self.check()?;
        let current = self.store.lease.lock().unwrap().clone();
        let current_version = current.and_then(|l| l.metadata.resource_version);
        if current_version != lease.metadata.resource_version {
            return Err(LeaseError::Conflict);
        }
        lease.spec = Some(spec);
        Ok(self.stored(lease))
    }

    fn describe(&self) -> String {
        "test/leader".into()
    }
}

/// Short timings that pass [`Timings::validate`] (the cluster tier's).
fn timings() -> Timings {
    Timings {
        lease_duration: Duration::from_secs(6),
        renew_deadline: Duration::from_secs(4),
        retry_period: Duration::from_secs(1),
    }
}

struct Replica {
    connection: Arc<Connection>,
    fence: Fence,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

fn replica(store: &Arc<Store>, identity: &str) -> Replica {
    let connection = Arc::new(Connection {
        store: store.clone(),
        cut: AtomicBool::new(false),
    });
    let fence = Fence::new(timings().write_cutoff());
    let elector = Elector::new(connection.clone(), identity, timings(), fence.clone());
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(elector.run(stopped));
    Replica {
        connection,
        fence,
        stop,
        task,
    }
}

fn holder(store: &Store) -> Option<String> {
    store
        .lease
        .lock()
        .unwrap()
        .as_ref()
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.holder_identity.clone())
}

/// How far [`until`] steps the paused clock between two looks at its condition: what it
/// measures is late by up to this much.
const STEP: Duration = Duration::from_millis(10);

/// Steps the paused clock in [`STEP`]s until `condition` holds; the time it took.
async fn until(what: &str, limit: Duration, condition: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(STEP).await;
    }
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn of_replicas_started_at_once_exactly_one_leads_and_keeps_leading() {
    let store = Arc::new(Store::default());
    let replicas: Vec<Replica> = (0..3)
        .map(|i| replica(&store, &format!("companion-{i}")))
        .collect();
    until("a leader", Duration::from_secs(2), || {
        replicas.iter().any(|r| r.fence.is_leading())
    })
    .await;
    // sampled every 100 ms over 60 retry periods: always exactly one, always the same
    let leader = replicas.iter().position(|r| r.fence.is_leading()).unwrap();
    for _ in 0..600 {
        let leading: Vec<usize> = (0..3).filter(|i| replicas[*i].fence.is_leading()).collect();
        assert_eq!(leading, [leader]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(holder(&store), Some(format!("companion-{leader}")));
    let transitions = store.lease.lock().unwrap().as_ref().unwrap().spec.clone();
    assert_eq!(transitions.unwrap().lease_transitions, Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_leader_cut_off_stops_writing_before_another_may_take_over() {
    let store = Arc::new(Store::default());
    let first = replica(&store, "companion-0");
    until("companion-0 leads", Duration::from_secs(2), || {
        first.fence.is_leading()
    })
    .await;
    let second = replica(&store, "companion-1");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!second.fence.is_leading());

    // the leader's last possible write: its fence's deadline plus the write cutoff
    let cut_at = Instant::now();
    first.connection.cut.store(true, Ordering::SeqCst);
    let last_write_ends = first.fence.leading_until().unwrap() + timings().write_cutoff();
    let stepped_down = until("companion-0 steps down", timings().lease_duration, || {
        !first.fence.is_leading()
    })
    .await;
    assert!(stepped_down <= timings().renew_deadline, "{stepped_down:?}");
    until(
        "companion-1 takes over",
        timings().lease_duration + timings().retry_period * 2,
        || second.fence.is_leading(),
    )
    .await;
    let took_over = Instant::now();
    assert!(
        last_write_ends < took_over,
        "companion-0 may write until {:?} after the cut, companion-1 led from {:?}",
        last_write_ends - cut_at,
        took_over - cut_at
    );
    // Within the lease duration of the last renewal companion-1 saw, plus its tries: one to see
    // the leader's last renewal (made before the cut, seen up to a jittered try after it) and
    // one after the lease expired (up to a jittered try late), each at most 1.2 retry periods;
    // and the clock's step in `until`. Counting one try only, from the cut, failed whenever the
    // jitter put both late (client-go's jitter is random).
    let one_try = timings().retry_period.mul_f64(1.2);
    assert!(
        took_over - cut_at <= timings().lease_duration + one_try * 2 + STEP,
        "companion-1 took over {:?} after the cut",
        took_over - cut_at
    );
    assert_eq!(holder(&store).as_deref(), Some("companion-1"));

    // the connection back: companion-0 follows, it does not take the Lease back
    first.connection.cut.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!first.fence.is_leading());
    assert!(second.fence.is_leading());
}

#[tokio::test(start_paused = true)]
async fn a_graceful_stop_releases_the_lease_at_once() {
    let store = Arc::new(Store::default());
    let first = replica(&store, "companion-0");
    until("companion-0 leads", Duration::from_secs(2), || {
        first.fence.is_leading()
    })
    .await;
    let second = replica(&store, "companion-1");
    tokio::time::sleep(Duration::from_secs(2)).await;
    first.stop.send(true).unwrap();
    first.task.await.unwrap();
    assert!(!first.fence.is_leading());
    assert_eq!(holder(&store), None);
    // the other takes it at its next try, not a lease duration later
    let waited = until(
        "companion-1 takes the released Lease",
        timings().lease_duration,
        || second.fence.is_leading(),
    )
    .await;
    assert!(waited <= timings().retry_period.mul_f64(1.2), "{waited:?}");
    second.stop.send(true).unwrap();
    second.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_renewal_conflict_is_a_lost_race_not_leadership() {
    let store = Arc::new(Store::default());
    let connection = Arc::new(Connection {
        store: store.clone(),
        cut: AtomicBool::new(false),
    });
    let fence = Fence::new(timings().write_cutoff());
    let mut elector = Elector::new(connection.clone(), "companion-0", timings(), fence.clone());
    assert_eq!(elector.round().await, Round::Leading);
    // someone else wrote the Lease meanwhile (an admin, or a replica that saw it expire)
    let mut lease = store.lease.lock().unwrap().clone().unwrap();
    lease.spec.as_mut().unwrap().holder_identity = Some("companion-9".into());
    connection.stored(lease);
    assert_eq!(
        elector.round().await,
        Round::Following("companion-9".into())
    );
}

#[tokio::test(start_paused = true)]
async fn the_controllers_run_only_while_leading() {
    let fence = Fence::new(Duration::from_secs(1));
    let (stop, shutdown) = watch::channel(false);
    let terms = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicBool::new(false));
    let (counted, flag) = (terms.clone(), running.clone());
    let supervisor = tokio::spawn(while_leading(
        fence.clone(),
        shutdown,
        Duration::from_secs(5),
        move |mut stopped| {
            counted.fetch_add(1, Ordering::SeqCst);
            let flag = flag.clone();
            async move {
                flag.store(true, Ordering::SeqCst);
                let _ = stopped.wait_for(|s| *s).await;
                flag.store(false, Ordering::SeqCst);
                Ok(())
            }
        },
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!running.load(Ordering::SeqCst));
    fence.extend(Instant::now() + Duration::from_secs(60));
    until("the first term", Duration::from_secs(1), || {
        running.load(Ordering::SeqCst)
    })
    .await;
    fence.revoke();
    until("the first term stops", Duration::from_secs(1), || {
        !running.load(Ordering::SeqCst)
    })
    .await;
    fence.extend(Instant::now() + Duration::from_secs(60));
    until("the second term", Duration::from_secs(1), || {
        running.load(Ordering::SeqCst)
    })
    .await;
    stop.send(true).unwrap();
    supervisor.await.unwrap().unwrap();
    assert!(!running.load(Ordering::SeqCst));
    assert_eq!(terms.load(Ordering::SeqCst), 2);
}
