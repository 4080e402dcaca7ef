//! Real clients against the TLS config server: Debian's Ignition 2.14 (fetch + files stages into
//! a temp root, compared with the rendered config) and curl (with the right CA, none, a wrong
//! one; with and without a node's client certificate, a certificate that names no node, one from
//! another CA; naming a rendered config). Both are installed by `tests/setup.sh`.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use base64::Engine;
use common::clients::{IgnitionRun, NODE_FILE, curl, pointer, served_paths};
use common::{Pki, Server, fixture_manifests, issue};
use machine_config::MachineConfig;
use machine_config::SpecVersion;
use machine_config::mco::paths::{ENCAPSULATED, NODE_ANNOTATIONS, SERVED_CONTENT};
use mco_companion::server::{Limits, PoolRequest};
use serde_json::{Value, json};

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn ignition_fetches_over_tls_and_writes_the_rendered_config() {
    let pki = Pki::new();
    let server = Server::start(&pki, &fixture_manifests(), Limits::default());
    let run = IgnitionRun::new();
    let out = run
        .run(&pointer(
            &server.url("/config/worker?node=worker-0"),
            &pki.ca_pem,
        ))
        .unwrap_or_else(|(stage, out)| {
            panic!(
                "Ignition {stage} failed:\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
    assert!(String::from_utf8_lossy(&out.stdout).contains("files passed"));
    let root = run.root();

    let snapshot = server.source.snapshot();
    let rendered = snapshot
        .config_for(&PoolRequest {
            pool: "worker".into(),
            node: None,
            config: None,
            spec: SpecVersion::V3_3,
        })
        .unwrap()
        .clone();
    let config = rendered.ignition().unwrap();
    assert!(config.storage.files.len() >= 3);
    for file in &config.storage.files {
        let on_disk = root.join(file.path.trim_start_matches('/'));
        let want = file.decoded_contents().unwrap();
        assert_eq!(fs::read(&on_disk).unwrap(), want, "{}", file.path);
        assert_eq!(
            mode_of(&on_disk),
            file.mode.unwrap_or(0o644) as u32,
            "{}",
            file.path
        );
    }
    for unit in &config.systemd.units {
        let unit_path = root.join("etc/systemd/system").join(&unit.name);
        assert_eq!(
            fs::read_to_string(&unit_path).unwrap(),
            unit.contents.clone().unwrap()
        );
        for dropin in &unit.dropins {
            let p = root.join(format!(
                "etc/systemd/system/{}.d/{}",
                unit.name, dropin.name
            ));
            assert_eq!(
                fs::read_to_string(p).unwrap(),
                dropin.contents.clone().unwrap()
            );
        }
    }
    let preset =
        fs::read_to_string(root.join("etc/systemd/system-preset/20-ignition.preset")).unwrap();
    assert!(preset.contains("enable mco-demo.service"), "{preset}");
    let keys = fs::read_to_string(root.join("home/core/.ssh/authorized_keys.d/ignition")).unwrap();
    assert!(keys.contains("CompanionExampleKeyOnlyForTests"), "{keys}");
    // `?node=worker-0` only claims a name: Ignition proves none, so it gets the pool's config
    // and never worker-0's own file
    assert!(!root.join("etc/mco-companion/node.txt").exists());
    assert_eq!(
        fs::read_to_string(root.join("etc/mco-companion/zipped.txt")).unwrap(),
        "hello"
    );

    // the appended files, as the node's first boot will read them
    let annotations: Value = serde_json::from_slice(
        &fs::read(root.join(NODE_ANNOTATIONS.trim_start_matches('/'))).unwrap(),
    )
    .unwrap();
    assert_eq!(
        annotations["machineconfiguration.openshift.io/currentConfig"],
        rendered.name()
    );
    assert_eq!(
        annotations["machineconfiguration.openshift.io/state"],
        "Done"
    );
    let content = MachineConfig::from_slice(
        &fs::read(root.join(SERVED_CONTENT.trim_start_matches('/'))).unwrap(),
    )
    .unwrap();
    assert_eq!(content, rendered);
    let encapsulated = MachineConfig::from_slice(
        &fs::read(root.join(ENCAPSULATED.trim_start_matches('/'))).unwrap(),
    )
    .unwrap();
    // Ignition 2.14 asks for spec 3.3.0
    assert_eq!(
        encapsulated.spec.config.map(|c| c.to_value().unwrap()),
        Some(json!({"ignition": {"version": "3.3.0"}}))
    );
    assert_eq!(encapsulated.spec.kernel_arguments, ["nosmt"]);
    for appended in [NODE_ANNOTATIONS, SERVED_CONTENT, ENCAPSULATED] {
        assert_eq!(
            mode_of(&root.join(appended.trim_start_matches('/'))),
            if appended == SERVED_CONTENT {
                0o600
            } else {
                0o644
            },
            "{appended}"
        );
    }
}

#[test]
fn ignition_refuses_a_server_signed_by_another_ca() {
    let pki = Pki::new();
    let server = Server::start(&pki, &fixture_manifests(), Limits::default());
    let (other_ca, _, _) = issue("some other CA");
    let run = IgnitionRun::new();
    let (stage, out) = run
        .run(&json!({
            "ignition": {"version": "3.2.0", "timeouts": {"httpTotal": 5},
                "config": {"merge": [{"source": server.url("/config/worker")}]},
                "security": {"tls": {"certificateAuthorities": [{"source": format!(
                    "data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(other_ca))}]}}}
        }))
        .expect_err("Ignition must not trust a certificate from another CA");
    assert_eq!(stage, "fetch");
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("certificate signed by unknown authority"),
        "{log}"
    );
    assert!(!run.root().join("etc/mco-companion/hello.txt").exists());
}

#[test]
fn curl_with_without_and_with_the_wrong_ca() {
    let pki = Pki::new();
    let server = Server::start(&pki, &fixture_manifests(), Limits::default());
    let url = server.url("/config/worker");
    let ca = pki.ca();
    let ca = ca.to_str().unwrap();

    let ok = curl(&[
        "--cacert",
        ca,
        "-H",
        "Accept: application/vnd.coreos.ignition+json;version=3.1.0",
        &url,
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let config: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(config["ignition"]["version"], "3.1.0");

    // plain curl (Accept: */*) gets spec 2.2.0, like the MCS
    let v2_body = curl(&["--cacert", ca, &url]).stdout;
    let v2: Value = serde_json::from_slice(&v2_body).unwrap();
    assert_eq!(v2["ignition"]["version"], "2.2.0");

    let head = curl(&["--cacert", ca, "-I", &url]);
    let head = String::from_utf8_lossy(&head.stdout).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(
        head.contains(&format!("content-length: {}\r\n", v2_body.len())),
        "{head}"
    );

    let none = curl(&[&url]);
    assert_eq!(
        none.status.code(),
        Some(60),
        "no CA: {}",
        String::from_utf8_lossy(&none.stderr)
    );

    let other = tempfile::NamedTempFile::new().unwrap();
    fs::write(other.path(), issue("wrong CA").0).unwrap();
    let wrong = curl(&["--cacert", other.path().to_str().unwrap(), &url]);
    assert_eq!(
        wrong.status.code(),
        Some(60),
        "wrong CA: {}",
        String::from_utf8_lossy(&wrong.stderr)
    );

    // TLS below 1.2 is refused; HTTP/2 is not offered
    let old = curl(&["--cacert", ca, "--tlsv1.1", "--tls-max", "1.1", &url]);
    assert!(!old.status.success());
    let h2 = curl(&[
        "--cacert",
        ca,
        "--http2",
        "-o",
        "/dev/null",
        "-w",
        "%{http_version}",
        &server.url("/healthz"),
    ]);
    assert_eq!(String::from_utf8_lossy(&h2.stdout), "1.1");
}

#[test]
fn curl_gets_a_per_node_config_only_with_that_nodes_client_certificate() {
    let pki = Pki::new();
    let server = Server::start(&pki, &fixture_manifests(), Limits::default());
    let url = server.url("/config/worker");
    let ca = pki.ca();
    let ca = ca.to_str().unwrap();
    let accept = "Accept: application/vnd.coreos.ignition+json;version=3.4.0";
    let get = |extra: &[&str]| {
        let mut args = vec!["--cacert", ca, "-H", accept, "-w", "\n%{http_code}"];
        args.extend_from_slice(extra);
        args.push(&url);
        let out = curl(&args);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
        (out, code.to_string(), body.to_string())
    };
    let worker_0 = pki.client_cert("system:node:worker-0", "system:nodes");
    let worker_0 = worker_0.to_str().unwrap();

    // the node's own certificate: its per-node config
    let (_, code, body) = get(&["--cert", worker_0]);
    assert_eq!(code, "200", "{body}");
    assert!(served_paths(body.as_bytes()).contains(&NODE_FILE.to_string()));

    // claimed, not proven: the pool's config, as the MCS would serve it
    for claim in [vec!["-H", "X-MCO-Node: worker-0"], vec![]] {
        let (_, code, body) = get(&claim);
        assert_eq!(code, "200", "{body}");
        assert!(!served_paths(body.as_bytes()).contains(&NODE_FILE.to_string()));
    }
    let claimed_by_query = curl(&[
        "--cacert",
        ca,
        "-H",
        accept,
        &format!("{url}?node=worker-0"),
    ]);
    assert!(!served_paths(&claimed_by_query.stdout).contains(&NODE_FILE.to_string()));

    // a certificate of the client CA that names no node proves nothing
    let admin = pki.client_cert("system:admin", "system:masters");
    let (_, code, body) = get(&[
        "--cert",
        admin.to_str().unwrap(),
        "-H",
        "X-MCO-Node: worker-0",
    ]);
    assert_eq!(code, "200", "{body}");
    assert!(!served_paths(body.as_bytes()).contains(&NODE_FILE.to_string()));

    // another node's certificate with worker-0's name claimed: refused
    let worker_1 = pki.client_cert("system:node:worker-1", "system:nodes");
    let (_, code, body) = get(&[
        "--cert",
        worker_1.to_str().unwrap(),
        "-H",
        "X-MCO-Node: worker-0",
    ]);
    assert_eq!(code, "400");
    assert!(body.contains("worker-1"), "{body}");

    // a node certificate from another CA: the handshake fails
    let other_ca = mco_test_support::tls::TestCa::new("another cluster").unwrap();
    let forged = Pki::client_cert_from(&other_ca, &pki.dir, "system:node:worker-0", "system:nodes");
    let (out, _, _) = get(&["--cert", forged.to_str().unwrap()]);
    assert!(
        !out.status.success(),
        "a certificate of another CA was accepted"
    );

    // the plain-HTTP listener never serves a per-node config
    let plain = curl(&[
        "-H",
        accept,
        &format!(
            "http://127.0.0.1:{}/config/worker?node=worker-0",
            server.insecure_port
        ),
    ]);
    assert!(!served_paths(&plain.stdout).contains(&NODE_FILE.to_string()));
}

#[test]
fn curl_naming_a_rendered_config_gets_it_or_a_reason() {
    let pki = Pki::new();
    let server = Server::start(&pki, &fixture_manifests(), Limits::default());
    let url = server.url("/config/worker");
    let ca = pki.ca();
    let ca = ca.to_str().unwrap();
    let snapshot = server.source.snapshot();
    let name_of = |pool: &str, node: Option<&str>| {
        let render = &snapshot.pools[pool];
        let mc = match node {
            Some(n) => &render.nodes[n],
            None => &render.rendered,
        };
        mc.as_ref().unwrap().name().to_string()
    };
    let get = |config: &str, extra: &[&str]| {
        let header = format!("X-MCO-Config: {config}");
        let mut args = vec!["--cacert", ca, "-H", &header, "-w", "\n%{http_code}"];
        args.extend_from_slice(extra);
        args.push(&url);
        let text = String::from_utf8_lossy(&curl(&args).stdout).to_string();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.to_string(), body.to_string())
    };

    let pool_config = name_of("worker", None);
    let (code, body) = get(&pool_config, &[]);
    assert_eq!(code, "200", "{body}");
    assert!(body.contains(&pool_config));

    let own = name_of("worker", Some("worker-0"));
    let (code, body) = get(&own, &["-H", "X-MCO-Node: worker-0"]);
    assert_eq!(code, "403", "{body}");
    assert!(body.contains(&own) && body.contains("worker-0"), "{body}");
    let cert = pki.client_cert("system:node:worker-0", "system:nodes");
    let (code, body) = get(&own, &["--cert", cert.to_str().unwrap()]);
    assert_eq!(code, "200", "{body}");
    assert!(served_paths(body.as_bytes()).contains(&NODE_FILE.to_string()));

    let (code, body) = get(&name_of("infra", None), &[]);
    assert_eq!(code, "403", "{body}");
    assert!(body.contains("pool \"infra\""), "{body}");

    let (code, body) = get("rendered-worker-0123456789abcdef", &[]);
    assert_eq!(code, "404", "{body}");
    assert!(
        body.contains("rendered-worker-0123456789abcdef") && body.contains("\"worker\""),
        "{body}"
    );
}
