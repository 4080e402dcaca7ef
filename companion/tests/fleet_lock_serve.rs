//! FleetLock on `mco-companion serve` (standalone, the real binary over TLS), spoken to by the
//! agent's own FleetLock client: holders survive a restart of the companion (even a SIGKILL),
//! locks are recursive and owned, and the answers follow the protocol for any client (curl);
//! with `--client-ca`, only nodes that prove their names, each for itself, never over plain
//! HTTP, and only in known groups.

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
    start_with(pki, port, state, &[])
}

fn start_with(pki: &Pki, port: u16, state: &Path, extra: &[&str]) -> Companion {
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
        .args(extra)
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
    let a = r#"{"client_params":{"id":"c988d2509fdf4cdcbed39037c56406fb","group":"worker"}}"#;
    let b = r#"{"client_params":{"id":"other","group":"worker"}}"#;
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

/// With `--client-ca`: a node's kubelet certificate locks and unlocks its own slot; no one
/// else (no certificate, an admin's certificate, another node's, the plain-HTTP listener) can
/// give that slot back or take the group; unknown groups are refused; the refusal of a full
/// group names no holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_client_authentication_only_nodes_lock_and_only_their_own_slots() {
    let pki = Pki::new();
    let state = pki.dir.path().join("fleet-lock.json");
    let (port, plain) = (free_port(), free_port());
    let insecure = format!("127.0.0.1:{plain}");
    let client_ca = pki.client_ca();
    let _companion = start_with(
        &pki,
        port,
        &state,
        &[
            "--client-ca",
            client_ca.to_str().unwrap(),
            "--insecure-listen",
            &insecure,
        ],
    );
    let url = format!("https://127.0.0.1:{port}");
    let node = |name: &str, group: &str| {
        let cert = pki.client_cert(&format!("system:node:{name}"), "system:nodes");
        FleetLockClient::new(&url, Some(&pki.ca()), Some(&cert), false, name, group).unwrap()
    };
    let (m0, m1) = (node("master-0", "infra"), node("master-1", "worker"));
    assert_eq!(m0.pre_reboot().await.unwrap(), LockAnswer::Ok);
    assert_eq!(m1.pre_reboot().await.unwrap(), LockAnswer::Ok);
    let m2 = node("master-2", "worker");
    let refused = m2.pre_reboot().await.unwrap();
    assert!(full(refused.clone()), "{refused:?}");
    assert!(
        !format!("{refused:?}").contains("master-1"),
        "the refusal names the holder: {refused:?}"
    );

    let admin = pki.client_cert("system:admin", "system:masters");
    let curl = |scheme_port: &str, cert: Option<&Path>, body: &str| -> (String, String) {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--max-time", "5", "-w", "\n%{http_code}", "--cacert"])
            .arg(pki.ca())
            .args(["-X", "POST", "-H", "fleet-lock-protocol: true", "-d", body]);
        if let Some(cert) = cert {
            cmd.arg("--cert").arg(cert);
        }
        let out = cmd
            .arg(format!("{scheme_port}/v1/steady-state"))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.to_string(), body.to_string())
    };
    let release_m1 = r#"{"client_params":{"id":"master-1","group":"worker"}}"#;
    let m0_cert = pki.client_cert("system:node:master-0", "system:nodes");
    let tls = format!("https://127.0.0.1:{port}");
    let http = format!("http://127.0.0.1:{plain}");
    for (what, base, cert, code, part) in [
        ("no certificate", &tls, None, "401", "prove their names"),
        (
            "an admin's certificate",
            &tls,
            Some(admin.as_path()),
            "401",
            "is not system:node:NAME",
        ),
        ("plain HTTP", &http, None, "401", "plain HTTP"),
        (
            "another node's certificate",
            &tls,
            Some(m0_cert.as_path()),
            "403",
            "proved to be node",
        ),
    ] {
        let (got, text) = curl(base, cert, release_m1);
        assert_eq!(got, code, "{what}: {text}");
        assert!(text.contains(part), "{what}: {text}");
    }
    assert!(
        full(m2.pre_reboot().await.unwrap()),
        "master-1's slot was given back by someone else"
    );
    // a group no pool has is refused, even to a proven node
    let ghost = node("master-0", "ghost").pre_reboot().await.unwrap();
    assert!(
        matches!(&ghost, LockAnswer::Refused { kind: Some(k), .. } if k == "invalid_client_params"),
        "{ghost:?}"
    );
    assert_eq!(m1.steady_state().await.unwrap(), LockAnswer::Ok);
    assert_eq!(m2.pre_reboot().await.unwrap(), LockAnswer::Ok);
}

/// 32 clients (each its own address) send FleetLock requests' headers and then their bodies a
/// byte at a time, filling every connection slot (`--max-connections 32`): each is cut off at
/// the whole-request deadline, so a booting machine's fetch of its pool's config, queued behind
/// them, is answered. Without the deadline the slow bodies hold their slots forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_bodies_cannot_lock_out_a_booting_machines_fetch() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pki = Pki::new();
    let state = pki.dir.path().join("fleet-lock.json");
    let port = free_port();
    let _companion = start_with(
        &pki,
        port,
        &state,
        &["--max-connections", "32", "--request-timeout", "2"],
    );
    let head = b"POST /v1/pre-reboot HTTP/1.1\r\nHost: x\r\nfleet-lock-protocol: true\r\n\
                 Content-Length: 4000\r\nExpect: 100-continue\r\n\r\n";
    let mut slow = Vec::new();
    for i in 2..34u8 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, i], 0).into()).unwrap();
        let stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
        stream.set_nodelay(true).unwrap();
        slow.push(stream);
    }
    let connector = tls_connector(&pki);
    let mut held = Vec::new();
    for (i, stream) in slow.into_iter().enumerate() {
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls =
            tokio::time::timeout(Duration::from_secs(30), connector.connect(name, stream))
                .await
                .unwrap_or_else(|_| panic!("slow client {i}: the TLS handshake within 30 s"))
                .unwrap();
        tls.write_all(head).await.unwrap();
        // the server asks for the body: this connection holds a slot in the body's read
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        while !String::from_utf8_lossy(&seen).contains("100 Continue") {
            let n = tokio::time::timeout(Duration::from_secs(30), tls.read(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("slow client {i}: 100 Continue within 30 s"))
                .unwrap();
            assert!(n > 0, "slow client {i}: closed before asking for the body");
            seen.extend_from_slice(&buf[..n]);
        }
        tls.write_all(b"{").await.unwrap();
        held.push(tls);
    }
    // each keeps sending a byte of its body now and then, never finishing it
    let drip = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            for tls in &mut held {
                let _cut_off = tls.write_all(b" ").await;
            }
        }
    });

    // the real fetch, from an address of its own, as a booting machine makes it
    let ca = pki.ca();
    let url = format!("https://127.0.0.1:{port}/config/worker");
    let started = Instant::now();
    let fetched = tokio::task::spawn_blocking(move || {
        Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "20",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
            ])
            .arg("--cacert")
            .arg(ca)
            .arg(url)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&fetched.stdout),
        "200",
        "the booting machine's fetch was not answered within 20 s while 32 slow bodies held \
         every slot: {}",
        String::from_utf8_lossy(&fetched.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    drip.abort();
}

fn tls_connector(pki: &Pki) -> tokio_rustls::TlsConnector {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile_certs(&pki.ca_pem) {
        roots.add(cert).unwrap();
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}

fn rustls_pemfile_certs(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|c| c.unwrap())
        .collect()
}
