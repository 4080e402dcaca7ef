//! A per-node config's secret reaches its node and no other, by any path: worker-1 has a
//! MachineConfig of its own (`mco.io/node: worker-1`) holding a secret, and a first-boot token
//! in the Secret the shipped Deployment mounts. As worker-0's kubelet (its own client
//! certificate), the real `kubectl` reads every resource type the API serves, cluster-wide and
//! in every namespace, and by name every object that names worker-1's config, its token or its
//! Node; curl asks the config server for worker-1's config every way the protocol has. The
//! secret and the token appear nowhere. Positive controls show each search would have found
//! them: the admin reads the secret in the rendered MachineConfig, the control-plane node that
//! runs the companion's pod reads the token Secret (the Node authorizer's graph), and worker-1
//! gets its config with its own certificate.
//! Real: the companion binary, kubectl, curl, the shipped RBAC and Deployment; standing in: the
//! API server (the test server's model of kube-apiserver 1.33's authorizers).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, STATE};
use mco_test_support::apiserver::{Identity, ServerOptions, Target, TestApiServer};
use mco_test_support::shipped::{self, COMPANION_NAMESPACE};
use serde_json::{Value, json};

const ROLE: &str = "machineconfiguration.openshift.io/role";
const SECRET: &str = "s3cr3t-of-worker-1-7f2a9c41d0e8b6";
/// A token as `mco-companion bootstrap-token` makes them: it expires in an hour, within the
/// server's default lifetime of a day.
fn token() -> &'static str {
    static TOKEN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        mco_companion::server::bootstrap::mint(
            std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
        )
    });
    &TOKEN
}
const TOKENS_SECRET: &str = "mco-companion-bootstrap-tokens";

/// The forms `text` takes in an object: as is, and in base64 at each of the three alignments
/// (the part of the encoding that does not depend on the neighbouring bytes).
fn encodings(text: &str) -> Vec<String> {
    let mut forms = vec![text.to_string()];
    for pad in 0..3 {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}{text}{}",
            "x".repeat(pad),
            "y".repeat(3)
        ));
        forms.push(encoded[4..encoded.len() - 8].to_string());
    }
    forms
}

fn leaks(output: &str) -> Vec<String> {
    encodings(SECRET)
        .into_iter()
        .chain(encodings(token()))
        .filter(|form| output.contains(form.as_str()))
        .collect()
}

fn kubectl(api: &TestApiServer, kubeconfig: &Path, args: &[&str]) -> Output {
    api.kubectl(kubeconfig)
        .args(args)
        .output()
        .expect("running kubectl (tests/setup.sh installs it)")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn node(name: &str, role: &str) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert(format!("node-role.kubernetes.io/{role}"), json!(""));
    if role == "master" {
        labels.insert("node-role.kubernetes.io/control-plane".into(), json!(""));
    }
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": labels, "creationTimestamp": "2024-01-01T00:00:00Z"},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

fn pool(name: &str) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
           "metadata": {"name": name},
           "spec": {"machineConfigSelector": {"matchLabels": {ROLE: name}},
                    "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
                    "maxUnavailable": 3}})
}

fn mc(name: &str, role: &str, path: &str, data: &str) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
           "metadata": {"name": name, "labels": {ROLE: role}},
           "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
               {"path": path, "mode": 384, "contents": {"source": format!("data:,{data}")}}]}}}})
}

/// The companion's pod as a scheduler would place the shipped Deployment's template: on the
/// first node its nodeSelector matches.
fn companion_pod(api: &TestApiServer) -> (Value, String) {
    let deployment = shipped::object("Deployment", "mco-companion").unwrap();
    let template = deployment["spec"]["template"].clone();
    let selector = template["spec"]["nodeSelector"]
        .as_object()
        .expect("the shipped Deployment has a nodeSelector")
        .clone();
    let nodes = api.list("nodes", None);
    let chosen = nodes
        .iter()
        .find(|n| {
            selector
                .iter()
                .all(|(k, v)| n["metadata"]["labels"][k.as_str()] == *v)
        })
        .expect("a node matches the Deployment's nodeSelector");
    let name = chosen["metadata"]["name"].as_str().unwrap().to_string();
    let mut spec = template["spec"].clone();
    spec["nodeName"] = json!(name);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "mco-companion-0", "namespace": COMPANION_NAMESPACE,
                     "labels": template["metadata"]["labels"]},
        "spec": spec});
    (pod, name)
}

