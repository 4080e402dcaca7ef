//! Restarts at recorded steps (the states a crash leaves), without failpoints: the record and
//! the disk are set up as the crash would leave them.

use super::*;
use crate::engine::record::{self, Step, UpdateRecord};
use crate::engine::{Outcome, backups};
use crate::os::{KargsChange, OsUpdater};

const ONE: &str = "/etc/nmstate/openshift/one";
const TWO: &str = "/etc/nmstate/openshift/two";

fn a() -> MachineConfig {
    mc(
        "rendered-a",
        &[(CRIO_POLICY, "{}\n"), (ONE, "a1\n"), (TWO, "a2\n")],
        &[],
        IMAGE,
    )
}

fn b() -> MachineConfig {
    mc(
        "rendered-b",
        &[(CRIO_POLICY, "[]\n"), (ONE, "b1\n"), (TWO, "b2\n")],
        &[],
        IMAGE,
    )
}

/// Records an update from the node's current config to `desired` at `step`, as `begin` does.
fn record_at(
    node: &Node,
    current: &MachineConfig,
    desired: &MachineConfig,
    step: Step,
) -> UpdateRecord {
    let root = Root::open(node.path()).unwrap();
    let mut rec = UpdateRecord::new(current.clone(), desired.clone(), step, "boot-1");
    backups::prepare(
        &root,
        &mut rec,
        &current.ignition().unwrap(),
        &desired.ignition().unwrap(),
    )
    .unwrap();
    record::store(&root, &rec).unwrap();
    rec
}

#[tokio::test]
async fn interrupted_while_writing_rolls_back_then_the_retry_converges() {
    let node = Node::new();
    node.provision(&a()).await;
    record_at(&node, &a(), &b(), Step::Writing);
    node.write(ONE, "b1\n"); // half-written: one file of two
    let report = node.engine().resume().await.unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Degraded(
            "the update to rendered-b was interrupted while writing files, units and users; rolled back, will retry".into()
        )
    );
    assert_eq!(
        (node.read(ONE).unwrap(), node.read(TWO).unwrap()),
        ("a1\n".into(), "a2\n".into())
    );
    assert_eq!(node.recorded_step(), None);
    assert_eq!(
        node.engine().update(&b(), false).await.outcome,
        Outcome::Done
    );
    assert_eq!(node.read(TWO).unwrap(), "b2\n");
}

#[tokio::test]
async fn interrupted_during_post_actions_runs_them_again_and_completes() {
    let node = Node::new();
    node.provision(&a()).await;
    record_at(&node, &a(), &b(), Step::PostActions);
    for (p, c) in [(CRIO_POLICY, "[]\n"), (ONE, "b1\n"), (TWO, "b2\n")] {
        node.write(p, c);
    }
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(report.actions, vec!["Reload crio.service"]);
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
}

/// A resumed update runs the actions it was planned with, whatever the policies say now.
#[tokio::test]
async fn a_resumed_update_keeps_the_policy_it_was_planned_with() {
    let node = Node::new();
    node.provision(&a()).await;
    let mut rec = record_at(&node, &a(), &b(), Step::PostActions);
    let restart_kubelet = machine_config::machineconfiguration::PolicyAction {
        type_: "Restart".into(),
        reload: None,
        restart: Some(machine_config::machineconfiguration::ServiceRef {
            service_name: "kubelet.service".into(),
        }),
    };
    let user = machine_config::NodeDisruptionPolicy {
        files: vec![machine_config::machineconfiguration::FilePolicy {
            path: "/etc/nmstate/openshift".into(),
            actions: vec![restart_kubelet],
        }],
        ..Default::default()
    };
    rec.policy = Some(crate::engine::ActivePolicy {
        policies: machine_config::ClusterPolicies::merged(&user),
        overrides: Default::default(),
        source: "MachineConfiguration/cluster generation 7".into(),
    });
    record::store(&Root::open(node.path()).unwrap(), &rec).unwrap();
    for (p, c) in [(CRIO_POLICY, "[]\n"), (ONE, "b1\n"), (TWO, "b2\n")] {
        node.write(p, c);
    }
    // The restarted engine's own policies are the defaults (ONE and TWO: None).
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(
        report.actions,
        vec![
            "Reload crio.service",
            "Restart kubelet.service",
            "Restart kubelet.service"
        ]
    );
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
}

