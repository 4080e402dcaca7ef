//! `kubectl-mco` against the Kubernetes API test server: run directly and through the real
//! `kubectl`'s plugin mechanism (kubectl finds `kubectl-mco` on PATH), tables, JSON/YAML,
//! `--watch` following a rollout, colours on a terminal only.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mco_test_support::apiserver::{Target, TestApiServer, fixtures};
use serde_json::{Value, json};

/// How long a test waits for the plugin's output to show a change.
const PATIENCE: Duration = Duration::from_secs(30);

fn plugin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kubectl-mco"))
}

fn server() -> TestApiServer {
    let server = TestApiServer::start().unwrap();
    for object in fixtures::rollout_in_progress() {
        server.seed(object).unwrap();
    }
    server
}

fn run(command: &mut Command) -> Output {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn mco(server: &TestApiServer, args: &[&str]) -> Command {
    let mut command = Command::new(plugin());
    command
        .args(args)
        .arg("--kubeconfig")
        .arg(server.kubeconfig());
    command
}

fn pool<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no pool {name} in {status:#}"))
}

fn node<'a>(pool: &'a Value, name: &str) -> &'a Value {
    pool["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name} in {pool:#}"))
}

#[test]
fn status_json_yaml_and_tables() {
    let server = server();
    let out = run(&mut mco(&server, &["status", "-o", "json"]));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let worker = pool(&status, "worker");
    assert_eq!(worker["config"], "rendered-worker-1");
    assert_eq!(worker["targetConfig"], "rendered-worker-2");
    assert_eq!(worker["machineCount"], 3);
    assert_eq!(worker["updating"], true);
    assert!(worker["degraded"].as_str().unwrap().contains("worker-2"));
    let draining = node(worker, "worker-1");
    assert_eq!(draining["state"], "Working");
    assert_eq!(draining["step"]["type"], "Drained");
    assert_eq!(
        draining["drainBlockedBy"],
        json!({"pod": "app/db-0", "budget": "db"})
    );
    let degraded = node(worker, "worker-2");
    assert_eq!(degraded["state"], "Degraded");
    assert!(
        degraded["reason"]
            .as_str()
            .unwrap()
            .starts_with("unexpected on-disk state")
    );
    assert_eq!(node(pool(&status, "master"), "master-0")["state"], "Done");
    assert_eq!(status["events"][0]["reason"], "Drain");
    assert_eq!(status["events"][0]["node"], "worker-1");

    let out = run(&mut mco(&server, &["status", "-o", "yaml"]));
    let yaml: Value = serde_saphyr::from_slice(&out.stdout).unwrap();
    assert_eq!(yaml, status, "YAML and JSON carry the same data");

    let out = run(&mut mco(&server, &["status"]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b'), "no colours on a pipe:\n{text}");
    for name in [
        "master", "worker", "master-0", "worker-0", "worker-1", "worker-2",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(
        text.contains("drain blocked by pod app/db-0 (budget db)"),
        "{text}"
    );

    let out = run(&mut mco(&server, &["nodes", "worker", "-o", "json"]));
    let nodes: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(&nodes, worker);
    let out = run(&mut mco(&server, &["nodes", "master"]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("NODE") && text.contains("master-0") && !text.contains("worker-1"));
}

#[test]
fn errors_name_what_is_wrong() {
    let server = server();
    let out = mco(&server, &["nodes", "infra"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("machineconfigpool \"infra\" not found (pools: master, worker)"),
        "{stderr}"
    );

    let missing = server.dir().join("no-such-kubeconfig");
    let out = Command::new(plugin())
        .args(["status", "--kubeconfig"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&missing.display().to_string()));

    let out = mco(&server, &["status", "--context", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));

    let out = mco(&server, &["status", "-o", "wide"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "usage errors are clap's 2");
}

/// PATH with a directory holding only `kubectl-mco` first, as an installed plugin is found.
/// Not cargo's output directory itself: `kubectl plugin list` warns about, and fails on, every
/// `kubectl-*` name there that is not executable (cargo's `kubectl-mco.d` dependency file).
fn path_with_plugin(dir: &std::path::Path) -> std::ffi::OsString {
    let link = dir.join("kubectl-mco");
    if !link.exists() {
        std::os::unix::fs::symlink(plugin(), &link).unwrap();
    }
    std::env::join_paths(
        std::iter::once(dir.to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap()
}

#[test]
fn through_kubectl_plugin_mechanism() {
    let server = server();
    let bin = tempfile::tempdir().unwrap();
    let out = run(server
        .kubectl(server.kubeconfig())
        .args(["plugin", "list", "--name-only"])
        .env("PATH", path_with_plugin(bin.path())));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == "kubectl-mco"),
        "kubectl plugin list: {}",
        String::from_utf8_lossy(&out.stdout)
    );

    // kubectl passes the plugin everything after `mco`; the kubeconfig comes from KUBECONFIG
    // here, and the context and namespace flags after the subcommand, as kubectl users type them.
    let out = run(Command::new("kubectl")
        .args([
            "mco",
            "status",
            "-o",
            "json",
            "--context",
            "mco-test",
            "-n",
            "default",
        ])
        .env("PATH", path_with_plugin(bin.path()))
        .env("KUBECONFIG", server.kubeconfig())
        .env("HOME", server.dir()));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        node(pool(&status, "worker"), "worker-1")["state"],
        "Working"
    );
    assert_eq!(status["events"].as_array().unwrap().len(), 1);

    let out = run(Command::new("kubectl")
        .args(["mco", "nodes", "worker", "--kubeconfig"])
        .arg(server.kubeconfig())
        .env("PATH", path_with_plugin(bin.path()))
        .env("HOME", server.dir()));
    assert!(String::from_utf8_lossy(&out.stdout).contains("worker-2"));
}

/// Reads a child's stdout on a thread, so a test can wait for text with a timeout.
fn output_reader(mut stdout: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0
                || tx
                    .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                    .is_err()
            {
                break;
            }
        }
    });
    rx
}

fn wait_for(
    rx: &mpsc::Receiver<String>,
    seen: &mut String,
    what: &str,
    done: impl Fn(&str) -> bool,
) {
    let deadline = Instant::now() + PATIENCE;
    while !done(seen) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(chunk) => seen.push_str(&chunk),
            Err(_) => panic!("waited {PATIENCE:?} for {what}; the plugin printed:\n{seen}"),
        }
    }
}

