//! First-boot bootstrap tokens with real clients: Debian's Ignition 2.14 sending the token in its
//! pointer config's `httpHeaders` gets its node's per-node config written to its root; a wrong
//! token stops Ignition's fetch with nothing written; curl shows the status codes (401 with a
//! reason that never repeats the token, and never a token over plain HTTP).

mod common;

use common::clients::{IgnitionRun, NODE_FILE, curl, pointer, served_paths};
use common::{Pki, Server, fixture_manifests};
use mco_companion::server::Limits;
use serde_json::{Value, json};

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

/// `pointer` with headers on its merge source.
fn pointer_with_headers(url: &str, ca_pem: &str, headers: &[(&str, &str)]) -> Value {
    let mut config = pointer(url, ca_pem);
    config["ignition"]["config"]["merge"][0]["httpHeaders"] = headers
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    config
}

#[test]
fn ignition_with_its_nodes_token_gets_the_per_node_config() {
    let pki = Pki::new();
    pki.add_bootstrap_token("worker-0", token());
    let server = Server::start(&pki, &fixture_manifests(), Limits::default());
    let bearer = format!("Bearer {}", token());
    let run = IgnitionRun::new();
    let out = run
        .run(&pointer_with_headers(
            &server.url("/config/worker"),
            &pki.ca_pem,
            &[("Authorization", &bearer), ("X-MCO-Node", "worker-0")],
        ))
        .unwrap_or_else(|(stage, out)| {
            panic!(
                "Ignition {stage} failed:\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
    assert!(String::from_utf8_lossy(&out.stdout).contains("files passed"));
    let node_file = run.root().join(NODE_FILE.trim_start_matches('/'));
    assert!(node_file.exists(), "worker-0's own file was not written");
    assert!(
        run.root().join("etc/mco-companion/hello.txt").exists(),
        "the pool's files come with it"
    );
}

#[test]
fn ignition_with_a_wrong_token_writes_nothing() {
    let pki = Pki::new();
    pki.add_bootstrap_token("worker-0", token());
    let server = Server::start(&pki, &fixture_manifests(), Limits::default());
    let run = IgnitionRun::new();
    let mut config = pointer_with_headers(
        &server.url("/config/worker"),
        &pki.ca_pem,
        &[
            ("Authorization", "Bearer 00000000000000000000000000000000"),
            ("X-MCO-Node", "worker-0"),
        ],
    );
    config["ignition"]["timeouts"] = json!({"httpTotal": 5});
    let (stage, out) = run
        .run(&config)
        .expect_err("Ignition must not get a config with a wrong token");
    assert_eq!(stage, "fetch");
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("GET result: Unauthorized"), "{log}");
    assert!(!run.root().join("etc/mco-companion/hello.txt").exists());
}

#[test]
fn curl_sees_the_token_rules() {
    let pki = Pki::new();
    pki.add_bootstrap_token("worker-0", token());
    let server = Server::start(&pki, &fixture_manifests(), Limits::default());
    let url = server.url("/config/worker");
    let ca = pki.ca();
    let ca = ca.to_str().unwrap();
    let bearer = format!("Authorization: Bearer {}", token());
    let accept = "Accept: application/vnd.coreos.ignition+json;version=3.4.0";
    let get = |url: &str, extra: &[&str]| {
        let mut args = vec!["--cacert", ca, "-H", accept, "-w", "\n%{http_code}"];
        args.extend_from_slice(extra);
        args.push(url);
        let out = curl(&args);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
        (code.to_string(), body.to_string())
    };

    let (code, body) = get(&url, &["-H", &bearer, "-H", "X-MCO-Node: worker-0"]);
    assert_eq!(code, "200", "{body}");
    assert!(served_paths(body.as_bytes()).contains(&NODE_FILE.to_string()));

    let by_query = format!("{url}?node=worker-0");
    let (code, body) = get(&by_query, &["-H", &bearer]);
    assert_eq!(code, "200", "{body}");
    assert!(served_paths(body.as_bytes()).contains(&NODE_FILE.to_string()));

    // worker-0's token does not prove worker-1
    let (code, body) = get(&url, &["-H", &bearer, "-H", "X-MCO-Node: worker-1"]);
    assert_eq!(code, "401", "{body}");
    assert!(
        body.contains("worker-1") && !body.contains(token()),
        "{body}"
    );

    // a token without a node name
    let (code, body) = get(&url, &["-H", &bearer]);
    assert_eq!(code, "401", "{body}");
    assert!(
        body.contains("X-MCO-Node") || body.contains("x-mco-node"),
        "{body}"
    );

    // over plain HTTP: refused, even when right
    let plain = format!(
        "http://127.0.0.1:{}/config/worker?node=worker-0",
        server.insecure_port
    );
    let (code, body) = get(&plain, &["-H", &bearer]);
    assert_eq!(code, "401", "{body}");
    assert!(body.contains("only over HTTPS"), "{body}");

    // no credentials: the pool's config, as the MCS serves it
    let (code, body) = get(&url, &["-H", "X-MCO-Node: worker-0"]);
    assert_eq!(code, "200", "{body}");
    assert!(!served_paths(body.as_bytes()).contains(&NODE_FILE.to_string()));
}

/// `mco-companion bootstrap-token` makes a token the server takes; a token of the old form
/// (no expiry inside) is refused under a lifetime, whatever its file's age: a Secret volume
/// rewrites its files and would renew it.
#[test]
fn the_clis_token_is_taken_and_a_token_without_expiry_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mco-companion"))
        .args(["bootstrap-token", "--hours", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let minted = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(minted.starts_with("mco1."), "{minted}");
    let pki = Pki::new();
    pki.add_bootstrap_token("worker-0", &minted);
    pki.add_bootstrap_token("worker-1", "3f1c0e9b7a52d4e8c6b1a0f9e8d7c6b5");
    let server = Server::start(&pki, &fixture_manifests(), Limits::default());
    let url = server.url("/config/worker");
    let ca = pki.ca();
    let status = |node: &str, token: &str| {
        let bearer = format!("Authorization: Bearer {token}");
        let node = format!("X-MCO-Node: {node}");
        let out = curl(&[
            "--cacert",
            ca.to_str().unwrap(),
            "-H",
            "Accept: application/vnd.coreos.ignition+json;version=3.4.0",
            "-H",
            &bearer,
            "-H",
            &node,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &url,
        ]);
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(status("worker-0", &minted), "200");
    assert_eq!(
        status("worker-1", "3f1c0e9b7a52d4e8c6b1a0f9e8d7c6b5"),
        "401"
    );
}