#[tokio::test]
async fn interrupted_while_draining_drains_again() {
    let node = Node::new();
    node.provision(&a()).await;
    record_at(&node, &a(), &b(), Step::Draining);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert!(
        node.cluster
            .calls()
            .contains(&crate::engine::fake::ClusterCall::Drain(
                "rendered-b".into()
            ))
    );
}

#[tokio::test]
async fn an_unplanned_reboot_while_staging_verifies_what_booted() {
    let node = Node::new();
    node.provision(&a()).await;
    let mut b = b();
    b.spec.kernel_arguments = vec!["nosmt".into()];
    let mut rec = record_at(&node, &a(), &b, Step::Os);
    rec.os_staged = true;
    rec.reboot = true;
    record::store(&Root::open(node.path()).unwrap(), &rec).unwrap();
    for (p, c) in [(CRIO_POLICY, "[]\n"), (ONE, "b1\n"), (TWO, "b2\n")] {
        node.write(p, c);
    }
    node.os
        .kernel_args(None, &KargsChange::from_argv(&["--append=nosmt"]).unwrap())
        .await
        .unwrap();
    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
}

#[tokio::test]
async fn interrupted_while_staging_without_a_reboot_rolls_back() {
    let node = Node::new();
    node.provision(&a()).await;
    let mut b = b();
    b.spec.kernel_arguments = vec!["nosmt".into()];
    let mut rec = record_at(&node, &a(), &b, Step::Os);
    rec.os_staged = true;
    record::store(&Root::open(node.path()).unwrap(), &rec).unwrap();
    node.write(ONE, "b1\n");
    node.os
        .kernel_args(None, &KargsChange::from_argv(&["--append=nosmt"]).unwrap())
        .await
        .unwrap();
    let report = node.engine().resume().await.unwrap();
    assert!(
        matches!(&report.outcome, Outcome::Degraded(r) if r.contains("interrupted while staging OS changes")),
        "{report:?}"
    );
    assert_eq!(node.read(ONE).unwrap(), "a1\n");
    assert!(
        node.os.deployments().staged().is_none(),
        "{:?}",
        node.os.deployments()
    );
}

/// Re-targeted (another desired config) while an update is recorded at any step: that update
/// is rolled back to the current config first, then the new one runs.
#[tokio::test]
async fn an_update_recorded_at_any_step_is_rolled_back_when_re_targeted() {
    let c = mc(
        "rendered-c",
        &[(CRIO_POLICY, "{}\n"), (ONE, "c1\n"), (TWO, "a2\n")],
        &[],
        IMAGE,
    );
    for step in [
        Step::Draining,
        Step::Writing,
        Step::Os,
        Step::PostActions,
        Step::RebootRequested,
        Step::Verifying,
        Step::NotTaken,
        Step::RollingBack,
    ] {
        let node = Node::new();
        node.provision(&a()).await;
        record_at(&node, &a(), &b(), step);
        node.write(ONE, "b1\n"); // part of rendered-b is on disk
        let report = node.engine().update(&c, false).await;
        assert_eq!(report.outcome, Outcome::Done, "{step}: {report:?}");
        assert_eq!(report.from, "rendered-a", "{step}");
        assert_eq!(node.current().as_deref(), Some("rendered-c"), "{step}");
        assert_eq!(
            (node.read(ONE).unwrap(), node.read(TWO).unwrap()),
            ("c1\n".into(), "a2\n".into()),
            "{step}"
        );
        assert_eq!(node.recorded_step(), None, "{step}");
    }
}
