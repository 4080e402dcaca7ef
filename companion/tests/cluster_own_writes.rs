//! The controller reads Nodes from a watch-fed cache; this checks that a pass running before the
//! watch has delivered the controller's own `desiredConfig` patches does not act on that stale
//! view (companion/src/cluster/node_cache.rs). The API test server holds back the controller's
//! Node watch while the controller targets two nodes and a newer config arrives: on the cache
//! alone, the pass would see those two Done on their old config and target two more, four at
//! once in a pool of `maxUnavailable: 2`. The companion runs as its shipped service account
//! with RBAC enforced.

use std::time::{Duration, Instant};

use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, STATE};
use machine_config::render::RenderOptions;
use mco_companion::cluster::{self, controller};
use mco_test_support::apiserver::{ServerOptions, Target, TestApiServer};
use mco_test_support::shipped;
use serde_json::{Value, json};
use tokio::sync::watch;

const ROLE: &str = "machineconfiguration.openshift.io/role";
/// How long the controller's Node watch is held back.
const HELD: Duration = Duration::from_secs(20);
const NODES: [&str; 6] = ["w0", "w1", "w2", "w3", "w4", "w5"];

struct Cluster {
    api: TestApiServer,
}

impl Cluster {
    fn annotation(&self, node: &str, key: &str) -> String {
        let n = self.api.get("nodes", None, node).unwrap();
        n["metadata"]["annotations"][key]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn annotate(&self, node: &str, annotations: Value) {
        let patch = json!({"metadata": {"annotations": annotations}});
        self.api
            .patch("nodes", None, node, &patch, Target::Main)
            .unwrap();
    }

    fn set_paused(&self, paused: bool) {
        let patch = json!({"spec": {"paused": paused}});
        self.api
            .patch("machineconfigpools", None, "worker", &patch, Target::Main)
            .unwrap();
    }

    fn target(&self) -> String {
        let pool = self.api.get("machineconfigpools", None, "worker").unwrap();
        pool["spec"]["configuration"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn create_mc(&self, name: &str, path: &str) {
        self.api
            .seed(json!({
                "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
                "metadata": {"name": name, "labels": {ROLE: "worker"}},
                "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
                    {"path": path, "mode": 420, "contents": {"source": "data:,x"}}]}}}
            }))
            .unwrap();
    }

    /// Nodes whose desired config is set and not yet current (updating, for maxUnavailable).
    fn updating(&self) -> Vec<&'static str> {
        NODES
            .into_iter()
            .filter(|n| {
                let desired = self.annotation(n, DESIRED_CONFIG);
                !desired.is_empty() && desired != self.annotation(n, CURRENT_CONFIG)
            })
            .collect()
    }

    fn finish(&self, node: &str) {
        let desired = self.annotation(node, DESIRED_CONFIG);
        self.annotate(node, json!({CURRENT_CONFIG: desired, STATE: "Done"}));
    }

    /// Waits for `what`, asserting all the while that at most two nodes update at once.
    async fn wait_within_limit(&self, what: &str, mut check: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let updating = self.updating();
            assert!(updating.len() <= 2, "{updating:?} updating at once");
            if check(self) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_before_the_watch_shows_its_own_writes_stays_within_max_unavailable() {
    let api = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    shipped::load_rbac(&api).unwrap();
    let kubeconfig = shipped::companion_kubeconfig(&api).unwrap();
    let c = Cluster { api };
    c.api
        .seed(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": "worker"},
            "spec": {"machineConfigSelector": {"matchLabels": {ROLE: "worker"}},
                     "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}},
                     "maxUnavailable": 2}
        }))
        .unwrap();
    c.create_mc("00-worker", "/etc/base");
    for (i, name) in NODES.iter().enumerate() {
        c.api
            .seed(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""},
                             "creationTimestamp": format!("2026-01-01T00:00:0{i}Z")},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            }))
            .unwrap();
    }
    let client = cluster::client(&kubeconfig).await.unwrap();
    let (stop, shutdown) = watch::channel(false);
    let running = tokio::spawn(controller::run(client, RenderOptions::default(), shutdown));

    c.wait_within_limit("the first render", |c| !c.target().is_empty())
        .await;
    let first = c.target();
    for n in NODES {
        c.annotate(
            n,
            json!({CURRENT_CONFIG: first, DESIRED_CONFIG: first, STATE: "Done"}),
        );
    }

    // A second config: the oldest two nodes take it; the pool is paused once they have it.
    c.create_mc("10-second", "/etc/second");
    c.wait_within_limit("w0 and w1 targeted", |c| c.updating() == ["w0", "w1"])
        .await;
    let second = c.target();
    c.set_paused(true);
    c.finish("w0");
    c.finish("w1");
    // the controller's cache has them Done on the second config once the pool says so
    c.wait_within_limit("the pool counting w0 and w1 updated", |c| {
        let pool = c.api.get("machineconfigpools", None, "worker").unwrap();
        pool["status"]["updatedMachineCount"] == 2
    })
    .await;

    // The controller's Node watch is held back from here on (each new watch 20 s): it does not
    // see its own writes. Unpausing targets w2 and w3 with the second config.
    c.api
        .faults()
        .delay("GET", "/api/v1/nodes?*watch=true*", HELD, None);
    c.api.faults().drop_watches();
    let held = Instant::now();
    c.set_paused(false);
    c.wait_within_limit("w2 and w3 targeted", |c| c.updating() == ["w2", "w3"])
        .await;
    // A third config arrives while the watch still shows w2 and w3 Done on the first: w0 and
    // w1 are candidates again, ahead of w2 and w3. Passes run on it (the pool's render) and
    // must not target them while w2 and w3 update.
    c.create_mc("20-third", "/etc/third");
    c.wait_within_limit("the third render", |c| c.target() != second)
        .await;
    let third = c.target();
    let settle = Instant::now() + Duration::from_secs(2);
    c.wait_within_limit("passes on the third config", |_| Instant::now() > settle)
        .await;
    assert!(
        held.elapsed() < HELD,
        "the Node watch was held back throughout (the machine was too slow to tell)"
    );
    assert_eq!(c.updating(), ["w2", "w3"]);

    // The watch comes back; the rollout ends with every node on the third config, two at a time.
    c.api.faults().clear();
    c.wait_within_limit("every node on the third config", |c| {
        for n in c.updating() {
            c.finish(n);
        }
        NODES
            .iter()
            .all(|n| c.annotation(n, CURRENT_CONFIG) == third)
    })
    .await;

    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
}
