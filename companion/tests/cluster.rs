//! Cluster mode against the Kubernetes API test server: two pools, five nodes. The test plays
//! the nodes' agents by patching their annotations; the controller renders, rolls out within
//! maxUnavailable, stops for a paused pool, refuses an unreconcilable config, and the cluster
//! config source serves what the pools say.
//! The companion runs as the service account of `manifests/` with RBAC enforced by the rules
//! loaded from those files (the test itself acts as the admin), so a call they do not allow
//! fails; the rollout test also fails on a permission of the shipped ClusterRole that no
//! request of the controller or the config source needed.

use std::time::{Duration, Instant};

use machine_config::SpecVersion;
use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, STATE};
use machine_config::render::RenderOptions;
use mco_companion::cluster::{self, controller, source::ClusterSource};
use mco_companion::server::{ConfigSource, PoolRequest, ServeError};
use mco_test_support::apiserver::{ServerOptions, Target, TestApiServer};
use mco_test_support::shipped::{
    self, COMPANION_NAMESPACE, COMPANION_ROLE, COMPANION_SERVICE_ACCOUNT,
};
use serde_json::{Value, json};
use tokio::sync::watch;

const ROLE: &str = "machineconfiguration.openshift.io/role";

fn pool(name: &str, roles: &[&str], max_unavailable: i64) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "machineConfigSelector": {"matchExpressions": [{"key": ROLE, "operator": "In", "values": roles}]},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
            "maxUnavailable": max_unavailable
        }
    })
}

fn mc(name: &str, role: &str, storage: Value) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {ROLE: role}},
        "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": storage}}
    })
}

fn file(path: &str, data: &str) -> Value {
    json!({"files": [{"path": path, "mode": 420, "contents": {"source": format!("data:,{data}")}}]})
}

fn node(name: &str, roles: &[&str], zone: Option<&str>, created: &str) -> Value {
    let mut labels = serde_json::Map::new();
    for role in roles {
        labels.insert(format!("node-role.kubernetes.io/{role}"), json!(""));
    }
    if let Some(zone) = zone {
        labels.insert("topology.kubernetes.io/zone".into(), json!(zone));
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": created},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}
    })
}

struct Cluster {
    api: TestApiServer,
}

/// The API test server enforcing the Node authorizer and the RBAC objects of `manifests/`,
/// and a kubeconfig with the token of the companion's service account.
fn rbac_cluster() -> (TestApiServer, std::path::PathBuf) {
    let api = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    shipped::load_rbac(&api).unwrap();
    let kubeconfig = mco_test_support::shipped::companion_kubeconfig(&api).unwrap();
    (api, kubeconfig)
}

/// Permissions of the shipped ClusterRole only the drain controller uses: the rollout test
/// requests no drain; `tests/drain_controller.rs` checks that its drains use each of them.
/// And the status page's (`list events`), which the cluster tier's `status_page.rs` checks.
const NOT_IN_THE_ROLLOUT: [&str; 5] = [
    "get nodes",
    "list pods",
    "create pods/eviction",
    "create events",
    "list events",
];

