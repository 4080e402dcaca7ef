//! The drain controller (the MCO's, inside its machine-config-controller): the controller side
//! of the `desiredDrain`/`lastAppliedDrain` handshake, for agents started with
//! `--drain-mode controller`. For a node whose `desiredDrain` differs from its
//! `lastAppliedDrain` it cordons and drains (`drain-<config>`: one try of 90 s through the
//! Eviction API, so PodDisruptionBudgets hold) or uncordons (`uncordon-<config>`), and writes
//! `lastAppliedDrain` only after success. Failed drains are retried forever on the MCO's
//! schedule ([`schedule`]); a node uncordoned by someone else during its drain is cordoned
//! again and `lastAppliedDrain` is not written for a node that is schedulable when the drain
//! ends. A failed try's message (the pods left and their budgets) goes into the node's
//! `reason` while its agent waits. Drain start times live in memory, as the MCO's do (a restart starts them over).

pub mod schedule;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use machine_config::mco::annotations::{DESIRED_DRAIN, LAST_APPLIED_DRAIN, REASON};
use mco_kube::annotations::truncate_reason;
use mco_kube::{DrainOptions, Drainer, RetryPolicy};
use serde_json::json;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::node_cache::{self, NodeCache};
use schedule::{DrainTimings, Request};

/// The component events are recorded as (the MCO's drain controller's).
const EVENT_COMPONENT: &str = "machineconfigcontroller-draincontroller";
/// Events about cluster-scoped objects go to `default`, as client-go records them.
const EVENT_NAMESPACE: &str = "default";

/// Runs the drain controller until `shutdown` turns true.
pub async fn run(
    client: Client,
    timings: DrainTimings,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    // Nodes from a watch-fed cache, overlaid with this controller's own lastAppliedDrain
    // writes until the watch shows them (super::node_cache), rather than a list per Node event.
    let (cache, changes) = node_cache::watch(nodes.clone());
    let wake = Arc::new(Notify::new());
    let pump = tokio::spawn({
        let wake = wake.clone();
        let mut changes = changes.boxed();
        async move {
            while changes.next().await.is_some() {
                wake.notify_one();
            }
        }
    });
    tokio::select! {
        ready = cache.wait_until_ready() => ready.context("drain controller")?,
        _ = shutdown.changed() => {
            pump.abort();
            return Ok(());
        }
    }
    let worker = Arc::new(Worker {
        client,
        nodes: nodes.clone(),
        cache,
        timings,
        ongoing: Mutex::new(HashMap::new()),
    });
    // When each node may be looked at again (a failed drain's requeue), and what it asked for
    // then: a new request or a change of `spec.unschedulable` looks at it at once.
    let mut not_before: BTreeMap<String, (Instant, Seen)> = BTreeMap::new();
    let mut busy: HashSet<String> = HashSet::new();
    let mut running: JoinSet<(String, Option<Duration>)> = JoinSet::new();
    tracing::info!("drain controller started");
    loop {
        match worker.cache.nodes().await {
            Ok(list) => {
                let now = Instant::now();
                for node in list {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    let seen = Seen::of(&node);
                    if let Some((at, then)) = not_before.get(&name)
                        && *then == seen
                        && *at > now
                    {
                        continue;
                    }
                    not_before.remove(&name);
                    if busy.contains(&name) || !seen.wants_work() {
                        continue;
                    }
                    busy.insert(name.clone());
                    let worker = worker.clone();
                    running.spawn(async move {
                        let retry = worker.reconcile(&node).await;
                        (name, retry)
                    });
                }
            }
            Err(err) => tracing::warn!("drain controller: {err:#}"),
        }
        let next_due = not_before.values().map(|(at, _)| *at).min();
        let sleep_until = next_due.unwrap_or_else(|| Instant::now() + Duration::from_secs(30));
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep_until(sleep_until) => {}
            Some(done) = running.join_next(), if !running.is_empty() => {
                if let Ok((name, retry)) = done {
                    busy.remove(&name);
                    if let Some(after) = retry {
                        let seen = nodes.get_opt(&name).await.ok().flatten().map(|n| Seen::of(&n));
                        if let Some(seen) = seen {
                            not_before.insert(name, (Instant::now() + after, seen));
                        }
                    }
                }
            }
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
    }
    running.abort_all();
    pump.abort();
    Ok(())
}

