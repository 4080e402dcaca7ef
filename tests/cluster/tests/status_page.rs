//! The companion's status page against the API test server (RBAC from `manifests/`, the
//! companion as its shipped service account) seeded with a rollout in progress: a pool moving
//! configs, a drain held by a PodDisruptionBudget, a Degraded node. `/status.json` is byte for
//! byte what `kubectl-mco status -o json` prints for the same fleet; the real Chromium
//! (headless) renders the page, which names every pool and node, and takes its screenshot
//! (kept in `target/test-logs/status-page/`); a node whose reason is a script shows the script
//! as text and runs nothing.
//!
//! Real: the companion and `kubectl-mco` binaries, curl, kubectl, Chromium. Standing in: the
//! API server (`mco-test-apiserver`). No agents: the fleet is seeded, so the page is the same
//! on every run.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use mco_cluster_tests::api::ApiServer;
use mco_test_support::apiserver::fixtures;
use mco_test_support::shipped::{COMPANION_NAMESPACE, COMPANION_ROLE, COMPANION_SERVICE_ACCOUNT};
use mco_test_support::tls::TestCa;
use serde_json::{Value, json};

/// How long the test waits for a process or a condition.
const PATIENCE: Duration = Duration::from_secs(60);

/// Where this test keeps what it made (screenshot, DOMs, logs): `target/test-logs/status-page`
/// of the checkout, beside `tests/run.sh`'s logs.
fn artefacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-logs/status-page");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `command` to its end within [`PATIENCE`] (killed and failed past it).
fn run(command: &mut Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{command:?} did not end within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{command:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The companion serving the page, killed when dropped.
struct Companion {
    child: Child,
    status_port: u16,
    log: PathBuf,
}

impl Drop for Companion {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Companion {
    /// `serve --kubeconfig` as the companion's service account, no controller (the seeded
    /// fleet stays as seeded), the page on a port of its own.
    fn start(api: &ApiServer, dir: &Path) -> Companion {
        mco_test_support::tls::install_ring_provider();
        let ca = TestCa::new("status page test CA").unwrap();
        let cert = ca.issue_server_cert(&["127.0.0.1".to_string()]).unwrap();
        cert.write_to(dir, "tls").unwrap();
        let status_port = free_port();
        let log = artefacts().join("companion.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_e2e-mco-companion"))
            .arg("serve")
            .arg("--kubeconfig")
            .arg(&api.companion_kubeconfig)
            .args(["--listen", &format!("127.0.0.1:{}", free_port())])
            .arg("--cert")
            .arg(dir.join("tls.crt"))
            .arg("--key")
            .arg(dir.join("tls.key"))
            .args(["--status-listen", &format!("127.0.0.1:{status_port}")])
            .arg("--no-fleet-lock")
            .env("POD_NAME", "companion-0")
            .env("POD_NAMESPACE", COMPANION_NAMESPACE)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let mut companion = Companion {
            child,
            status_port,
            log,
        };
        companion.wait_serving();
        companion
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.status_port)
    }

    fn wait_serving(&mut self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let ok = Command::new("curl")
                .args(["-fsS", "-o", "/dev/null", &self.url("/healthz")])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the companion exited ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "the companion's status page did not answer /healthz within {PATIENCE:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path` with the real curl: the body.
    fn get(&self, path: &str) -> String {
        let out = run(Command::new("curl").args(["-fsS", &self.url(path)]));
        String::from_utf8(out.stdout).unwrap()
    }
}

fn kubectl_mco_json(api: &ApiServer) -> String {
    let out = run(Command::new(env!("CARGO_BIN_EXE_e2e-kubectl-mco"))
        .args(["status", "-o", "json", "--kubeconfig"])
        .arg(&api.admin_kubeconfig));
    String::from_utf8(out.stdout).unwrap()
}

/// The real Chromium, headless (`--no-sandbox`: the tests run as root), with a profile of its
/// own; fails saying so when it is not installed.
fn chromium(profile: &Path, args: &[&str]) -> Output {
    let found = Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "chromium is not installed: this test renders the status page in the real browser \
         (Debian's chromium package; tests/setup.sh installs it)"
    );
    run(Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args))
}

fn dump_dom(profile: &Path, url: &str) -> String {
    String::from_utf8(chromium(profile, &["--dump-dom", url]).stdout).unwrap()
}

/// `/status.json` equals `kubectl-mco status -o json`, byte for byte: the fleet is still, so
/// both reads see the same objects.
fn assert_same_json(companion: &Companion, api: &ApiServer) -> Value {
    let served = companion.get("/status.json");
    let printed = kubectl_mco_json(api);
    assert_eq!(
        served, printed,
        "/status.json differs from kubectl-mco status -o json"
    );
    serde_json::from_str(&served).unwrap()
}

