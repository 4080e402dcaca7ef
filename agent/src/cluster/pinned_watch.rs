//! What the node's pinned image sets depend on, followed through three watches as the MCD's
//! informers follow them: every MachineConfigPool (which pools the node is in, and the sets
//! each lists), every PinnedImageSet, and the node's own Node (its labels, its `Ready` and
//! `DiskPressure` conditions, its allocatable ephemeral storage). [`watch`] yields a
//! [`PinnedView`] once all three are listed, then after every change; a broken watch is
//! re-established with backoff.

use std::collections::BTreeMap;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use machine_config::mco::pinned_images::parse_quantity;
use machine_config::{MachineConfigPool, PinnedImageSet};

/// The node as the pinned image sets read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeView {
    pub labels: BTreeMap<String, String>,
    /// The status of the `Ready` condition, when reported.
    pub ready: Option<String>,
    /// The status of the `DiskPressure` condition, when reported.
    pub disk_pressure: Option<String>,
    /// `status.allocatable["ephemeral-storage"]` in bytes, when reported and readable.
    pub allocatable_storage: Option<i64>,
}

impl NodeView {
    /// The view of a Node object.
    pub fn of(node: &Node) -> NodeView {
        let status = node.status.as_ref();
        let condition = |kind: &str| {
            status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == kind))
                .map(|c| c.status.clone())
        };
        NodeView {
            labels: node.metadata.labels.clone().unwrap_or_default(),
            ready: condition("Ready"),
            disk_pressure: condition("DiskPressure"),
            allocatable_storage: status
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| a.get("ephemeral-storage"))
                .and_then(|q| parse_quantity(&q.0)),
        }
    }
}

/// Everything a sync of the node's pinned image sets reads from the cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PinnedView {
    pub node: NodeView,
    pub pools: Vec<MachineConfigPool>,
    pub sets: Vec<PinnedImageSet>,
}

impl PinnedView {
    /// The set named `name`.
    pub fn set(&self, name: &str) -> Option<&PinnedImageSet> {
        self.sets.iter().find(|s| s.name() == name)
    }
}

#[derive(Clone, Copy)]
enum Source {
    Pools = 0,
    Sets = 1,
    Node = 2,
}

/// The views of node `node` through `client` (see the module docs). Never ends.
pub fn watch(client: kube::Client, node: &str) -> BoxStream<'static, PinnedView> {
    let (pools, pool_events) = followed(
        Api::<MachineConfigPool>::all(client.clone()),
        watcher::Config::default(),
        Source::Pools,
    );
    let (sets, set_events) = followed(
        Api::<PinnedImageSet>::all(client.clone()),
        watcher::Config::default(),
        Source::Sets,
    );
    let (nodes, node_events) = followed(
        Api::<Node>::all(client),
        watcher::Config::default().fields(&format!("metadata.name={node}")),
        Source::Node,
    );
    futures::stream::select_all([pool_events, set_events, node_events])
        .scan([false; 3], move |listed, (source, done)| {
            listed[source as usize] |= done;
            let view = listed.iter().all(|l| *l).then(|| PinnedView {
                node: nodes
                    .state()
                    .first()
                    .map(|n| NodeView::of(n))
                    .unwrap_or_default(),
                pools: pools.state().iter().map(|p| (**p).clone()).collect(),
                sets: sets.state().iter().map(|s| (**s).clone()).collect(),
            });
            futures::future::ready(Some(view))
        })
        .filter_map(futures::future::ready)
        .boxed()
}

/// A reflector of `api` and a stream of its events: `(source, whether the initial list is
/// complete)`, after the store took the event in.
fn followed<K>(
    api: Api<K>,
    config: watcher::Config,
    source: Source,
) -> (Store<K>, BoxStream<'static, (Source, bool)>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let what = K::plural(&()).to_string();
    let (store, writer) = reflector::store();
    let events = reflector::reflector(writer, watcher(api, config))
        .default_backoff()
        .filter_map(move |event| {
            let out = match event {
                // the initial list is in once InitDone is; a later Apply or Delete is a change
                Ok(watcher::Event::InitDone) => Some((source, true)),
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => Some((source, false)),
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "watching {what} for the pinned image sets failed; the watch restarts");
                    None
                }
            };
            futures::future::ready(out)
        })
        .boxed();
    (store, events)
}
