//! `mco-agent once-from URL`: a config fetched over HTTP(S) as the agent asks a config server.
//! The companion serves `examples/` over TLS on loopback (its answer yields the rendered
//! MachineConfig it carries); a small HTTP server serves plain documents and errors. Every
//! failure (unreachable, 4xx, 5xx, TLS) is a clear error and leaves the root as it was. The
//! daemon's config-server source (asking by name) is checked against the same servers.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use common::{examples_dir, run, seed_root, snapshot, text};
use mco_agent::input::served::{fetch, http_client};
use mco_companion::server::{self, ConfigSource, Limits};
use mco_companion::standalone::{Snapshot, Standalone};
use mco_test_support::tls::TestCa;
use tokio::sync::watch;

/// The companion serving `examples/` over TLS; the CA file and the URL of the worker pool.
struct Companion {
    url: String,
    ca_file: PathBuf,
    _stop: watch::Sender<bool>,
}

async fn companion(dir: &Path) -> Companion {
    mco_test_support::tls::install_ring_provider();
    let ca = TestCa::new("once-from-url-ca").unwrap();
    let ca_file = dir.join("ca.crt");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let tls = ca
        .issue_server_cert(&["127.0.0.1".to_string()])
        .unwrap()
        .server_config(&[b"http/1.1"])
        .unwrap();
    let source: Arc<dyn ConfigSource> =
        Arc::new(Standalone::open(&examples_dir(), Default::default()).unwrap());
    let (stop, stopped) = watch::channel(false);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/config/worker", listener.local_addr().unwrap());
    tokio::spawn(server::serve(
        listener,
        Some(tls),
        None,
        source,
        Limits::default(),
        stopped,
    ));
    Companion {
        url,
        ca_file,
        _stop: stop,
    }
}

/// The rendered name the companion serves for the worker pool.
fn rendered_worker() -> String {
    let manifests = mco_companion::manifests::load(&examples_dir()).unwrap();
    let snapshot = Snapshot::render(&manifests, &Default::default());
    snapshot.pools["worker"]
        .rendered
        .as_ref()
        .unwrap()
        .name()
        .to_string()
}

const IGNITION: &str = r#"{"ignition": {"version": "3.4.0"}, "storage": {"files": [
  {"path": "/etc/from-url.conf", "mode": 420, "contents": {"source": "data:,bare%0A"}}]}}"#;

/// A plain HTTP server: a MachineConfig, a bare Ignition config, a 404 and a 500; it records
/// the Accept header of every request.
async fn documents() -> (String, Arc<Mutex<Vec<String>>>) {
    let accepts = Arc::new(Mutex::new(Vec::new()));
    let record = |accepts: Arc<Mutex<Vec<String>>>| {
        move |headers: HeaderMap| {
            let accept = headers
                .get("accept")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            accepts.lock().unwrap().push(accept);
        }
    };
    let chrony = std::fs::read_to_string(examples_dir().join("03-worker-chrony.yaml")).unwrap();
    let (a, b) = (record(accepts.clone()), record(accepts.clone()));
    let app = Router::new()
        .route(
            "/configs/chrony.yaml",
            get(move |h: HeaderMap| async move {
                a(h);
                chrony
            }),
        )
        .route(
            "/ignition/bare.ign",
            get(move |h: HeaderMap| async move {
                b(h);
                IGNITION
            }),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "no such config\n") }),
        )
        .route(
            "/broken",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "render failed\n") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), accepts)
}

fn new_root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    seed_root(&root);
    (dir, root)
}

/// Runs `once-from SOURCE --root ROOT --skip-os --skip-reboot EXTRA...` off the runtime.
async fn once_from(source: &str, root: &Path, extra: &[&str]) -> (String, String, i32) {
    let mut args: Vec<String> = ["once-from", source, "--root"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(root.display().to_string());
    args.extend(["--skip-os", "--skip-reboot"].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        text(&run(&args))
    })
    .await
    .unwrap()
}