#[test]
fn the_status_page_renders_the_fleet_in_chromium_and_serves_kubectl_mcos_json() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("fleet.json");
    let fleet =
        json!({"apiVersion": "v1", "kind": "List", "items": fixtures::rollout_in_progress()});
    std::fs::write(&seed, fleet.to_string()).unwrap();
    let api = ApiServer::start_seeded(
        Path::new(env!("CARGO_BIN_EXE_e2e-mco-test-apiserver")),
        &dir.path().join("api"),
        &[],
        &[seed],
    )
    .unwrap();
    let companion = Companion::start(&api, dir.path());
    let artefacts = artefacts();
    let profile = dir.path().join("chromium");

    // the JSON: the plugin's, and the seeded rollout in it
    let status = assert_same_json(&companion, &api);
    let worker = status["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "worker")
        .unwrap_or_else(|| panic!("no worker pool in {status:#}"));
    assert_eq!(worker["targetConfig"], "rendered-worker-2");
    assert_eq!(worker["nodes"][1]["drainBlockedBy"]["budget"], "db");

    // the page, as Chromium renders it: every pool and every node named
    let dom = dump_dom(&profile, &companion.url("/"));
    std::fs::write(artefacts.join("rollout-in-progress.html"), &dom).unwrap();
    let mut names = 0;
    for pool in status["pools"].as_array().unwrap() {
        let name = pool["name"].as_str().unwrap();
        assert!(
            dom.contains(&format!(">Pool {name}</h2>")),
            "pool {name}:\n{dom}"
        );
        for node in pool["nodes"].as_array().unwrap() {
            let node = node["name"].as_str().unwrap();
            assert!(
                dom.contains(&format!("<td>{node}</td>")),
                "node {node}:\n{dom}"
            );
            names += 1;
        }
    }
    assert_eq!(names, 4, "master-0 and worker-0..2");
    for text in [
        "drain blocked by pod app/db-0 (budget db)",
        "Drained=Unknown",
        "rendered-worker-1 → rendered-worker-2",
        "Draining node to update config.",
        "<title>MachineConfigPools</title>",
    ] {
        assert!(dom.contains(text), "{text:?} not on the page:\n{dom}");
    }

    // a screenshot of the rollout in progress
    let shot = artefacts.join("rollout-in-progress.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1100,840",
            &companion.url("/"),
        ],
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("{}: {e}", shot.display()));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        png.len() > 10_000,
        "a blank screenshot? {} bytes",
        png.len()
    );

    // a node whose reason is markup: shown as text, nothing runs, nothing loads
    let hostile =
        "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">";
    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "worker-9",
            "labels": {"kubernetes.io/hostname": "worker-9", "node-role.kubernetes.io/worker": ""},
            "annotations": {
                "machineconfiguration.openshift.io/currentConfig": "rendered-worker-1",
                "machineconfiguration.openshift.io/desiredConfig": "rendered-worker-2",
                "machineconfiguration.openshift.io/state": "Degraded",
                "machineconfiguration.openshift.io/reason": hostile,
            },
        },
    });
    let file = dir.path().join("worker-9.json");
    std::fs::write(&file, node.to_string()).unwrap();
    run(Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&api.admin_kubeconfig)
        .arg("create")
        .arg("-f")
        .arg(&file));
    // the page reuses a read for 2 s: wait for one that sees the new node
    let deadline = Instant::now() + PATIENCE;
    while !companion.get("/status.json").contains("worker-9") {
        assert!(
            Instant::now() < deadline,
            "/status.json did not show worker-9 within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = assert_same_json(&companion, &api);
    assert!(status.to_string().contains("document.title='pwned'"));
    let dom = dump_dom(&profile, &companion.url("/"));
    std::fs::write(artefacts.join("hostile-reason.html"), &dom).unwrap();
    assert!(dom.contains("<title>MachineConfigPools</title>"), "{dom}");
    assert!(!dom.contains("pwned</title>"), "the script ran:\n{dom}");
    assert!(!dom.contains("<img") && !dom.contains("<script"), "{dom}");
    assert!(
        dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;img src=x"),
        "the reason is not shown as text:\n{dom}"
    );

    // the companion's reads were its shipped rules', the events list included
    let user = format!("system:serviceaccount:{COMPANION_NAMESPACE}:{COMPANION_SERVICE_ACCOUNT}");
    let usage =
        mco_test_support::shipped::role_use(&api.audit().unwrap(), &user, COMPANION_ROLE).unwrap();
    assert!(
        usage.refused.is_empty(),
        "the shipped rules refused the companion: {:#?}",
        usage.refused
    );
    for needed in ["list events", "list machineconfignodes", "list nodes"] {
        assert!(
            usage.used.iter().any(|u| u.starts_with(needed)),
            "{needed} not used: {:#?}",
            usage.used
        );
    }
}