/// The companion's service account needed every permission of its shipped ClusterRole (but
/// those only drains use) and was refused nothing.
fn assert_exactly_the_shipped_rules(api: &TestApiServer) {
    let user = format!("system:serviceaccount:{COMPANION_NAMESPACE}:{COMPANION_SERVICE_ACCOUNT}");
    let usage = shipped::role_use(&api.audit(), &user, COMPANION_ROLE).unwrap();
    eprintln!("{user} used:\n  {}", usage.used.join("\n  "));
    assert!(
        usage.refused.is_empty(),
        "requests of the companion the shipped rules refuse: {:#?}",
        usage.refused
    );
    let unused: Vec<&String> = usage
        .unused
        .iter()
        .filter(|p| !NOT_IN_THE_ROLLOUT.contains(&p.as_str()))
        .collect();
    assert!(
        unused.is_empty(),
        "permissions of ClusterRole {COMPANION_ROLE} (manifests/companion-rbac.yaml) no request of the companion needed: {unused:#?}"
    );
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
        self.api
            .patch(
                "nodes",
                None,
                node,
                &json!({"metadata": {"annotations": annotations}}),
                Target::Main,
            )
            .unwrap();
    }

    fn pool(&self, name: &str) -> Value {
        self.api.get("machineconfigpools", None, name).unwrap()
    }

    fn target(&self, pool: &str) -> String {
        self.pool(pool)["spec"]["configuration"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn condition(&self, pool: &str, type_: &str) -> (String, String) {
        let p = self.pool(pool);
        let found = p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == type_)
            .cloned()
            .unwrap_or(Value::Null);
        (
            found["status"].as_str().unwrap_or_default().to_string(),
            found["message"].as_str().unwrap_or_default().to_string(),
        )
    }

    fn create_mc(&self, object: Value) {
        self.api.seed(object).unwrap();
    }

    /// Plays every node's agent until `nodes` all run `config` (or per-node configs when
    /// `per_node` says so); returns the largest number of nodes seen updating at once and the
    /// order in which nodes were first targeted.
    async fn roll_out(
        &self,
        pool: &str,
        nodes: &[&str],
        max_unavailable: usize,
    ) -> (usize, Vec<String>) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut most = 0;
        let mut order = Vec::new();
        loop {
            let target = self.target(pool);
            let updating: Vec<&str> = nodes
                .iter()
                .copied()
                .filter(|n| {
                    let desired = self.annotation(n, DESIRED_CONFIG);
                    !desired.is_empty() && desired != self.annotation(n, CURRENT_CONFIG)
                })
                .collect();
            most = most.max(updating.len());
            assert!(
                updating.len() <= max_unavailable,
                "{updating:?} updating at once in {pool}"
            );
            for n in &updating {
                if !order.contains(&n.to_string()) {
                    order.push(n.to_string());
                }
            }
            let done = nodes.iter().all(|n| {
                let current = self.annotation(n, CURRENT_CONFIG);
                current == self.annotation(n, DESIRED_CONFIG)
                    && current.starts_with(&format!("rendered-{pool}-"))
                    && (current == target || current.starts_with(&format!("rendered-{pool}-{n}-")))
            });
            if done && updating.is_empty() {
                return (most, order);
            }
            // each updating node: one step of the agent (Working, then Done on the new config)
            for n in updating {
                if self.annotation(n, STATE) == "Working" {
                    let desired = self.annotation(n, DESIRED_CONFIG);
                    self.annotate(n, json!({CURRENT_CONFIG: desired, STATE: "Done"}));
                } else {
                    self.annotate(n, json!({STATE: "Working"}));
                }
            }
            assert!(
                Instant::now() < deadline,
                "rollout of {pool} did not finish"
            );
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }
}

