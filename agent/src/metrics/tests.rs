//! The metrics end to end: the engine driven over fakes (rpm-ostree, reboot, cluster, systemd)
//! on a temp root, the metrics observing it and served on a loopback port, scraped over HTTP
//! and parsed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::server::MetricsHandle;
use super::{MetricsArgs, start};
use crate::engine::tests::{CRIO_POLICY, IMAGE, Node, REBOOT_FILE, mc};
use crate::engine::{Engine, Outcome};
use crate::rootfs::Root;

/// One sample of the exposition.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sample {
    pub(super) name: String,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) value: f64,
}

/// Parses the OpenMetrics text: `name{k="v",...} value` lines, comments skipped; the text must
/// end with `# EOF`.
fn parse(text: &str) -> Vec<Sample> {
    assert!(text.ends_with("# EOF\n"), "no # EOF at the end:\n{text}");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a value");
            let (name, labels) = match series.split_once('{') {
                None => (series.to_string(), BTreeMap::new()),
                Some((name, rest)) => (
                    name.to_string(),
                    parse_labels(rest.strip_suffix('}').expect("closing brace")),
                ),
            };
            Sample {
                name,
                labels,
                value: value.parse().unwrap_or_else(|_| panic!("value in {line}")),
            }
        })
        .collect()
}

/// `k="v",k2="v\"2"` with the exposition's escapes (`\\`, `\"`, `\n`).
fn parse_labels(mut s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    while !s.is_empty() {
        let (key, rest) = s.split_once("=\"").expect("key=\"");
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().expect("closing quote") {
                (i, '"') => break i,
                (_, '\\') => match chars.next().expect("escaped char").1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        out.insert(key.to_string(), value);
        s = rest[end + 1..].trim_start_matches(',');
    }
    out
}

/// The value of the series `name` with exactly `labels`.
pub(super) fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    samples
        .iter()
        .find(|s| s.name == name && s.labels == want)
        .map(|s| s.value)
}

/// Every series of `name`.
fn series<'a>(samples: &'a [Sample], name: &str) -> Vec<&'a Sample> {
    samples.iter().filter(|s| s.name == name).collect()
}

pub(super) async fn scrape(handle: &MetricsHandle) -> Vec<Sample> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = format!("http://{}/metrics", handle.addr().expect("served"));
    // plain HTTP: no trust store needed (one test runs without any)
    let response = reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only([])
        .build()
        .unwrap()
        .get(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        super::server::CONTENT_TYPE_OPENMETRICS
    );
    parse(&response.text().await.unwrap())
}

/// The engine tests' node, with an `os-release` for the host OS metric.
pub(super) fn node() -> Node {
    let node = Node::new();
    node.write(
        "/etc/os-release",
        "NAME=\"Red Hat Enterprise Linux CoreOS\"\nID=\"rhcos\"\nVERSION_ID=\"4.18\"\n",
    );
    node
}

/// A freshly started agent on `node`, observed by `metrics`.
pub(super) fn observed(node: &Node, metrics: &MetricsHandle) -> Engine {
    let engine = node.engine();
    engine.reporter().add_observer(metrics.observer());
    engine
}

pub(super) fn root(node: &Node) -> Root {
    Root::open(node.path()).unwrap()
}