/// What of a node decides whether a requeue delay still holds.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    desired: Option<String>,
    last_applied: Option<String>,
    unschedulable: bool,
}

impl Seen {
    fn of(node: &Node) -> Self {
        let annotation = |key: &str| {
            node.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .cloned()
        };
        Seen {
            desired: annotation(DESIRED_DRAIN),
            last_applied: annotation(LAST_APPLIED_DRAIN),
            unschedulable: unschedulable(node),
        }
    }

    fn wants_work(&self) -> bool {
        self.desired.as_deref().unwrap_or_default()
            != self.last_applied.as_deref().unwrap_or_default()
    }
}

fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// How one look at a node's request ended.
enum Step {
    /// Done: write `lastAppliedDrain`.
    Complete,
    /// Look again after this long (a failed drain on the MCO's schedule, or a node uncordoned
    /// during its drain).
    Again(Duration),
    /// An error: logged, looked at again after the requeue delay.
    Failed(String),
}

struct Worker {
    client: Client,
    nodes: Api<Node>,
    cache: NodeCache,
    timings: DrainTimings,
    /// When this controller cordoned each node whose drain is not finished.
    ongoing: Mutex<HashMap<String, Instant>>,
}

impl Worker {
    fn drainer(&self, node: &str) -> Drainer {
        let t = &self.timings;
        let options = DrainOptions {
            // One try per reconcile: the retries are the controller's requeues.
            attempt_timeout: t.attempt,
            overall_timeout: t.attempt,
            eviction_retry: t.eviction_retry,
            attempt_pause: t.poll,
            poll_interval: t.poll,
        };
        // No single API call may outlast the try.
        let defaults = RetryPolicy::default();
        let retry = RetryPolicy {
            attempt_timeout: defaults.attempt_timeout.min(t.attempt),
            ..defaults
        };
        Drainer::new(
            node,
            self.client.clone(),
            self.client.clone(),
            options,
            retry,
        )
    }

    fn ongoing_for(&self, node: &str) -> Option<Duration> {
        let ongoing = self.ongoing.lock().unwrap_or_else(|e| e.into_inner());
        ongoing.get(node).map(Instant::elapsed)
    }

    fn set_ongoing(&self, node: &str, started: Option<Instant>) {
        let mut ongoing = self.ongoing.lock().unwrap_or_else(|e| e.into_inner());
        match started {
            Some(at) => ongoing.insert(node.to_string(), at),
            None => ongoing.remove(node),
        };
    }

