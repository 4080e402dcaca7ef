//! The shipped alert rules (`manifests/monitoring/prometheusrule.yaml`) under the real
//! `promtool test rules`, on series scraped from the agent's metrics server while the engine
//! (driven over the engine tests' fakes) goes through a pivot error, a failed drain, a refused
//! reboot and a failing kubelet, and through a healthy rollout: each alert fires when its
//! failure has held for its `for:`, with the MCO's labels and messages, and none fires when
//! the node is healthy.
//!
//! Each scrape becomes one phase of a timeline (its samples held for some minutes, one per
//! minute), with the labels a scrape adds (the scrape configuration's target labels; a
//! series' own label of the same name kept as `exported_<name>`, as Prometheus does).

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde_json::{Value, json};

use super::tests::{Sample, fake_kubelet, node, observed, root, scrape, served_only, value};
use super::{MetricsArgs, start};
use crate::engine::Outcome;
use crate::engine::tests::{CRIO_POLICY, IMAGE, REBOOT_FILE, mc};

const NODE: &str = "worker-0";

/// The labels a scrape of the agent on [`NODE`] adds.
const TARGET: &[(&str, &str)] = &[
    ("instance", "192.0.2.10:9001"),
    ("job", "mco-agent"),
    ("namespace", "mco-companion"),
    ("node", NODE),
];

/// The shipped PrometheusRule's `spec` (its rule groups).
fn shipped_rules() -> Value {
    let path = mco_test_support::shipped::manifests_dir().join("monitoring/prometheusrule.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path:?}: {e}"));
    let objects = mco_test_support::apiserver::manifests::parse(&text).unwrap();
    let rule = objects
        .into_iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .unwrap_or_else(|| panic!("{path:?} has no PrometheusRule"));
    rule["spec"].clone()
}

/// Every alerting rule of `spec`, by name.
fn alerts(spec: &Value) -> BTreeMap<String, Value> {
    spec["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .filter_map(|r| Some((r["alert"].as_str()?.to_string(), r.clone())))
        .collect()
}

/// A sample's labels once scraped from the target.
fn scraped_labels(sample: &Sample) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for (k, v) in &sample.labels {
        let target_has = TARGET.iter().any(|(t, _)| t == k);
        let key = if target_has {
            format!("exported_{k}")
        } else {
            k.clone()
        };
        labels.insert(key, v.clone());
    }
    for (k, v) in TARGET {
        labels.insert(k.to_string(), v.to_string());
    }
    labels
}

fn selector(name: &str, labels: &BTreeMap<String, String>) -> String {
    let quoted: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{name}{{{}}}", quoted.join(","))
}

/// promtool's `input_series` for scrapes each held for its minutes: one value a minute, a
/// series that disappears marked stale, runs written `VxN`.
fn input_series(phases: &[(Vec<Sample>, u32)]) -> Vec<Value> {
    let total: usize = phases.iter().map(|(_, m)| *m as usize).sum();
    let mut series: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    let mut minute = 0;
    for (samples, minutes) in phases {
        for s in samples {
            let values = series
                .entry(selector(&s.name, &scraped_labels(s)))
                .or_insert_with(|| vec![None; total]);
            for v in &mut values[minute..minute + *minutes as usize] {
                *v = Some(s.value);
            }
        }
        minute += *minutes as usize;
    }
    series
        .into_iter()
        .map(|(selector, values)| {
            let mut tokens: Vec<String> = Vec::new();
            for (i, v) in values.iter().enumerate() {
                tokens.push(match v {
                    Some(v) => format!("{v}"),
                    None if i > 0 && values[i - 1].is_some() => "stale".to_string(),
                    None => "_".to_string(),
                });
            }
            let mut runs: Vec<String> = Vec::new();
            let mut i = 0;
            while i < tokens.len() {
                let run = tokens[i..].iter().take_while(|t| **t == tokens[i]).count();
                runs.push(if run == 1 || tokens[i] == "stale" {
                    tokens[i].clone()
                } else {
                    format!("{}x{}", tokens[i], run - 1)
                });
                if tokens[i] == "stale" {
                    i += 1;
                } else {
                    i += run;
                }
            }
            json!({"series": selector, "values": runs.join(" ")})
        })
        .collect()
}

/// `template` with `{{ $labels.NAME }}` replaced by the alert's labels (all the shipped
/// annotations use).
fn render(template: &str, labels: &BTreeMap<String, String>) -> String {
    let mut out = template.to_string();
    for (k, v) in labels {
        out = out.replace(&format!("{{{{ $labels.{k} }}}}"), v);
    }
    assert!(!out.contains("{{"), "unrendered template in {out:?}");
    out
}