struct Companion {
    child: std::process::Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Companion {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Companion {
    fn start(api: &TestApiServer, kubeconfig: &Path) -> Companion {
        let dir = tempfile::tempdir().unwrap();
        let ca = mco_test_support::tls::TestCa::new("companion test CA").unwrap();
        let cert = ca.issue_server_cert(&["127.0.0.1".to_string()]).unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.cert_pem()).unwrap();
        std::fs::write(dir.path().join("tls.crt"), &cert.cert_pem).unwrap();
        private(&dir.path().join("tls.key"), &cert.key_pem);
        std::fs::write(
            dir.path().join("client-ca.crt"),
            api.client_ca_pem().unwrap(),
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("tokens")).unwrap();
        private(
            &dir.path().join("tokens/worker-1"),
            &format!("{}\n", token()),
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_mco-companion"))
            .args(["serve", "--controller", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cert")
            .arg(dir.path().join("tls.crt"))
            .arg("--key")
            .arg(dir.path().join("tls.key"))
            .arg("--client-ca")
            .arg(dir.path().join("client-ca.crt"))
            .arg("--bootstrap-tokens")
            .arg(dir.path().join("tokens"))
            // as the Deployment's downward API sets it: the leader election's Lease goes there
            .env("POD_NAMESPACE", COMPANION_NAMESPACE)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Companion { child, port, dir }
    }

    /// A kubelet's client certificate and key (one PEM file) from the cluster's client CA.
    fn kubelet_cert(&self, api: &TestApiServer, node: &str) -> PathBuf {
        let cert = api.client_certificate(&Identity::node(node)).unwrap();
        let path = self.dir.path().join(format!("{node}.pem"));
        private(&path, &format!("{}{}", cert.cert_pem, cert.key_pem));
        path
    }

    /// curl of `path` with `args` added: (status, body).
    fn curl(&self, path: &str, args: &[&str]) -> (String, String) {
        let out = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                "-w",
                "\n%{http_code}",
                "--cacert",
            ])
            .arg(self.dir.path().join("ca.crt"))
            .args(args)
            .arg(format!("https://127.0.0.1:{}{path}", self.port))
            .output()
            .expect("running curl");
        let all = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = all.rsplit_once('\n').unwrap_or(("", &all));
        (code.trim().to_string(), body.to_string())
    }
}

fn private(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn worker_0_cannot_read_worker_1s_secret_by_any_path() {
    let api = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    shipped::load_rbac(&api).unwrap();
    let companion_kubeconfig = shipped::companion_kubeconfig(&api).unwrap();
    for (name, role) in [
        ("master-0", "master"),
        ("worker-0", "worker"),
        ("worker-1", "worker"),
    ] {
        api.seed(node(name, role)).unwrap();
    }
    api.seed(pool("worker")).unwrap();
    api.seed(pool("master")).unwrap();
    api.seed(mc("00-worker", "worker", "/etc/pool-file", "for-all"))
        .unwrap();
    api.seed(mc("00-master", "master", "/etc/pool-file", "masters"))
        .unwrap();
    let mut own = mc(
        "50-worker-1-secret",
        "worker",
        "/etc/worker-1-secret",
        SECRET,
    );
    own["metadata"]["labels"]["mco.io/node"] = json!("worker-1");
    api.seed(own).unwrap();
    api.seed(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": TOKENS_SECRET, "namespace": COMPANION_NAMESPACE},
        "type": "Opaque",
        "data": {"worker-1": base64::engine::general_purpose::STANDARD.encode(token())}}))
        .unwrap();
    let (pod, runs_on) = companion_pod(&api);
    assert_eq!(
        runs_on, "master-0",
        "the companion's pod must run on the control plane, never next to a worker's kubelet"
    );
    api.seed(pod).unwrap();

    let companion = Companion::start(&api, &companion_kubeconfig);
    let deadline = Instant::now() + Duration::from_secs(60);
    let own_config = loop {
        let desired = api
            .get("nodes", None, "worker-1")
            .and_then(|n| {
                n["metadata"]["annotations"][DESIRED_CONFIG]
                    .as_str()
                    .map(String::from)
            })
            .unwrap_or_default();
        if desired.starts_with("rendered-worker-worker-1-") {
            break desired;
        }
        assert!(
            Instant::now() < deadline,
            "the controller did not target worker-1 with its per-node config (desiredConfig {desired:?})"
        );
        std::thread::sleep(Duration::from_millis(200));
    };

    // positive controls: the searches below find the secret where it is
    let admin = api.kubeconfig().to_path_buf();
    let as_admin = kubectl(
        &api,
        &admin,
        &["get", "machineconfig", &own_config, "-o", "yaml"],
    );
    assert!(
        !leaks(&text(&as_admin)).is_empty(),
        "the admin's read of {own_config} does not show the secret: the search is wrong"
    );
    let master = api.dir().join("master-0.kubeconfig");
    api.write_node_kubeconfig(&master, "master-0").unwrap();
    let as_master = kubectl(
        &api,
        &master,
        &[
            "get",
            "secret",
            TOKENS_SECRET,
            "-n",
            COMPANION_NAMESPACE,
            "-o",
            "yaml",
        ],
    );
    assert!(
        as_master.status.success() && !leaks(&text(&as_master)).is_empty(),
        "the node running the companion's pod reads its token Secret: {}",
        text(&as_master)
    );

    // worker-0's kubelet, through the API: every type, every namespace, and by name
    let worker0 = api.dir().join("worker-0.kubeconfig");
    api.write_node_kubeconfig(&worker0, "worker-0").unwrap();
    let types = kubectl(
        &api,
        &admin,
        &["api-resources", "--verbs=get", "-o", "name"],
    );
    assert!(types.status.success(), "{}", text(&types));
    let types = String::from_utf8_lossy(&types.stdout).to_string();
    assert!(types.lines().count() > 10, "api-resources: {types}");
    let mut reads = Vec::new();
    for resource in types.lines() {
        reads.push(vec!["get".to_string(), resource.to_string(), "-A".into()]);
    }
    let by_name = [
        ("machineconfigs", own_config.as_str(), ""),
        ("machineconfigs", "50-worker-1-secret", ""),
        ("machineconfignodes", "worker-1", ""),
        ("machineconfigpools", "worker", ""),
        ("nodes", "worker-1", ""),
        ("secrets", TOKENS_SECRET, COMPANION_NAMESPACE),
        ("pods", "mco-companion-0", COMPANION_NAMESPACE),
        ("configmaps", "mco-companion-client-ca", COMPANION_NAMESPACE),
    ];
    for (resource, name, namespace) in by_name {
        let mut args = vec!["get".to_string(), resource.to_string(), name.to_string()];
        if !namespace.is_empty() {
            args.extend(["-n".to_string(), namespace.to_string()]);
        }
        reads.push(args);
    }
    for mut args in reads {
        args.extend(["-o".to_string(), "yaml".to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = text(&kubectl(&api, &worker0, &args));
        let found = leaks(&out);
        assert!(
            found.is_empty(),
            "kubectl {} as worker-0 shows worker-1's secret or token ({found:?}):\n{out}",
            args.join(" ")
        );
    }
    // the by-name reads were refused, not merely empty
    let refused_config = kubectl(&api, &worker0, &["get", "machineconfig", &own_config]);
    assert!(
        text(&refused_config).contains("Forbidden"),
        "{}",
        text(&refused_config)
    );

    // the config server: worker-0's certificate, anonymous, claims and names
    let worker0_cert = companion.kubelet_cert(&api, "worker-0");
    let worker0_cert = worker0_cert.to_str().unwrap();
    let named = format!("X-MCO-Config: {own_config}");
    let attempts: Vec<(&str, Vec<&str>)> = vec![
        ("/config/worker", vec!["--cert", worker0_cert]),
        ("/config/worker", vec!["--cert", worker0_cert, "-H", &named]),
        ("/config/worker?node=worker-1", vec!["--cert", worker0_cert]),
        ("/config/worker", vec!["-H", "X-MCO-Node: worker-1"]),
        ("/config/worker", vec!["-H", &named]),
        (
            "/config/worker",
            vec![
                "-H",
                "X-MCO-Node: worker-1",
                "-H",
                "Authorization: Bearer wrong-token-of-32-bytes-0000000000",
            ],
        ),
    ];
    // worker-0's agent applies its pool's config, so that the pool serves it
    let desired = api.get("nodes", None, "worker-0").unwrap()["metadata"]["annotations"]
        [DESIRED_CONFIG]
        .clone();
    api.patch(
        "nodes",
        None,
        "worker-0",
        &json!({"metadata": {"annotations": {CURRENT_CONFIG: desired, STATE: "Done"}}}),
        Target::Main,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while companion.curl("/config/worker", &[]).0 != "200" {
        assert!(
            Instant::now() < deadline,
            "the config server never served the pool"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for (path, args) in &attempts {
        let (code, body) = companion.curl(path, args);
        let found = leaks(&body);
        assert!(
            found.is_empty(),
            "GET {path} {args:?} answered {code} with worker-1's secret ({found:?})"
        );
    }
    let worker1_cert = companion.kubelet_cert(&api, "worker-1");
    let (code, body) = companion.curl(
        "/config/worker",
        &["--cert", worker1_cert.to_str().unwrap(), "-H", &named],
    );
    assert_eq!(code, "200");
    assert!(
        !leaks(&body).is_empty(),
        "worker-1 does not get its own secret: the config-server search is wrong"
    );
}