async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_pause_and_unreconcilable_config() {
    let (api, companion_kubeconfig) = rbac_cluster();
    let c = Cluster { api };
    c.api.seed(pool("worker", &["worker"], 2)).unwrap();
    c.api.seed(pool("infra", &["worker", "infra"], 1)).unwrap();
    c.create_mc(mc("00-worker", "worker", file("/etc/base", "base")));
    c.create_mc(mc("50-infra", "infra", file("/etc/infra", "infra")));
    let workers = ["worker-0", "worker-1", "worker-2", "worker-3"];
    c.api
        .seed(node(
            "worker-0",
            &["worker"],
            Some("zone-b"),
            "2026-01-01T00:00:00Z",
        ))
        .unwrap();
    c.api
        .seed(node(
            "worker-1",
            &["worker"],
            Some("zone-a"),
            "2026-01-01T00:00:01Z",
        ))
        .unwrap();
    c.api
        .seed(node(
            "worker-2",
            &["worker"],
            Some("zone-a"),
            "2026-01-01T00:00:02Z",
        ))
        .unwrap();
    c.api
        .seed(node("worker-3", &["worker"], None, "2026-01-01T00:00:03Z"))
        .unwrap();
    c.api
        .seed(node(
            "infra-0",
            &["worker", "infra"],
            None,
            "2026-01-01T00:00:04Z",
        ))
        .unwrap();

    let client = cluster::client(&companion_kubeconfig).await.unwrap();
    let (stop, shutdown) = watch::channel(false);
    let running = tokio::spawn(controller::run(
        client.clone(),
        RenderOptions::default(),
        shutdown.clone(),
    ));

    // the controller renders both pools; the nodes boot into them (as the MCS seed file does)
    wait_for("both pools rendered", || {
        !c.target("worker").is_empty() && !c.target("infra").is_empty()
    })
    .await;
    let first = c.target("worker");
    assert!(first.starts_with("rendered-worker-"));
    assert!(
        c.api.get("machineconfigs", None, &first).is_some(),
        "the rendered config is written"
    );
    for n in workers {
        c.annotate(
            n,
            json!({CURRENT_CONFIG: first, DESIRED_CONFIG: first, STATE: "Done"}),
        );
    }
    let infra_first = c.target("infra");
    c.annotate(
        "infra-0",
        json!({CURRENT_CONFIG: infra_first, DESIRED_CONFIG: infra_first, STATE: "Done"}),
    );
    wait_for("worker pool Updated", || {
        c.condition("worker", "Updated").0 == "True"
    })
    .await;
    let status = c.pool("worker")["status"].clone();
    assert_eq!(
        (
            status["machineCount"].as_i64(),
            status["updatedMachineCount"].as_i64(),
            status["readyMachineCount"].as_i64()
        ),
        (Some(4), Some(4), Some(4))
    );
    assert_eq!(status["configuration"]["name"], first);

    // a new worker config rolls out two nodes at a time, zone by zone, then by age, through API
    // faults: failing node patches, a failing rendered-config create, dropped watches
    c.api.faults().fail_next("PATCH", "/api/v1/nodes/*", 2, 500);
    c.api.faults().fail_next(
        "POST",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigs",
        1,
        503,
    );
    c.api.faults().drop_watches();
    c.create_mc(mc("10-worker-more", "worker", file("/etc/more", "more")));
    wait_for("a new worker render", || c.target("worker") != first).await;
    let second = c.target("worker");
    let (most, order) = c.roll_out("worker", &workers, 2).await;
    let requests = c.api.requests();
    let failed = |method: &str, path: &str, status: u16| {
        requests
            .iter()
            .any(|r| r.method == method && r.path.starts_with(path) && r.status == status)
    };
    assert!(
        failed("PATCH", "/api/v1/nodes/", 500),
        "the node patch faults were hit"
    );
    assert!(failed(
        "POST",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigs",
        503
    ));
    assert_eq!(most, 2, "two nodes at a time");
    assert_eq!(order, ["worker-1", "worker-2", "worker-0", "worker-3"]);
    // the infra pool (which also selects worker configs) rolls its one node, one at a time
    let (infra_most, _) = c.roll_out("infra", &["infra-0"], 1).await;
    assert_eq!(infra_most, 1);
    wait_for("worker pool Updated again", || {
        c.condition("worker", "Updated").0 == "True"
            && c.pool("worker")["status"]["configuration"]["name"] == second.as_str()
    })
    .await;

    // the cluster config source serves the pool's config once a node runs it
    let source = ClusterSource::start(client.clone(), None, shutdown.clone())
        .await
        .unwrap();
    let worker_request = PoolRequest {
        pool: "worker".into(),
        node: None,
        config: None,
        spec: SpecVersion::V3_2,
    };
    let served: Value = serde_json::from_slice(&source.config(&worker_request).unwrap()).unwrap();
    // ... and reading a MachineConfig store something else fills (the controller's, in `serve
    // --controller`), the same config.
    let shared = cluster::MachineConfigCache::watch(client.clone());
    let reader = shared.reader.clone();
    let driver = tokio::spawn(futures::StreamExt::for_each(shared.changes, |()| async {}));
    let reading = ClusterSource::start(client.clone(), Some(reader), shutdown.clone())
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&reading.config(&worker_request).unwrap()).unwrap(),
        served
    );
    driver.abort();
    let served_files: Vec<&str> = served["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(served_files.contains(&"/etc/more"), "{served_files:?}");
    assert!(
        source
            .config(&PoolRequest {
                pool: "nope".into(),
                node: None,
                config: None,
                spec: SpecVersion::V3_2
            })
            .is_err()
    );

    // pausing stops the rollout but not the render
    c.api
        .patch(
            "machineconfigpools",
            None,
            "worker",
            &json!({"spec": {"paused": true}}),
            Target::Main,
        )
        .unwrap();
    c.create_mc(mc(
        "20-worker-paused",
        "worker",
        file("/etc/paused", "paused"),
    ));
    wait_for("a render while paused", || c.target("worker") != second).await;
    let third = c.target("worker");
    wait_for("Updating reports the pause", || {
        c.condition("worker", "Updating")
            == (
                "False".into(),
                format!("Pool is paused; will not update to MachineConfig {third}"),
            )
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for n in workers {
        assert_eq!(
            c.annotation(n, DESIRED_CONFIG),
            second,
            "{n} must not be targeted while paused"
        );
    }
    c.api
        .patch(
            "machineconfigpools",
            None,
            "worker",
            &json!({"spec": {"paused": false}}),
            Target::Main,
        )
        .unwrap();
    let (most, _) = c.roll_out("worker", &workers, 2).await;
    assert!(most >= 1);

    // an unreconcilable config: the pool reports RenderDegraded naming it, nodes stay put
    c.create_mc(mc(
        "30-worker-disks",
        "worker",
        json!({"disks": [{"device": "/dev/sdb", "wipeTable": true}]}),
    ));
    wait_for("RenderDegraded", || {
        c.condition("worker", "RenderDegraded").0 == "True"
    })
    .await;
    let (_, message) = c.condition("worker", "RenderDegraded");
    assert_eq!(
        message,
        format!(
            "Failed to render configuration for pool worker: could not generate rendered MachineConfig: \
             reconciliation failed between current config \"{third}\" and base config \"30-worker-disks\": \
             ignition disks section contains changes"
        )
    );
    assert_eq!(c.condition("worker", "Degraded").0, "True");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        c.target("worker"),
        third,
        "the pool keeps its last good config"
    );
    for n in workers {
        assert_eq!(c.annotation(n, DESIRED_CONFIG), third, "{n} untouched");
    }
    c.api
        .delete("machineconfigs", None, "30-worker-disks")
        .unwrap();
    wait_for("RenderDegraded cleared", || {
        c.condition("worker", "RenderDegraded").0 == "False"
    })
    .await;

    // a per-node config: only that node moves, to its own rendered config
    let mut own = mc(
        "40-worker-1-only",
        "worker",
        file("/etc/only-worker-1", "yes"),
    );
    own["metadata"]["labels"]["mco.io/node"] = json!("worker-1");
    c.create_mc(own);
    wait_for("worker-1 targeted", || {
        c.annotation("worker-1", DESIRED_CONFIG)
            .starts_with("rendered-worker-worker-1-")
    })
    .await;
    c.roll_out("worker", &workers, 2).await;
    for n in ["worker-0", "worker-2", "worker-3"] {
        assert_eq!(c.annotation(n, CURRENT_CONFIG), third, "{n}");
    }
    let per_node: Value = serde_json::from_slice(
        &source
            .config(&PoolRequest {
                pool: "worker".into(),
                node: Some("worker-1".into()),
                config: None,
                spec: SpecVersion::V3_4,
            })
            .unwrap(),
    )
    .unwrap();
    assert!(
        per_node["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["path"] == "/etc/only-worker-1")
    );
    // named: the node's own config only to that node, another pool's never, unknown names 404
    let own_name = c.annotation("worker-1", DESIRED_CONFIG);
    let named = |pool: &str, node: Option<&str>, config: &str| {
        source.config(&PoolRequest {
            pool: pool.into(),
            node: node.map(str::to_string),
            config: Some(config.into()),
            spec: SpecVersion::V3_4,
        })
    };
    assert!(named("worker", Some("worker-1"), &own_name).is_ok());
    let refused = named("worker", Some("worker-0"), &own_name).unwrap_err();
    assert!(
        matches!(&refused, ServeError::Forbidden(m) if m.contains("worker-1")),
        "{refused}"
    );
    assert!(matches!(
        named("worker", None, &own_name),
        Err(ServeError::Forbidden(_))
    ));
    let infra_config = c.pool("infra")["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let refused = named("worker", None, &infra_config).unwrap_err();
    assert!(
        matches!(&refused, ServeError::Forbidden(m) if m.contains("infra")),
        "{refused}"
    );
    // an older rendered config of the pool, which the pool's status no longer names
    assert!(named("worker", None, &second).is_ok());
    let unknown = named("worker", None, "rendered-worker-nope").unwrap_err();
    assert!(
        matches!(&unknown, ServeError::NotFound(m) if m.contains("rendered-worker-nope") && m.contains("worker")),
        "{unknown}"
    );

    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
    assert_exactly_the_shipped_rules(&c.api);
}

/// The binary in cluster mode (`serve --kubeconfig --controller`) against the test server, over
/// HTTPS with curl: a pool without nodes is rendered and served; an unknown pool is a 500 as in
/// the MCS.
#[test]
fn serve_binary_in_cluster_mode() {
    use std::process::{Command, Stdio};
    let (api, companion_kubeconfig) = rbac_cluster();
    api.seed(pool("worker", &["worker"], 1)).unwrap();
    api.seed(mc("00-worker", "worker", file("/etc/from-cluster", "yes")))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = mco_test_support::tls::TestCa::new("companion test CA").unwrap();
    let cert = ca.issue_server_cert(&["127.0.0.1".to_string()]).unwrap();
    std::fs::write(dir.path().join("ca.crt"), ca.cert_pem()).unwrap();
    std::fs::write(dir.path().join("tls.crt"), &cert.cert_pem).unwrap();
    let key = dir.path().join("tls.key");
    std::fs::write(&key, &cert.key_pem).unwrap();
    // the companion refuses a key others can read
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mco-companion"))
        .args([
            "serve",
            "--controller",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--kubeconfig")
        .arg(&companion_kubeconfig)
        .arg("--cert")
        .arg(dir.path().join("tls.crt"))
        .arg("--key")
        .arg(dir.path().join("tls.key"))
        // as the Deployment's downward API sets it: the leader election's Lease goes there
        .env(
            "POD_NAMESPACE",
            mco_test_support::shipped::COMPANION_NAMESPACE,
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let curl = |path: &str| -> (String, Vec<u8>) {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "5", "-w", "\n%{http_code}", "--cacert"])
            .arg(dir.path().join("ca.crt"))
            .arg(format!("https://127.0.0.1:{port}{path}"))
            .output()
            .unwrap();
        let mut body = out.stdout;
        let split = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
        let code = String::from_utf8_lossy(&body[split..]).trim().to_string();
        body.truncate(split);
        (code, body)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (code, body) = curl("/config/worker");
        if code == "200" {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "no config served (last status {code})"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let config: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(config["ignition"]["version"], "2.2.0");
    assert!(
        body.windows(b"/etc/from-cluster".len())
            .any(|w| w == b"/etc/from-cluster")
    );
    assert_eq!(curl("/config/nope").0, "500");
    assert_eq!(curl("/healthz").0, "200");
    let _ = child.kill();
    let _ = child.wait();
}
