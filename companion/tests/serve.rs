//! The config server over real TLS connections: every spec, status codes, HEAD, node identity,
//! appended files decoded, and hostile or broken clients that must not hurt it.

mod common;

use std::time::Duration;

use common::{Pki, Server, decoded_files, fixture_manifests};
use machine_config::mco::paths::{ENCAPSULATED, NODE_ANNOTATIONS, SERVED_CONTENT};
use machine_config::{MachineConfig, SpecVersion};
use mco_companion::server::Limits;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn client(pki: &Pki) -> reqwest::Client {
    install_ring();
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).unwrap()])
        .http1_only()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn install_ring() {
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}

fn accept(spec: SpecVersion) -> String {
    format!("application/vnd.coreos.ignition+json;version={spec}, */*;q=0.1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spec_with_appended_files() {
    let pki = Pki::new();
    let server = Server::start_async(&pki, &fixture_manifests(), Limits::default()).await;
    let client = client(&pki);
    let rendered = server
        .source
        .snapshot()
        .config_for(&mco_companion::server::PoolRequest {
            pool: "worker".into(),
            node: None,
            config: None,
            spec: SpecVersion::V2_2,
        })
        .unwrap()
        .clone();
    for spec in SpecVersion::ALL {
        let response = client
            .get(server.url("/config/worker"))
            .header("Accept", accept(spec))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{spec}");
        assert_eq!(response.headers()["content-type"], "application/json");
        let length: usize = response.headers()["content-length"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let body = response.bytes().await.unwrap();
        assert_eq!(body.len(), length);
        let config: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(config["ignition"]["version"], spec.to_string());

        let files = decoded_files(&config);
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            &paths[paths.len() - 3..],
            [NODE_ANNOTATIONS, SERVED_CONTENT, ENCAPSULATED],
            "{spec}: appended last, encapsulated at the very end"
        );
        let contents = |p: &str| files.iter().find(|(path, _)| path == p).unwrap().1.clone();
        assert_eq!(
            contents("/etc/mco-companion/hello.txt"),
            b"hello from the companion\n"
        );
        assert_eq!(contents("/etc/mco-companion/zipped.txt"), b"hello");
        assert_eq!(contents("/etc/mco-companion/secret.conf"), b"key=value\n");
        let annotations: Value = serde_json::from_slice(&contents(NODE_ANNOTATIONS)).unwrap();
        assert_eq!(
            annotations["machineconfiguration.openshift.io/desiredConfig"],
            rendered.name()
        );
        let encapsulated = MachineConfig::from_slice(&contents(ENCAPSULATED)).unwrap();
        assert_eq!(
            encapsulated
                .spec
                .config
                .as_ref()
                .map(|c| c.to_value().unwrap()),
            Some(json!({"ignition": {"version": spec.to_string()}}))
        );
        assert_eq!(encapsulated.name(), rendered.name());
        assert_eq!(
            MachineConfig::from_slice(&contents(SERVED_CONTENT))
                .unwrap()
                .name(),
            rendered.name()
        );

        let head = client
            .head(server.url("/config/worker"))
            .header("Accept", accept(spec))
            .send()
            .await
            .unwrap();
        assert_eq!(head.status(), StatusCode::OK);
        assert_eq!(
            head.headers()["content-length"].to_str().unwrap(),
            length.to_string()
        );
        assert!(head.bytes().await.unwrap().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_codes_and_node_identity_over_the_wire() {
    let pki = Pki::new();
    let server = Server::start_async(&pki, &fixture_manifests(), Limits::default()).await;
    let client = client(&pki);
    let status =
        |method: reqwest::Method, path: &str, headers: Vec<(&'static str, &'static str)>| {
            let mut request = client.request(method, server.url(path));
            for (k, v) in headers {
                request = request.header(k, v);
            }
            async move { request.send().await.unwrap().status() }
        };
    use reqwest::Method;
    assert_eq!(
        status(Method::GET, "/healthz", vec![]).await,
        StatusCode::OK
    );
    assert_eq!(
        status(Method::POST, "/healthz", vec![]).await,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        status(Method::GET, "/config/nope", vec![]).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status(Method::PUT, "/config/worker", vec![]).await,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        status(Method::GET, "/", vec![]).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status(Method::DELETE, "/", vec![]).await,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        status(
            Method::GET,
            "/config/worker",
            vec![(
                "Accept",
                "application/vnd.coreos.ignition+json;version=4.0.0"
            )]
        )
        .await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        status(
            Method::GET,
            "/config/worker?node=a",
            vec![("X-MCO-Node", "b")]
        )
        .await,
        StatusCode::BAD_REQUEST
    );

    let files_for = |path: &'static str, header: Option<&'static str>| {
        let mut request = client
            .get(server.url(path))
            .header("Accept", accept(SpecVersion::V3_4));
        if let Some(node) = header {
            request = request.header("X-MCO-Node", node);
        }
        async move {
            let body: Value = request.send().await.unwrap().json().await.unwrap();
            decoded_files(&body)
                .into_iter()
                .map(|(p, _)| p)
                .collect::<Vec<_>>()
        }
    };
    // a claimed name proves nothing: the pool's config (real_clients.rs proves one with curl)
    let node_file = "/etc/mco-companion/node.txt".to_string();
    assert!(
        !files_for("/config/worker?node=worker-0", None)
            .await
            .contains(&node_file)
    );
    assert!(
        !files_for("/config/worker", Some("worker-0"))
            .await
            .contains(&node_file)
    );
    assert!(
        !files_for("/config/worker", Some("worker-1"))
            .await
            .contains(&node_file)
    );
    assert!(!files_for("/config/worker", None).await.contains(&node_file));
}

/// Sends raw bytes on a plain connection and returns what the server answered before closing.
async fn raw_exchange(port: u16, request: &[u8], linger: Duration) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(linger, stream.read_to_end(&mut out)).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_slow_clients_do_not_hurt_the_server() {
    let pki = Pki::new();
    let limits = Limits {
        handshake_timeout: Duration::from_millis(500),
        header_read_timeout: Duration::from_millis(500),
        max_header_bytes: 8192,
        max_headers: 32,
        ..Limits::default()
    };
    let server = Server::start_async(&pki, &fixture_manifests(), limits).await;
    let plain = server.insecure_port;
    let wait = Duration::from_secs(5);

    let garbage = raw_exchange(plain, b"\x00\x01\x02 NOT HTTP AT ALL\r\n\r\n", wait).await;
    assert!(
        garbage.starts_with(b"HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&garbage)
    );

    let huge = format!(
        "GET /config/worker HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let answer = raw_exchange(plain, huge.as_bytes(), wait).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    let many: String = (0..100).map(|i| format!("X-H{i}: v\r\n")).collect();
    let answer = raw_exchange(
        plain,
        format!("GET /healthz HTTP/1.1\r\nHost: x\r\n{many}\r\n").as_bytes(),
        wait,
    )
    .await;
    assert!(
        answer.starts_with(b"HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    // a client that never finishes its headers is dropped after the header timeout
    let started = std::time::Instant::now();
    let slow = raw_exchange(plain, b"GET /config/worker HTTP/1.1\r\nHost: x\r\n", wait).await;
    assert!(
        started.elapsed() < wait,
        "the server closed the idle connection"
    );
    assert!(
        slow.is_empty() || slow.starts_with(b"HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&slow)
    );

    // on the TLS port: plain HTTP, then a client that never handshakes
    let plaintext = raw_exchange(
        server.port,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        wait,
    )
    .await;
    assert!(!plaintext.starts_with(b"HTTP/1.1 200"));
    let started = std::time::Instant::now();
    let silent = raw_exchange(server.port, b"", wait).await;
    assert!(
        silent.is_empty() && started.elapsed() < wait,
        "handshake timeout closes the connection"
    );

    // an HTTP/1.0 request and a request with a body still work; the server is alive
    let old = raw_exchange(plain, b"GET /healthz HTTP/1.0\r\n\r\n", wait).await;
    assert!(
        old.starts_with(b"HTTP/1.0 200") || old.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&old)
    );
    let with_body = raw_exchange(
        plain,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        wait,
    )
    .await;
    assert!(
        with_body.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&with_body)
    );
    let response = client(&pki)
        .get(server.url("/config/worker"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_without_restart() {
    let pki = Pki::new();
    let server = Server::start_async(&pki, &fixture_manifests(), Limits::default()).await;
    let (new_ca, new_cert, new_key) = common::issue("rotated CA");
    std::fs::write(pki.key(), new_key).unwrap();
    std::fs::write(pki.cert(), new_cert).unwrap();
    install_ring();
    let trusting_new = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(new_ca.as_bytes()).unwrap()])
        .http1_only()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    // the files are looked at again at most every 2 s
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match trusting_new.get(server.url("/healthz")).send().await {
            Ok(response) => {
                assert_eq!(response.status(), StatusCode::OK);
                break;
            }
            Err(err) => assert!(
                std::time::Instant::now() < deadline,
                "still the old certificate: {err}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let trusting_old = client(&pki);
    assert!(
        trusting_old
            .get(server.url("/healthz"))
            .send()
            .await
            .is_err()
    );
}

/// A client that opens connections and never reads the responses holds at most its own cap of
/// connections, and each only until the write timeout: then another connection from it is
/// served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_capped_and_dropped() {
    let pki = Pki::new();
    let limits = Limits {
        max_connections_per_client: 1,
        write_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = Server::start_async(&pki, &fixture_manifests(), limits).await;
    let plain = server.insecure_port;
    let healthz = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

    // Pipelined requests whose responses fill the socket buffers: the server's writes stall.
    let mut hog = TcpStream::connect(("127.0.0.1", plain)).await.unwrap();
    let request = b"GET /config/worker HTTP/1.1\r\nHost: x\r\n\r\n".repeat(20_000);
    let writer = tokio::spawn(async move {
        let _ = hog.write_all(&request).await;
        // keep the connection open, never read
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(hog);
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = raw_exchange(plain, healthz, Duration::from_secs(2)).await;
    assert!(
        refused.is_empty(),
        "a second connection from the capped client was served: {}",
        String::from_utf8_lossy(&refused)
    );

    let started = std::time::Instant::now();
    loop {
        let answer = raw_exchange(plain, healthz, Duration::from_secs(2)).await;
        if answer.starts_with(b"HTTP/1.1 200") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the stalled connection was never dropped"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    writer.abort();
}

#[test]
fn a_private_key_others_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let pki = Pki::new();
    let refused = |mode: u32, uid: u32| {
        std::fs::set_permissions(pki.key(), std::fs::Permissions::from_mode(mode)).unwrap();
        let err =
            mco_companion::server::tls::server_config(&pki.cert(), &pki.key(), None).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "private key {} is accessible to others or to its group (mode {mode:04o}, owner \
                 uid {uid}): it must be readable by its owner only (chmod 600), or also by its \
                 group when root owns it",
                pki.key().display()
            )
        );
    };
    let accepted = |mode: u32| {
        std::fs::set_permissions(pki.key(), std::fs::Permissions::from_mode(mode)).unwrap();
        mco_companion::server::tls::server_config(&pki.cert(), &pki.key(), None).unwrap();
    };
    // Root-owned (the tests run as root, as a secret volume's files are owned).
    for mode in [0o644, 0o604, 0o660, 0o650] {
        refused(mode, 0);
    }
    for mode in [0o400, 0o600, 0o440, 0o640] {
        accepted(mode);
    }
    // Owned by another user: its group may not read it.
    std::os::unix::fs::chown(pki.key(), Some(1000), None).unwrap();
    refused(0o640, 1000);
    accepted(0o600);
}