    /// Works on one node's request; returns when to look again (`None`: done).
    async fn reconcile(&self, node: &Node) -> Option<Duration> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let seen = Seen::of(node);
        let request =
            schedule::request(&name, seen.desired.as_deref(), seen.last_applied.as_deref());
        let step = match request {
            Ok(Request::Done) => {
                tracing::info!("Node {name} has the correct drain request state");
                return None;
            }
            Err(message) => Step::Failed(message),
            Ok(Request::Uncordon) => {
                tracing::info!("node {name}: uncordoning");
                self.set_ongoing(&name, None);
                match self.drainer(&name).uncordon().await {
                    Ok(()) => Step::Complete,
                    Err(e) => Step::Failed(format!("failed to uncordon node {name}: {e}")),
                }
            }
            Ok(Request::Drain) => self.drain(node, &name).await,
        };
        match step {
            Step::Complete => {}
            Step::Again(after) => return Some(after),
            Step::Failed(message) => {
                tracing::error!("{message}");
                return Some(self.timings.requeue);
            }
        }
        tracing::info!("node {name}: operation successful; applying completion annotation");
        let desired = seen.desired.unwrap_or_default();
        let mut annotations = json!({ LAST_APPLIED_DRAIN: desired });
        // A failed try's message this controller left in the reason is stale now.
        let reason = node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REASON));
        if reason.is_some_and(|r| r.starts_with(schedule::FAILED_PREFIX)) {
            annotations[REASON] = json!("");
        }
        let patch = Patch::Merge(json!({ "metadata": { "annotations": annotations } }));
        match self
            .nodes
            .patch(&name, &PatchParams::default(), &patch)
            .await
        {
            Ok(written) => {
                self.cache.record(written, &[LAST_APPLIED_DRAIN]);
                None
            }
            Err(err) => {
                tracing::error!("node {name}: failed to set node uncordoned annotation: {err}");
                Some(self.timings.requeue)
            }
        }
    }

    /// Cordons (when the drain is new, or the node was uncordoned meanwhile) and tries the
    /// drain once.
    async fn drain(&self, node: &Node, name: &str) -> Step {
        let ongoing_for = self.ongoing_for(name);
        if let Some(duration) = ongoing_for {
            tracing::info!(
                "Previous node drain found. Drain has been going on for {} hours",
                duration.as_secs_f64() / 3600.0
            );
            if let Some(message) = schedule::overdue(name, duration, &self.timings) {
                tracing::error!("{message}");
                self.event(node, "DrainFailed", &message).await;
            }
        }
        let drainer = self.drainer(name);
        let is_unschedulable = unschedulable(node);
        if ongoing_for.is_some() && !is_unschedulable {
            tracing::info!(
                "External actor has unexpectedly uncordoned node {name}, cordoning again..."
            );
        }
        if schedule::must_cordon(ongoing_for, is_unschedulable) {
            tracing::info!("node {name}: cordoning");
            if let Err(e) = drainer.cordon().await {
                return Step::Failed(format!("node {name}: failed to cordon: {e}"));
            }
            self.set_ongoing(name, Some(Instant::now()));
        }
        tracing::info!("node {name}: initiating drain");
        match drainer.drain().await {
            Ok(report) => {
                for pod in &report.removed {
                    tracing::info!("node {name}: Evicted pod {pod}");
                }
            }
            Err(err) => {
                let retry = schedule::after_failure(
                    ongoing_for.unwrap_or_default(),
                    &err.to_string(),
                    &self.timings,
                );
                tracing::info!("node {name}: {}", retry.message);
                if retry.threshold_exceeded {
                    self.event(node, "DrainThresholdExceeded", &retry.message)
                        .await;
                }
                self.tell_the_agent(name, &retry.message).await;
                return Step::Again(retry.after);
            }
        }
        self.set_ongoing(name, None);
        match self.nodes.get(name).await {
            Ok(fresh) if unschedulable(&fresh) => Step::Complete,
            Ok(_) => {
                tracing::info!(
                    "node {name}: externally uncordoned during drain, skipping completion annotation"
                );
                Step::Again(Duration::ZERO)
            }
            Err(e) => Step::Failed(format!(
                "node {name}: reading the node after its drain: {e}"
            )),
        }
    }

    /// Puts a failed try's message (naming the pods left and what holds them) in the node's
    /// `reason` while its agent waits on the drain: upstream leaves it empty until the agent
    /// gives up after an hour; the agent replaces it with its own state's reason when it goes
    /// on. A failure is logged, never fatal.
    async fn tell_the_agent(&self, name: &str, message: &str) {
        let reason = truncate_reason(message);
        let patch = Patch::Merge(json!({"metadata": {"annotations": {REASON: reason}}}));
        if let Err(err) = self
            .nodes
            .patch(name, &PatchParams::default(), &patch)
            .await
        {
            tracing::warn!("node {name}: writing the drain failure into its reason: {err}");
        }
    }

    /// Records a Warning event on the node; a failure is logged, never fatal.
    async fn event(&self, node: &Node, reason: &str, message: &str) {
        if let Err(err) = record_event(&self.client, node, reason, message).await {
            tracing::warn!(reason, "recording an event failed: {err:#}");
        }
    }
}

async fn record_event(client: &Client, node: &Node, reason: &str, message: &str) -> Result<()> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let now = std::time::SystemTime::now();
    let nanos = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let timestamp = humantime::format_rfc3339_seconds(now).to_string();
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": EVENT_NAMESPACE},
        "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": name, "uid": node.metadata.uid},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": EVENT_COMPONENT},
        "reportingComponent": EVENT_COMPONENT,
        "firstTimestamp": timestamp,
        "lastTimestamp": timestamp,
        "count": 1,
    }))
    .context("building an event")?;
    Api::<Event>::namespaced(client.clone(), EVENT_NAMESPACE)
        .create(&PostParams::default(), &event)
        .await
        .with_context(|| format!("creating event {reason} for node {name}"))?;
    Ok(())
}