/// The alert `rule` raises on the scraped series of [`NODE`]: its labels (the series' own, or
/// those it aggregates by, with the rule's on top) and annotations.
fn expected_alert(rule: &Value, series_labels: BTreeMap<String, String>) -> Value {
    let mut labels = series_labels;
    for (k, v) in rule["labels"].as_object().unwrap() {
        labels.insert(k.clone(), v.as_str().unwrap().to_string());
    }
    let annotations: BTreeMap<String, String> = rule["annotations"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), render(v.as_str().unwrap(), &labels)))
        .collect();
    json!({"exp_labels": labels, "exp_annotations": annotations})
}

/// The labels of the series an alert on `metric` fires for (the target's, plus the metric's
/// own, exported when they clash), or, for the Degraded alert, those it counts by.
fn alert_series_labels(alert: &str) -> BTreeMap<String, String> {
    let target = || -> BTreeMap<String, String> {
        TARGET
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    match alert {
        "MCCDrainError" => {
            let mut l = target();
            l.insert("exported_node".into(), NODE.into());
            l
        }
        "MCONodeDegraded" => [("namespace", "mco-companion"), ("node", NODE)]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        _ => target(),
    }
}

/// Runs `promtool test rules` on `phases` with, at each evaluation time, exactly the alerts
/// listed firing (every other shipped alert checked silent).
fn promtool_test(phases: &[(Vec<Sample>, u32)], firing: &[(&str, &[&str])]) {
    let spec = shipped_rules();
    let alerts = alerts(&spec);
    for (_, names) in firing {
        for name in *names {
            assert!(alerts.contains_key(*name), "no shipped alert {name}");
        }
    }
    let mut checks = Vec::new();
    for (eval_time, names) in firing {
        for (alert, rule) in &alerts {
            let exp: Vec<Value> = if names.contains(&alert.as_str()) {
                vec![expected_alert(rule, alert_series_labels(alert))]
            } else {
                vec![]
            };
            checks.push(json!({"eval_time": eval_time, "alertname": alert, "exp_alerts": exp}));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.json"), spec.to_string()).unwrap();
    let tests = json!({
        "rule_files": ["rules.json"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": input_series(phases),
            "alert_rule_test": checks,
        }],
    });
    let test_file = dir.path().join("tests.json");
    std::fs::write(&test_file, serde_json::to_string_pretty(&tests).unwrap()).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("running promtool (Debian package prometheus; tests/setup.sh installs it)");
        assert!(
            out.status.success(),
            "promtool {}: {}\n{}\n{}\ntests: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&test_file).unwrap()
        );
    };
    run(&["check", "rules", "rules.json"]);
    run(&["test", "rules", "tests.json"]);
}

/// Metrics served with the kubelet health check against `kubelet`, for [`NODE`].
async fn metrics_with_kubelet(
    node: &crate::engine::tests::Node,
    kubelet: std::net::SocketAddr,
) -> super::server::MetricsHandle {
    let args = MetricsArgs {
        kubelet_healthz_enabled: true,
        kubelet_healthz_endpoint: format!("http://{kubelet}/healthz"),
        kubelet_healthz_interval: Duration::from_millis(50),
        ..served_only()
    };
    let metrics = start(&args, &root(node)).await.unwrap();
    metrics.metrics().set_node(NODE);
    metrics
}

fn state_of(samples: &[Sample]) -> String {
    let states: Vec<&Sample> = samples.iter().filter(|s| s.name == "mcd_state").collect();
    assert_eq!(states.len(), 1, "{states:?}");
    states[0].labels["state"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_alert_fires_on_a_scrape_of_its_failure_after_its_for() {
    let kubelet = fake_kubelet(Arc::new(AtomicBool::new(true))).await;
    let node = node();
    let metrics = metrics_with_kubelet(&node, kubelet).await;
    node.provision(&mc("rendered-0", &[(CRIO_POLICY, "{}\n")], &[], IMAGE))
        .await;
    // The kubelet has failed three checks in a row.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while value(&scrape(&metrics).await, "mcd_kubelet_state", &[]).unwrap() < 3.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waiting for mcd_kubelet_state to reach 3"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b = mc(
        "rendered-b",
        &[(CRIO_POLICY, "{\"default\":[]}\n"), (REBOOT_FILE, "b\n")],
        &["nosmt"],
        IMAGE,
    );

    // 0-10m: the kernel-argument change fails (a pivot error).
    node.os
        .fail_next("KernelArgs", "error: Invalid kernel argument");
    let r = observed(&node, &metrics).update(&b, false).await;
    assert!(matches!(r.outcome, Outcome::Degraded(_)), "{r:?}");
    let pivot = scrape(&metrics).await;
    assert_eq!(value(&pivot, "mcd_pivot_errors_total", &[]), Some(1.0));
    assert_eq!(state_of(&pivot), "Degraded");

    // 10-20m: the next try cannot drain.
    node.cluster.fail_drain(Some("pod apps/web-1 is protected"));
    let r = observed(&node, &metrics).update(&b, false).await;
    assert!(matches!(r.outcome, Outcome::Degraded(_)), "{r:?}");
    let drain = scrape(&metrics).await;
    assert_eq!(value(&drain, "mcc_drain_err", &[("node", NODE)]), Some(1.0));
    assert_eq!(value(&drain, "mcd_pivot_errors_total", &[]), Some(1.0));
    assert_eq!(state_of(&drain), "Degraded");

    // 20-60m: drained and pivoted, but the reboot is refused.
    node.cluster.fail_drain(None);
    node.rebooter.refuse("Operation not permitted");
    let r = observed(&node, &metrics).update(&b, false).await;
    assert!(matches!(r.outcome, Outcome::Degraded(_)), "{r:?}");
    let reboot = scrape(&metrics).await;
    assert_eq!(value(&reboot, "mcd_reboots_failed_total", &[]), Some(1.0));
    assert_eq!(value(&reboot, "mcd_pivot_errors_total", &[]), Some(0.0));
    assert_eq!(
        value(&reboot, "mcc_drain_err", &[("node", NODE)]),
        Some(0.0)
    );
    assert_eq!(state_of(&reboot), "Degraded");
    assert!(value(&reboot, "mcd_kubelet_state", &[]).unwrap() >= 3.0);

    promtool_test(
        &[(pivot, 10), (drain, 10), (reboot, 40)],
        &[
            ("1m", &["KubeletHealthState"]),
            ("5m", &["KubeletHealthState", "MCDPivotError"]),
            (
                "15m",
                &["KubeletHealthState", "MCDPivotError", "MCCDrainError"],
            ),
            // the reboot failed at 20m: not yet firing at 23m (for: 5m), firing at 27m
            ("23m", &["KubeletHealthState"]),
            ("27m", &["KubeletHealthState", "MCDRebootError"]),
            // Degraded since 0m (for: 30m)
            (
                "35m",
                &["KubeletHealthState", "MCDRebootError", "MCONodeDegraded"],
            ),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_alert_fires_on_a_scrape_of_a_healthy_rollout() {
    let kubelet = fake_kubelet(Arc::new(AtomicBool::new(false))).await;
    let node = node();
    let metrics = metrics_with_kubelet(&node, kubelet).await;
    node.provision(&mc("rendered-0", &[(CRIO_POLICY, "{}\n")], &[], IMAGE))
        .await;
    let idle = scrape(&metrics).await;

    // A rebootless update, then a reboot update drained, pivoted, rebooted and verified.
    let a = mc(
        "rendered-a",
        &[(CRIO_POLICY, "{\"default\":[]}\n")],
        &[],
        IMAGE,
    );
    assert_eq!(
        observed(&node, &metrics).update(&a, false).await.outcome,
        Outcome::Done
    );
    let rebootless = scrape(&metrics).await;
    let b = mc(
        "rendered-b",
        &[(CRIO_POLICY, "{\"default\":[]}\n"), (REBOOT_FILE, "b\n")],
        &["nosmt"],
        IMAGE,
    );
    assert_eq!(
        observed(&node, &metrics).update(&b, false).await.outcome,
        Outcome::Rebooting
    );
    let rebooting = scrape(&metrics).await;
    node.reboot(false);
    assert_eq!(
        observed(&node, &metrics).resume().await.unwrap().outcome,
        Outcome::Done
    );
    let done = scrape(&metrics).await;
    assert_eq!(value(&done, "mcc_drain_err", &[("node", NODE)]), Some(0.0));
    assert_eq!(value(&done, "mcd_kubelet_state", &[]), Some(0.0));
    assert_eq!(state_of(&done), "Done");

    promtool_test(
        &[(idle, 10), (rebootless, 10), (rebooting, 10), (done, 40)],
        &[
            ("1m", &[]),
            ("9m", &[]),
            ("19m", &[]),
            ("29m", &[]),
            ("45m", &[]),
        ],
    );
}