fn states_of(text: &str, node_name: &str) -> Vec<String> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .map(|status| {
            node(pool(&status, "worker"), node_name)["state"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn watch_prints_again_as_the_rollout_moves() {
    let server = server();
    let mut child = mco(&server, &["status", "--watch", "-o", "json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = output_reader(child.stdout.take().unwrap());
    let mut seen = String::new();
    wait_for(&rx, &mut seen, "the first print", |s| {
        states_of(s, "worker-1") == ["Working"]
    });

    let a = "machineconfiguration.openshift.io/";
    server
        .patch(
            "nodes",
            None,
            "worker-1",
            &json!({"metadata": {"annotations": {format!("{a}state"): "Done", format!("{a}currentConfig"): "rendered-worker-2"}}}),
            Target::Main,
        )
        .unwrap();
    wait_for(&rx, &mut seen, "worker-1 Done after the patch", |s| {
        states_of(s, "worker-1") == ["Working", "Done"]
    });
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn colours_on_a_terminal_only() {
    let server = server();
    // script(1) runs the plugin on a pseudo-terminal.
    let command = format!(
        "{} nodes worker --kubeconfig {}",
        plugin().display(),
        server.kubeconfig().display()
    );
    let out = run(Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("NO_COLOR"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\x1b[31mDegraded\x1b[0m"), "{text:?}");
    assert!(text.contains("\x1b[32mDone\x1b[0m"), "{text:?}");

    let out = run(Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("NO_COLOR", "1"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
}
