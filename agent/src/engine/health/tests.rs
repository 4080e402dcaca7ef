//! Each health check's decision, with fakes.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use async_trait::async_trait;

use super::*;
use crate::host::systemd::FakeSystemd;
use crate::rootfs::Root;

fn script(root: &std::path::Path, name: &str, body: &str, mode: u32) {
    let dir = root.join("etc/mco-agent/health.d");
    fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    fs::write(&p, body).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn units_pass_when_active_or_inactive_and_fail_when_failed_missing_or_stuck() {
    let systemd = FakeSystemd::new()
        .with_unit("up.service", ActiveState::Active)
        .with_unit("oneshot.service", ActiveState::Inactive)
        .with_unit("bad.service", ActiveState::Failed)
        .with_unit("slow.service", ActiveState::Activating);
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(
        units(&systemd, &names(&["up.service", "oneshot.service"]))
            .await
            .is_empty()
    );
    let problems = units(
        &systemd,
        &names(&["bad.service", "slow.service", "gone.service"]),
    )
    .await;
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems[0].starts_with("unit bad.service failed: failed"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("unit slow.service is not up yet: activating"),
        "{problems:?}"
    );
    assert_eq!(problems[2], "unit gone.service is not found");
}

#[test]
fn only_enabled_unmasked_units_are_checked() {
    let mc = machine_config::MachineConfig::from_value(serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "x"},
        "spec": {"config": {"ignition": {"version": "3.2.0"}, "systemd": {"units": [
            {"name": "a.service", "enabled": true},
            {"name": "b.service", "enabled": false},
            {"name": "c.service"},
            {"name": "d.service", "enabled": true, "mask": true}]}}},
    }))
    .unwrap();
    let ign = mc.ignition().unwrap();
    assert_eq!(enabled_units(&ign), vec!["a.service".to_string()]);
}

struct Kubelet(Result<(), String>);

#[async_trait]
impl KubeletProbe for Kubelet {
    async fn healthy(&self) -> Result<(), String> {
        self.0.clone()
    }
}

#[tokio::test]
async fn the_kubelet_is_checked_only_where_it_exists() {
    let with = FakeSystemd::new().with_unit(KUBELET_UNIT, ActiveState::Active);
    let without = FakeSystemd::new();
    let sick = Kubelet(Err("connection refused".into()));
    assert_eq!(
        kubelet_problem(&with, &sick).await.as_deref(),
        Some("kubelet is not healthy: connection refused")
    );
    assert_eq!(kubelet_problem(&with, &Kubelet(Ok(()))).await, None);
    assert_eq!(kubelet_problem(&without, &sick).await, None);
}

#[tokio::test]
async fn scripts_run_in_name_order_and_fail_with_their_output_or_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    assert!(
        scripts::run_all(&root, "c", Duration::from_secs(5))
            .await
            .is_empty()
    );
    script(
        dir.path(),
        "10-ok",
        "#!/bin/sh\ntest \"$MCO_AGENT_CONFIG\" = rendered-x\n",
        0o755,
    );
    script(dir.path(), "20-off", "#!/bin/sh\nexit 1\n", 0o644);
    script(
        dir.path(),
        "30-bad",
        "#!/bin/sh\necho out; echo err >&2; exit 2\n",
        0o755,
    );
    script(dir.path(), "40-slow", "#!/bin/sh\nsleep 30\n", 0o755);
    std::os::unix::fs::symlink(
        "/bin/false",
        dir.path().join("etc/mco-agent/health.d/50-link"),
    )
    .unwrap();
    assert_eq!(
        scripts::list(&root).unwrap(),
        vec![
            "/etc/mco-agent/health.d/10-ok",
            "/etc/mco-agent/health.d/30-bad",
            "/etc/mco-agent/health.d/40-slow"
        ]
    );
    let started = std::time::Instant::now();
    let failures = scripts::run_all(&root, "rendered-x", Duration::from_millis(500)).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let text: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        vec![
            "health check /etc/mco-agent/health.d/30-bad exited with 2: out err",
            "health check /etc/mco-agent/health.d/40-slow timed out after 500ms",
        ]
    );
}

#[tokio::test]
async fn checks_are_retried_until_they_pass_within_the_deadline() {
    let node = crate::engine::tests::Node::new();
    // Fails until a marker exists; the marker is made by the check itself on its first run.
    script(
        node.path(),
        "10-second-time",
        "#!/bin/sh\nif [ -e ran ]; then exit 0; fi\ntouch ran\necho not yet\nexit 1\n",
        0o755,
    );
    let health = HealthOptions {
        deadline: Duration::from_secs(20),
        check_timeout: Duration::from_secs(5),
        retry_interval: Duration::from_millis(20),
        kubelet: None,
    };
    let engine = node.engine_opts(node.seams(), health.clone());
    let ign = machine_config::Config::empty();
    assert_eq!(engine.check_health("c", &ign).await, Ok(()));
    // A check that never passes fails at the deadline with the last round's problems.
    script(
        node.path(),
        "20-never",
        "#!/bin/sh\necho nope\nexit 1\n",
        0o755,
    );
    let engine = node.engine_opts(
        node.seams(),
        HealthOptions {
            deadline: Duration::from_millis(100),
            ..health
        },
    );
    let problems = engine.check_health("c", &ign).await.unwrap_err();
    assert_eq!(
        problems,
        vec!["health check /etc/mco-agent/health.d/20-never exited with 1: nope"]
    );
}
