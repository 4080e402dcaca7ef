//! FleetLock on `mco-companion serve` (standalone, the real binary over TLS), spoken to by the
//! agent's own FleetLock client: holders survive a restart of the companion (even a SIGKILL),
//! locks are recursive and owned, and the answers follow the protocol for any client (curl).

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Pki, fixture_manifests};
use mco_agent::strategy::fleet_lock::{FleetLockClient, LockAnswer};

struct Companion(Child);

impl Drop for Companion {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(pki: &Pki, port: u16, state: &Path) -> Companion {
    let child = Command::new(env!("CARGO_BIN_EXE_mco-companion"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--manifests")
        .arg(fixture_manifests())
        .arg("--cert")
        .arg(pki.cert())
        .arg("--key")
        .arg(pki.key())
        .arg("--fleet-lock-state")
        .arg(state)
        .args(["--fleet-lock-group-slots", "infra=2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the companion does not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    Companion(child)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn full(answer: LockAnswer) -> bool {
    matches!(answer, LockAnswer::Refused { kind: Some(k), .. } if k == "failed_lock_semaphore_full")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_survive_a_companion_restart() {
    let pki = Pki::new();
    let state = pki.dir.path().join("fleet-lock.json");
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let client = |id: &str, group: &str| {
        FleetLockClient::new(&url, Some(&pki.ca()), None, false, id, group).unwrap()
    };
    let (a, b) = (client("node-a", "worker"), client("node-b", "worker"));
    let companion = start(&pki, port, &state);
    assert_eq!(a.pre_reboot().await.unwrap(), LockAnswer::Ok);
    assert!(full(b.pre_reboot().await.unwrap()));
    // two slots for infra
    let (i1, i2, i3) = (
        client("i1", "infra"),
        client("i2", "infra"),
        client("i3", "infra"),
    );
    assert_eq!(i1.pre_reboot().await.unwrap(), LockAnswer::Ok);
    assert_eq!(i2.pre_reboot().await.unwrap(), LockAnswer::Ok);
    assert!(full(i3.pre_reboot().await.unwrap()));

    // SIGKILL, and a new process over the same state file
    drop(companion);
    let _companion = start(&pki, port, &state);
    assert!(
        full(b.pre_reboot().await.unwrap()),
        "the restart forgot node-a's slot"
    );
    assert_eq!(a.pre_reboot().await.unwrap(), LockAnswer::Ok, "recursive");
    assert_eq!(
        b.steady_state().await.unwrap(),
        LockAnswer::Ok,
        "not held: fine"
    );
    assert!(
        full(b.pre_reboot().await.unwrap()),
        "only node-a gives its slot back"
    );
    assert_eq!(a.steady_state().await.unwrap(), LockAnswer::Ok);
    assert_eq!(b.pre_reboot().await.unwrap(), LockAnswer::Ok);
    assert!(full(i3.pre_reboot().await.unwrap()));
}

/// What a client other than the agent (Zincati, curl) sees.
#[test]
fn the_answers_for_any_client() {
    let pki = Pki::new();
    let state = pki.dir.path().join("fleet-lock.json");
    let port = free_port();
    let _companion = start(&pki, port, &state);
    let curl = |path: &str, header: bool, body: &str| -> (String, String) {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--max-time", "5", "-w", "\n%{http_code}", "--cacert"])
            .arg(pki.ca())
            .args(["-X", "POST", "-d", body]);
        if header {
            cmd.args(["-H", "fleet-lock-protocol: true"]);
        }
        let out = cmd
            .arg(format!("https://127.0.0.1:{port}{path}"))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.to_string(), body.to_string())
    };
    let a = r#"{"client_params":{"id":"c988d2509fdf4cdcbed39037c56406fb","group":"workers"}}"#;
    let b = r#"{"client_params":{"id":"other","group":"workers"}}"#;
    let rows: &[(&str, bool, &str, &str, &str)] = &[
        ("/v1/pre-reboot", true, a, "200", ""),
        (
            "/v1/pre-reboot",
            true,
            b,
            "409",
            r#""kind":"failed_lock_semaphore_full""#,
        ),
        (
            "/v1/pre-reboot",
            false,
            b,
            "400",
            r#""kind":"invalid_missing_protocol_header""#,
        ),
        (
            "/v1/pre-reboot",
            true,
            "{}",
            "400",
            r#""kind":"invalid_client_params""#,
        ),
        ("/v1/steady-state", true, a, "200", ""),
        ("/v1/pre-reboot", true, b, "200", ""),
    ];
    for (path, header, body, code, part) in rows {
        let (got, text) = curl(path, *header, body);
        assert_eq!(
            (got.as_str(), text.contains(part)),
            (*code, true),
            "{path} {body}: {text}"
        );
        if !part.is_empty() {
            let e: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(!e["value"].as_str().unwrap().is_empty(), "{text}");
        }
    }
}
