//! Benchmark (`cargo bench -p mco-agent --bench desired_watch`): how fast a `desiredConfig`
//! change written to the Node reaches the agent's [`NodeApi::desired`] stream, against the
//! Kubernetes API test server over HTTPS on loopback (issue goal: within 200 ms). Two cases:
//! a healthy watch, and a change made right after the server dropped every watch (the agent has
//! to notice, back off and watch again).
//!
//! Only runs under `cargo bench` (`--bench`); listed by a test runner, it has no tests.

use std::time::{Duration, Instant};

use futures::StreamExt;
use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG};
use mco_agent::cluster::{ClusterOptions, KubeNodeApi, NodeApi};
use mco_test_support::apiserver::{Target, TestApiServer, fixtures};
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

const NODE: &str = "worker-0";
const CHANGES: usize = 200;
const DROPS: usize = 10;
const GOAL: Duration = Duration::from_millis(200);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        if !args.iter().any(|a| a == "--list") {
            eprintln!("benchmark: run it with `cargo bench -p mco-agent --bench desired_watch`");
        }
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(bench());
}

async fn bench() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = TestApiServer::start().expect("API test server");
    let mut node = fixtures::node(NODE);
    node["metadata"]["annotations"] =
        json!({DESIRED_CONFIG: "rendered-worker-0", CURRENT_CONFIG: "rendered-worker-0"});
    server.seed(node).expect("seed node");
    let kubeconfig = server.dir().join("kubelet.kubeconfig");
    server
        .write_kubeconfig(&kubeconfig, &format!("system:node:{NODE}"))
        .expect("kubeconfig");
    let mut options = ClusterOptions::new(NODE);
    options.kubeconfig = kubeconfig;
    // The agent's defaults: this measures what a node does.
    let api = KubeNodeApi::connect(&options).await.expect("connect");

    let mut stream = api.desired();
    let (tx, mut desired) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(value) = stream.next().await {
            if tx.send(value.config).is_err() {
                break;
            }
        }
    });
    expect(&mut desired, "rendered-worker-0").await;

    let set = |config: &str| {
        server
            .patch(
                "nodes",
                None,
                NODE,
                &json!({"metadata": {"annotations": {DESIRED_CONFIG: config}}}),
                Target::Main,
            )
            .expect("patch node");
    };
    let mut healthy = Vec::with_capacity(CHANGES);
    for i in 1..=CHANGES {
        let config = format!("rendered-worker-{i}");
        let started = Instant::now();
        set(&config);
        expect(&mut desired, &config).await;
        healthy.push(started.elapsed());
    }

    let watching = |server: &TestApiServer| {
        server
            .requests()
            .iter()
            .filter(|r| r.method == "GET" && r.query.contains("watch=true") && r.status == 200)
            .count()
    };
    let mut after_drop = Vec::with_capacity(DROPS);
    for i in 1..=DROPS {
        let config = format!("rendered-worker-dropped-{i}");
        let before = watching(&server);
        let started = Instant::now();
        server.faults().drop_watches();
        set(&config);
        expect(&mut desired, &config).await;
        after_drop.push(started.elapsed());
        // Let the new watch settle before the next drop.
        while watching(&server) <= before {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    println!("desiredConfig change -> agent, HTTPS on loopback, agent defaults (goal {GOAL:?})");
    println!(
        "{:<34} {:>8} {:>8} {:>8} {:>8}",
        "", "min ms", "median", "p99", "max"
    );
    report(&format!("healthy watch ({CHANGES} changes)"), healthy);
    report(
        &format!("right after a dropped watch ({DROPS})"),
        after_drop,
    );
}

async fn expect(desired: &mut UnboundedReceiver<String>, config: &str) {
    let got = tokio::time::timeout(Duration::from_secs(60), desired.recv())
        .await
        .expect("the change reached the agent within a minute");
    assert_eq!(got.as_deref(), Some(config));
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let within = samples.iter().filter(|d| **d <= GOAL).count();
    println!(
        "{what:<34} {:>8.1} {:>8.1} {:>8.1} {:>8.1}   {within}/{} within the goal",
        ms(samples[0]),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(samples[samples.len() - 1]),
        samples.len()
    );
}