pub(super) fn served_only() -> MetricsArgs {
    MetricsArgs {
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        kubelet_healthz_enabled: false,
        ..MetricsArgs::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraped_metrics_follow_updates_failures_reboots_drains_and_drift() {
    let node = node();
    let metrics = start(&served_only(), &root(&node)).await.unwrap();
    let s = scrape(&metrics).await;
    assert_eq!(
        value(
            &s,
            "mcd_host_os_and_version",
            &[("os", "RHCOS"), ("version", "4.18")]
        ),
        Some(1.0)
    );
    for zero in [
        "mcd_reboots_failed_total",
        "mcd_pivot_errors_total",
        "mcd_kubelet_state",
        "mcd_config_drift",
    ] {
        assert_eq!(value(&s, zero, &[]), Some(0.0), "{zero}");
    }

    // A rebootless update (crio reload).
    node.provision(&mc("rendered-0", &[(CRIO_POLICY, "{}\n")], &[], IMAGE))
        .await;
    let a = mc(
        "rendered-a",
        &[(CRIO_POLICY, "{\"default\":[]}\n")],
        &[],
        IMAGE,
    );
    let started = super::unix_now();
    assert_eq!(
        observed(&node, &metrics).update(&a, false).await.outcome,
        Outcome::Done
    );
    let s = scrape(&metrics).await;
    let state = series(&s, "mcd_state");
    assert_eq!(state.len(), 1, "{state:?}");
    assert_eq!(state[0].labels["state"], "Done");
    assert_eq!(state[0].labels["reason"], "");
    assert!(state[0].value >= started.floor(), "{state:?}");
    let update = series(&s, "mcd_update_state");
    assert_eq!(update.len(), 1, "{update:?}");
    assert_eq!(update[0].labels["config"], "MachineConfig: rendered-a");
    assert_eq!(update[0].labels["err"], "");
    assert_eq!(
        value(&s, "mco_agent_updates_total", &[("result", "Done")]),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "mco_agent_update_duration_seconds_count",
            &[("result", "Done")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "mco_agent_drain_duration_seconds_count",
            &[("result", "success")]
        ),
        None
    );

    // A reboot update whose kernel-argument change fails: drained, then rolled back.
    let b = mc(
        "rendered-b",
        &[(CRIO_POLICY, "{\"default\":[]}\n"), (REBOOT_FILE, "b\n")],
        &["nosmt"],
        IMAGE,
    );
    node.os
        .fail_next("KernelArgs", "error: Invalid kernel argument");
    let r = observed(&node, &metrics).update(&b, false).await;
    let Outcome::Degraded(reason) = &r.outcome else {
        panic!("{r:?}")
    };
    let s = scrape(&metrics).await;
    assert_eq!(value(&s, "mcd_pivot_errors_total", &[]), Some(1.0));
    assert_eq!(
        value(
            &s,
            "mco_agent_drain_duration_seconds_count",
            &[("result", "success")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "mcd_state",
            &[("state", "Degraded"), ("reason", reason)]
        )
        .map(|v| v > 0.0),
        Some(true),
        "{:?}",
        series(&s, "mcd_state")
    );
    assert_eq!(series(&s, "mcd_state").len(), 1);
    assert_eq!(
        value(
            &s,
            "mcd_update_state",
            &[("config", "MachineConfig: rendered-b"), ("err", reason)]
        )
        .map(|v| v > 0.0),
        Some(true),
        "{:?}",
        series(&s, "mcd_update_state")
    );
    assert_eq!(
        value(&s, "mco_agent_updates_total", &[("result", "Degraded")]),
        Some(1.0)
    );

    // The OS step succeeds (pivot errors back to 0), but the reboot is refused.
    node.rebooter.refuse("Operation not permitted");
    let r = observed(&node, &metrics).update(&b, false).await;
    assert!(matches!(r.outcome, Outcome::Degraded(_)), "{r:?}");
    let s = scrape(&metrics).await;
    assert_eq!(value(&s, "mcd_pivot_errors_total", &[]), Some(0.0));
    assert_eq!(value(&s, "mcd_reboots_failed_total", &[]), Some(1.0));
    assert_eq!(
        value(&s, "mco_agent_updates_total", &[("result", "Degraded")]),
        Some(2.0)
    );

    // Retried: the reboot is requested; after the boot the update is verified and Done.
    node.rebooter.allow();
    assert_eq!(
        observed(&node, &metrics).update(&b, false).await.outcome,
        Outcome::Rebooting
    );
    node.reboot(false);
    assert_eq!(
        observed(&node, &metrics).resume().await.unwrap().outcome,
        Outcome::Done
    );
    let s = scrape(&metrics).await;
    assert_eq!(
        value(&s, "mco_agent_updates_total", &[("result", "Rebooting")]),
        Some(1.0)
    );
    assert_eq!(
        value(&s, "mco_agent_updates_total", &[("result", "Done")]),
        Some(2.0)
    );
    assert_eq!(
        value(
            &s,
            "mco_agent_update_duration_seconds_count",
            &[("result", "Done")]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &s,
            "mcd_update_state",
            &[("config", "MachineConfig: rendered-b"), ("err", "")]
        )
        .map(|v| v > 0.0),
        Some(true)
    );
    assert_eq!(
        value(
            &s,
            "mco_agent_drain_duration_seconds_count",
            &[("result", "success")]
        ),
        Some(3.0)
    );

    // A drain that fails.
    node.cluster.fail_drain(Some("pod apps/web-1 is protected"));
    let c = mc(
        "rendered-c",
        &[(CRIO_POLICY, "{\"default\":[]}\n"), (REBOOT_FILE, "c\n")],
        &["nosmt"],
        IMAGE,
    );
    let r = observed(&node, &metrics).update(&c, false).await;
    assert!(matches!(r.outcome, Outcome::Degraded(_)), "{r:?}");
    let s = scrape(&metrics).await;
    assert_eq!(
        value(
            &s,
            "mco_agent_drain_duration_seconds_count",
            &[("result", "failure")]
        ),
        Some(1.0)
    );

    // Drift, as the drift monitor reports it.
    let engine = observed(&node, &metrics);
    let before = super::unix_now();
    engine
        .reporter()
        .event(
            "ConfigDriftDetected",
            "content mismatch for file \"/etc/mco/reboot.conf\"",
        )
        .await;
    let s = scrape(&metrics).await;
    assert!(value(&s, "mcd_config_drift", &[]).unwrap() >= before.floor());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_metrics_are_served_and_a_busy_port_is_named() {
    let node = node();
    let metrics = start(&served_only(), &root(&node)).await.unwrap();
    let addr = metrics.addr().unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let other = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(other.status(), 404);
    let busy = MetricsArgs {
        metrics_listen: addr,
        ..served_only()
    };
    let err = format!("{:#}", start(&busy, &root(&node)).await.err().unwrap());
    assert!(
        err.contains(&format!("listening for metrics on {addr}")),
        "{err}"
    );
    let off = MetricsArgs {
        no_metrics: true,
        ..served_only()
    };
    assert_eq!(start(&off, &root(&node)).await.unwrap().addr(), None);
}

/// Serves `/healthz`: `ok`, or 500 while `failing`.
pub(super) async fn fake_kubelet(failing: Arc<AtomicBool>) -> std::net::SocketAddr {
    use axum::http::StatusCode;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/healthz",
        axum::routing::get(move || {
            let failing = failing.clone();
            async move {
                if failing.load(Ordering::SeqCst) {
                    (StatusCode::INTERNAL_SERVER_ERROR, "unhealthy")
                } else {
                    (StatusCode::OK, "ok")
                }
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_state_counts_consecutive_failed_checks() {
    let failing = Arc::new(AtomicBool::new(true));
    let kubelet = fake_kubelet(failing.clone()).await;
    let node = node();
    let args = MetricsArgs {
        kubelet_healthz_enabled: true,
        kubelet_healthz_endpoint: format!("http://{kubelet}/healthz"),
        kubelet_healthz_interval: Duration::from_millis(50),
        ..served_only()
    };
    let metrics = start(&args, &root(&node)).await.unwrap();
    let kubelet_state = async |want: fn(f64) -> bool| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let v = value(&scrape(&metrics).await, "mcd_kubelet_state", &[]).unwrap();
            if want(v) {
                return v;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "mcd_kubelet_state stuck at {v}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    kubelet_state(|v| v >= 3.0).await;
    failing.store(false, Ordering::SeqCst);
    kubelet_state(|v| v == 0.0).await;
    // Nothing listens any more: connection failures count too.
    let closed = MetricsArgs {
        kubelet_healthz_endpoint: format!("http://{}/healthz", unused_port()),
        ..args
    };
    drop(metrics);
    let metrics = start(&closed, &root(&node)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while value(&scrape(&metrics).await, "mcd_kubelet_state", &[]).unwrap() < 2.0 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback address nothing listens on.
fn unused_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

#[test]
fn the_parser_reads_escaped_labels() {
    let s = parse("# TYPE x gauge\nx{a=\"q\\\"uote\",b=\"back\\\\slash\"} 1.5\ny 2\n# EOF\n");
    assert_eq!(
        value(&s, "x", &[("a", "q\"uote"), ("b", "back\\slash")]),
        Some(1.5)
    );
    assert_eq!(value(&s, "y", &[]), Some(2.0));
}

/// A host without a CA store (a minimal image) still checks the kubelet's plain-HTTP endpoint:
/// the check loads the system's roots only for https.
#[test]
#[allow(unsafe_code)] // set before any other thread of this process exists (nextest runs each test alone)
fn the_kubelet_check_needs_no_ca_store_for_plain_http() {
    let empty = tempfile::tempdir().unwrap();
    // SAFETY: no other thread runs yet, so nothing reads the environment concurrently
    unsafe {
        std::env::set_var("SSL_CERT_FILE", empty.path().join("none.pem"));
        std::env::set_var("SSL_CERT_DIR", empty.path());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let kubelet = fake_kubelet(Arc::new(AtomicBool::new(true))).await;
        let node = node();
        let args = MetricsArgs {
            kubelet_healthz_enabled: true,
            kubelet_healthz_endpoint: format!("http://{kubelet}/healthz"),
            kubelet_healthz_interval: Duration::from_millis(50),
            ..served_only()
        };
        let metrics = start(&args, &root(&node)).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        // the failing kubelet is counted: the check runs
        while value(&scrape(&metrics).await, "mcd_kubelet_state", &[]).unwrap() < 1.0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the kubelet check never ran without a CA store"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
fn a_rolled_back_boot_is_counted() {
    use crate::engine::rollback::BOOT_ROLLED_BACK;
    use crate::engine::{Observation, Observer};
    let metrics = Arc::new(super::Metrics::new());
    let observer = super::MetricsObserver::new(metrics.clone());
    assert!(
        metrics
            .encode()
            .contains("mco_agent_boot_rollbacks_total 0\n")
    );
    observer.observe(&Observation::Event {
        reason: BOOT_ROLLED_BACK,
        message: "boot into b failed: x; rolled back to a",
    });
    assert!(
        metrics
            .encode()
            .contains("mco_agent_boot_rollbacks_total 1\n"),
        "{}",
        metrics.encode()
    );
}