fn current_name(root: &Path) -> String {
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("etc/machine-config-daemon/currentconfig")).unwrap(),
    )
    .unwrap();
    json["metadata"]["name"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_servers_answer_over_tls_applies_the_machine_config_it_carries() {
    let (dir, root) = new_root();
    let companion = companion(dir.path()).await;
    let ca = companion.ca_file.display().to_string();
    let (stdout, stderr, code) = once_from(&companion.url, &root, &["--ca", &ca]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let name = rendered_worker();
    assert!(
        stdout.starts_with(&format!(
            "applied {name} to {} (first application)\n",
            root.display()
        )),
        "{stdout}"
    );
    assert_eq!(current_name(&root), name);
    // The rendered config's files, not the ones the server appends for first boot.
    assert!(root.join("etc/chrony.conf").exists());
    assert!(!root.join("etc/mcs-machine-config-content.json").exists());
    assert!(
        !root
            .join("etc/ignition-machine-config-encapsulated.json")
            .exists()
    );

    // The same answer saved to a file is read the same way.
    let client = http_client(&companion.url, Some(&companion.ca_file), None).unwrap();
    let answer = fetch(&client, &companion.url, None, None).await.unwrap();
    let saved = dir.path().join("worker.ign");
    std::fs::write(&saved, answer).unwrap();
    let (_other, root) = new_root();
    let (stdout, stderr, code) = once_from(saved.to_str().unwrap(), &root, &[]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(current_name(&root), name);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_documents_are_used_as_they_are_with_the_ignition_accept_header() {
    let (base, accepts) = documents().await;
    let (_dir, root) = new_root();
    let insecure = ["--insecure-http"];
    let (stdout, stderr, code) =
        once_from(&format!("{base}/configs/chrony.yaml"), &root, &insecure).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("--insecure-http: fetching configs over plain http://, which anyone on the way can read or change"),
        "no warning about plain http: {stderr}"
    );
    assert_eq!(current_name(&root), "03-worker-chrony");
    assert!(
        std::fs::read_to_string(root.join("etc/chrony.conf"))
            .unwrap()
            .contains("ntp1.example.com")
    );

    let (_dir, root) = new_root();
    let (stdout, stderr, code) =
        once_from(&format!("{base}/ignition/bare.ign"), &root, &insecure).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    // A bare Ignition config is named after the URL's last path segment.
    assert_eq!(current_name(&root), "bare");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/from-url.conf")).unwrap(),
        "bare\n"
    );
    assert_eq!(
        *accepts.lock().unwrap(),
        ["application/vnd.coreos.ignition+json;version=3.5.0"; 2]
    );
}

/// Exit codes (docs/agent.md, "Exit codes"): a config that could not be fetched, and what was
/// given wrong.
const FAILED: i32 = 3;
const INVALID_INPUT: i32 = 65;

/// Runs a failing once-from and checks its exit code, the message and that the root did not
/// change.
async fn refused(source: &str, extra: &[&str], exit: i32, expected: &[&str]) {
    let (_dir, root) = new_root();
    let before = snapshot(&root);
    let (stdout, stderr, code) = once_from(source, &root, extra).await;
    assert_eq!(code, exit, "{source}: {stdout}{stderr}");
    for e in expected {
        assert!(stderr.contains(e), "{source}: expected {e:?} in:\n{stderr}");
    }
    assert_eq!(snapshot(&root), before, "{source}: the root changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_4xx_5xx_and_tls_failures_are_clear_and_change_nothing() {
    let (base, accepts) = documents().await;
    let insecure: &[&str] = &["--insecure-http"];
    // Plain http:// only when asked for, and then with a warning.
    refused(
        &format!("{base}/configs/chrony.yaml"),
        &[],
        INVALID_INPUT,
        &[&format!(
            "error: {base}/configs/chrony.yaml: a plain http:// config source is neither \
             authenticated nor encrypted (anyone on the way can read or change what this node \
             applies); use https:// with --ca, or pass --insecure-http to accept it\n"
        )],
    )
    .await;
    assert!(
        accepts.lock().unwrap().is_empty(),
        "an http:// URL was fetched"
    );
    refused(
        &format!("{base}/missing"),
        insecure,
        FAILED,
        &[&format!(
            "error: {base}/missing answered 404 Not Found: no such config"
        )],
    )
    .await;
    refused(
        &format!("{base}/broken"),
        insecure,
        FAILED,
        &[&format!(
            "error: {base}/broken answered 500 Internal Server Error: render failed"
        )],
    )
    .await;

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("http://127.0.0.1:{port}/config/worker");
    refused(
        &url,
        insecure,
        FAILED,
        &[
            &format!("error: cannot reach {url}: "),
            "Connection refused",
        ],
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let companion = companion(dir.path()).await;
    // Another CA, and none at all (the system's trust store does not know the test CA).
    let other = TestCa::new("some-other-ca").unwrap();
    let other_file = dir.path().join("other.crt");
    std::fs::write(&other_file, other.cert_pem()).unwrap();
    let tls_failed = format!("error: TLS handshake with {} failed: ", companion.url);
    refused(
        &companion.url,
        &["--ca", other_file.to_str().unwrap()],
        FAILED,
        &[
            &tls_failed,
            "the server's certificate is not signed by a CA this node trusts",
            "give that CA with --ca",
        ],
    )
    .await;
    refused(&companion.url, &[], FAILED, &[&tls_failed, "--ca"]).await;
    // The right CA, the wrong name: the certificate names 127.0.0.1 only.
    let by_name = companion.url.replace("127.0.0.1", "localhost");
    let ca = companion.ca_file.to_str().unwrap();
    refused(
        &by_name,
        &["--ca", ca],
        FAILED,
        &[&format!(
            "error: TLS handshake with {by_name} failed: the server's certificate is not valid for localhost (it names 127.0.0.1): use one of its names in the URL"
        )],
    )
    .await;

    // Bad local input.
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    refused(
        &companion.url,
        &["--ca", not_pem.to_str().unwrap()],
        INVALID_INPUT,
        &["no certificate in the CA file"],
    )
    .await;
    refused(
        &examples_dir()
            .join("00-worker-base.yaml")
            .display()
            .to_string(),
        &["--ca", not_pem.to_str().unwrap()],
        INVALID_INPUT,
        &["--ca is for an https:// URL"],
    )
    .await;
    refused(
        "ftp://example.com/x",
        &[],
        INVALID_INPUT,
        &["error: ftp://example.com/x: a ftp:// URL; only http:// and https:// are fetched"],
    )
    .await;
}

/// The daemon's config-server source names the desired config (`X-MCO-Config`): the companion
/// serves it or refuses with the reason; a server that ignores the header (as the MCS does,
/// serving the pool's config) is detected and named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_server_source_asks_by_name_and_detects_a_server_ignoring_it() {
    use mco_agent::daemon::config_server::ConfigServer;
    use mco_agent::daemon::source::ConfigSource as _;
    let dir = tempfile::tempdir().unwrap();
    let companion = companion(dir.path()).await;
    let base = companion.url.trim_end_matches("/config/worker");
    let source =
        ConfigServer::new(base, Some(&companion.ca_file), None, "worker", None, false).unwrap();
    let wanted = rendered_worker();
    assert_eq!(source.fetch(Some(&wanted)).await.unwrap().name(), wanted);
    let err = format!(
        "{:#}",
        source
            .fetch(Some("rendered-worker-0123"))
            .await
            .unwrap_err()
    );
    assert!(
        err.contains("404") && err.contains("\"rendered-worker-0123\"") && err.contains("worker"),
        "{err}"
    );

    // an MCS-like server: the pool's config whatever is asked
    let client = http_client(&companion.url, Some(&companion.ca_file), None).unwrap();
    let pool_answer = fetch(&client, &companion.url, None, None).await.unwrap();
    let app = Router::new().route("/config/worker", get(move || async move { pool_answer }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mcs =
        ConfigServer::new(&format!("http://{addr}"), None, None, "worker", None, true).unwrap();
    let err = format!(
        "{:#}",
        mcs.fetch(Some("rendered-worker-next")).await.unwrap_err()
    );
    assert!(
        err.contains(&format!(
            "served {wanted} when asked for rendered-worker-next"
        )) && err.contains("ignores X-MCO-Config"),
        "{err}"
    );
}
