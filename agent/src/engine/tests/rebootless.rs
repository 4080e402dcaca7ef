//! Rebootless updates, refusals before anything is written, and failures rolled back.

use machine_config::IgnitionJson;
use machine_config::mco::NodeState;

use super::*;
use crate::engine::Outcome;
use crate::engine::fake::ClusterCall;
use crate::engine::report::read_status;
use crate::host::systemd::{JobKind, SystemdCall};

fn a() -> MachineConfig {
    mc(
        "rendered-a",
        &[(CRIO_POLICY, "{}\n"), ("/etc/chrony.conf", "pool a\n")],
        &[],
        IMAGE,
    )
}

#[tokio::test]
async fn a_policy_file_change_reloads_crio_and_completes_without_reboot() {
    let node = Node::new();
    node.provision(&a()).await;
    let b = mc(
        "rendered-b",
        &[
            (CRIO_POLICY, "{\"default\":[]}\n"),
            ("/etc/chrony.conf", "pool a\n"),
        ],
        &[],
        IMAGE,
    );
    let report = node.engine().update(&b, false).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(report.actions, vec!["Reload crio.service"]);
    assert_eq!(node.read(CRIO_POLICY).unwrap(), "{\"default\":[]}\n");
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
    assert_eq!(node.recorded_step(), None);
    assert!(node.rebooter.reasons().is_empty());
    assert!(
        node.systemd
            .calls()
            .contains(&SystemdCall::Reload("crio.service".into()))
    );
    // No drain for a reload, an uncordon anyway (as the MCD's completeUpdate), then Done.
    let calls = node.cluster.calls();
    assert!(
        !calls.iter().any(|c| matches!(c, ClusterCall::Drain(_))),
        "{calls:?}"
    );
    assert!(calls.contains(&ClusterCall::Uncordon("rendered-b".into())));
    assert_eq!(
        calls.last(),
        Some(&ClusterCall::SetDone("rendered-b".into()))
    );
    assert!(node.cluster.events().contains(&"NodeDone".to_string()));
    let status = read_status(&Root::open(node.path()).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(
        (status.state, status.current.as_deref()),
        (NodeState::Done, Some("rendered-b"))
    );
    let last = status.last_update.unwrap();
    assert_eq!(
        (last.from.as_str(), last.to.as_str(), last.result.as_str()),
        ("rendered-a", "rendered-b", "Done")
    );
    assert!(last.duration_ms.is_some());
}

#[tokio::test]
async fn an_unreconcilable_config_changes_nothing() {
    let node = Node::new();
    node.provision(&a()).await;
    let mut bad = mc("rendered-bad", &[(CRIO_POLICY, "x")], &[], IMAGE);
    let mut config = bad.spec.config.take().unwrap().to_value().unwrap();
    config["storage"]["disks"] = json!([{"device": "/dev/vdb", "wipeTable": true}]);
    bad.spec.config = Some(IgnitionJson::from_value(config));
    let report = node.engine().update(&bad, false).await;
    match &report.outcome {
        Outcome::Unreconcilable(r) => {
            assert!(r.contains("ignition disks section contains changes"), "{r}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(node.read(CRIO_POLICY).unwrap(), "{}\n");
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    assert_eq!(node.recorded_step(), None);
    assert_eq!(
        node.cluster.last_state().unwrap().0,
        NodeState::Unreconcilable
    );
    assert!(
        node.cluster
            .events()
            .contains(&"FailedToReconcile".to_string())
    );
}

#[tokio::test]
async fn drift_fails_the_preflight_check_with_every_mismatch() {
    let node = Node::new();
    node.provision(&a()).await;
    node.write(CRIO_POLICY, "edited by hand\n");
    node.write("/etc/chrony.conf", "edited too\n");
    let b = mc(
        "rendered-b",
        &[(CRIO_POLICY, "{}\n"), ("/etc/chrony.conf", "pool b\n")],
        &[],
        IMAGE,
    );
    let report = node.engine().update(&b, false).await;
    assert_eq!(
        report.outcome,
        Outcome::Degraded(
            "unexpected on-disk state validating against rendered-a: content mismatch for file \
             \"/etc/containers/policy.json\"; content mismatch for file \"/etc/chrony.conf\""
                .into()
        )
    );
    assert_eq!(node.read("/etc/chrony.conf").unwrap(), "edited too\n");
    assert_eq!(node.recorded_step(), None);
    assert!(
        node.cluster
            .events()
            .contains(&"PreflightConfigDriftCheckFailed".to_string())
    );
}

#[tokio::test]
async fn a_failed_post_action_rolls_files_back() {
    let node = Node::new();
    node.provision(&a()).await;
    node.systemd
        .fail_job(JobKind::Reload, "crio.service", "failed");
    let b = mc(
        "rendered-b",
        &[(CRIO_POLICY, "new\n"), ("/etc/chrony.conf", "pool a\n")],
        &[],
        IMAGE,
    );
    let report = node.engine().update(&b, false).await;
    match &report.outcome {
        Outcome::Degraded(r) => {
            assert!(r.contains("reloading crio.service"), "{r}");
            assert!(r.contains("result 'failed'"), "{r}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(node.read(CRIO_POLICY).unwrap(), "{}\n");
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    assert_eq!(node.recorded_step(), None);
    assert!(
        node.cluster
            .events()
            .contains(&"FailedServiceReload".to_string())
    );
    assert_eq!(node.cluster.last_state().unwrap().0, NodeState::Degraded);
}

#[tokio::test]
async fn without_systemd_post_actions_are_skipped_and_said_so() {
    let node = Node::new();
    let seams = Seams {
        systemd: None,
        ..node.seams()
    };
    node.provision(&a()).await;
    let b = mc(
        "rendered-b",
        &[(CRIO_POLICY, "new\n"), ("/etc/chrony.conf", "pool a\n")],
        &[],
        IMAGE,
    );
    let report = node.engine_with(seams).update(&b, false).await;
    assert_eq!(report.outcome, Outcome::Done);
    assert_eq!(
        report.skipped_actions,
        vec!["Reload crio.service (no live systemd for an alternate root)"]
    );
    assert!(node.systemd.calls().is_empty());
}

#[tokio::test]
async fn os_changes_without_rpm_ostree_are_refused_or_left_out() {
    let node = Node::new();
    node.provision(&a()).await;
    let b = mc(
        "rendered-b",
        &[(CRIO_POLICY, "new\n"), ("/etc/chrony.conf", "pool a\n")],
        &["nosmt"],
        IMAGE,
    );
    let seams = Seams {
        os: None,
        os_unavailable: "no system bus".into(),
        ..node.seams()
    };
    let report = node.engine_with(seams.clone()).update(&b, false).await;
    assert_eq!(
        report.outcome,
        Outcome::Degraded(
            "config rendered-b changes the OS (kernel arguments: +nosmt), \
             which needs rpm-ostree: no system bus; nothing was changed"
                .into()
        )
    );
    assert_eq!(node.read(CRIO_POLICY).unwrap(), "{}\n");

    let mut engine = node.engine_with(seams);
    engine.opts.skip_os = true;
    let report = engine.update(&b, false).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(report.left_out, vec!["kernel arguments: +nosmt"]);
    assert_eq!(node.read(CRIO_POLICY).unwrap(), "new\n");
    // The recorded config says what the node runs: without the kernel argument.
    let json = node
        .read(machine_config::mco::paths::CURRENT_CONFIG)
        .unwrap();
    assert!(!json.contains("nosmt"), "{json}");
}

#[tokio::test]
async fn the_force_file_reapplies_over_drift_without_a_reboot_and_is_consumed() {
    let node = Node::new();
    node.provision(&a()).await;
    node.write(CRIO_POLICY, "drifted\n");
    node.write(machine_config::mco::paths::FORCE_FILE, "");
    let engine = node.engine();
    assert!(engine.force_file_present().unwrap());
    let report = engine.update(&a(), true).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(node.read(CRIO_POLICY).unwrap(), "{}\n");
    assert!(!engine.force_file_present().unwrap());
    assert!(node.rebooter.reasons().is_empty());
    assert!(
        node.os
            .calls()
            .iter()
            .all(|c| matches!(c, crate::os::OsCall::Status)),
        "{:?}",
        node.os.calls()
    );
}

#[tokio::test]
async fn a_failed_drain_changes_nothing() {
    let node = Node::new();
    node.provision(&a()).await;
    node.cluster.fail_drain(Some(
        "pod default/web blocked by PodDisruptionBudget default/web-pdb",
    ));
    let b = mc(
        "rendered-b",
        &[(CRIO_POLICY, "{}\n"), (REBOOT_FILE, "x")],
        &[],
        IMAGE,
    );
    let report = node.engine().update(&b, false).await;
    assert_eq!(
        report.outcome,
        Outcome::Degraded(
            "failed to drain node: pod default/web blocked by PodDisruptionBudget default/web-pdb"
                .into()
        )
    );
    assert_eq!(node.read(REBOOT_FILE), None);
    assert_eq!(node.recorded_step(), None);
}
