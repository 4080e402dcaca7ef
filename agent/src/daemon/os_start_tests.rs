//! What the daemon does with the OS once per start, one row per MCD decision: `rpm-ostree
//! cleanup -r` (`removeRollback` in `checkStateOnFirstRun`) and the previous boot's
//! finalization failure (`syncFinalizationFailureAnnotation`, the `possible root cause`
//! suffix on validation errors).

use std::sync::Arc;

use machine_config::mco::NodeState;
use machine_config::mco::annotations::OSTREE_FINALIZE_STAGED_FAILURE;

use super::tests::FakeSource;
use super::{Daemon, DesiredFeed};
use crate::engine::fake::ClusterCall;
use crate::engine::tests::{CRIO_POLICY, IMAGE, Node, mc};
use crate::host::command::FakeCommands;
use crate::os::{CleanupTarget, OsCall};

const RHCOS: &str = "ID=\"rhcos\"\nVERSION_ID=\"4.18\"\n";
const JOURNAL: &[&str] = &["journalctl", "-b", "-1"];

async fn provisioned(os_release: Option<&str>) -> Node {
    let node = Node::new();
    node.provision(&mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE))
        .await;
    if let Some(text) = os_release {
        node.write("/etc/os-release", text);
    }
    node
}

async fn start(
    node: &Node,
    commands: Option<FakeCommands>,
    annotated: bool,
) -> anyhow::Result<Daemon> {
    let mut seams = node.seams();
    seams.commands = commands.map(|c| Arc::new(c) as Arc<dyn crate::host::command::HostCommands>);
    let (_tx, rx) = futures::channel::mpsc::unbounded::<crate::cluster::DesiredTarget>();
    let mut d = Daemon::new(
        node.engine_with(seams),
        Arc::new(FakeSource::default()),
        DesiredFeed::Cluster(Box::pin(rx)),
    )
    .with_finalize_failure_annotated(annotated);
    d.start().await?;
    Ok(d)
}

fn rollback_cleanups(node: &Node) -> usize {
    node.os
        .calls()
        .iter()
        .filter(|c| matches!(c, OsCall::Cleanup(t) if t == &[CleanupTarget::Rollback]))
        .count()
}

#[tokio::test]
async fn the_rollback_deployment_is_removed_once_per_start_on_coreos_only() {
    for (what, os_release, cleanups) in [
        ("removeRollback: a CoreOS node (RHCOS)", Some(RHCOS), 1),
        (
            "removeRollback: Fedora CoreOS is a CoreOS variant",
            Some("ID=fedora\nVARIANT_ID=coreos\n"),
            1,
        ),
        ("not a CoreOS variant: left alone", Some("ID=debian\n"), 0),
        ("no os-release: left alone", None, 0),
    ] {
        let node = provisioned(os_release).await;
        let _d = start(&node, None, false).await.unwrap();
        assert_eq!(rollback_cleanups(&node), cleanups, "{what}");
        assert_eq!(
            node.cluster.last_state().unwrap().0,
            NodeState::Done,
            "{what}"
        );
    }
}

#[tokio::test]
async fn a_failed_rollback_removal_degrades_and_fails_the_start() {
    let node = provisioned(Some(RHCOS)).await;
    node.os.fail_next("Cleanup", "cannot lock sysroot");
    let e = start(&node, None, false)
        .await
        .err()
        .expect("the start fails");
    let want =
        "failed to remove rollback: rpm-ostree Cleanup transaction failed: cannot lock sysroot";
    assert_eq!(e.to_string(), want);
    assert_eq!(
        node.cluster.last_state(),
        Some((NodeState::Degraded, want.to_string()))
    );
    // the next start (systemd restarts the agent) tries again
    let _d = start(&node, None, false).await.unwrap();
    assert_eq!(rollback_cleanups(&node), 2);
    assert_eq!(node.cluster.last_state().unwrap().0, NodeState::Done);
}

fn annotations(node: &Node) -> Vec<(String, String)> {
    node.cluster
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            ClusterCall::Annotate(k, v) => Some((k, v)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_previous_boots_finalization_failure_is_annotated_and_named_as_a_root_cause() {
    let failure = "error: Installing kernel: No space left on device";
    let annotated = |v: &str| vec![(OSTREE_FINALIZE_STAGED_FAILURE.to_string(), v.to_string())];
    for (what, commands, had_annotation, want) in [
        (
            "syncFinalizationFailureAnnotation: the first error: line is set",
            Some(FakeCommands::new().ok(JOURNAL, &format!("Finalizing\n{failure}\n"))),
            false,
            annotated(failure),
        ),
        (
            "no error, the annotation exists: set to \"\", not deleted",
            Some(FakeCommands::new().ok(JOURNAL, "Finalizing\nBootloader updated\n")),
            true,
            annotated(""),
        ),
        (
            "no error, no annotation: nothing written",
            Some(FakeCommands::new().ok(JOURNAL, "")),
            false,
            vec![],
        ),
        (
            "journalctl fails (no previous boot): only a warning",
            Some(FakeCommands::new().fails(JOURNAL, 1, "No such boot ID in journal")),
            true,
            vec![],
        ),
        (
            "no host programs (alternate root): nothing read",
            None,
            true,
            vec![],
        ),
    ] {
        let node = provisioned(None).await;
        let _d = start(&node, commands, had_annotation).await.unwrap();
        assert_eq!(annotations(&node), want, "{what}");
    }

    // The validation error names it (`; possible root cause: ...`).
    let node = provisioned(None).await;
    node.write(CRIO_POLICY, "edited\n");
    let commands = FakeCommands::new().ok(JOURNAL, &format!("{failure}\n"));
    let _d = start(&node, Some(commands), false).await.unwrap();
    let validation = node.cluster.calls().into_iter().find_map(|c| match c {
        ClusterCall::Report(NodeState::Degraded, r) if r.starts_with("unexpected") => Some(r),
        _ => None,
    });
    assert_eq!(
        validation,
        Some(format!(
            "unexpected on-disk state validating against rendered-a: content mismatch for file \
                 \"/etc/containers/policy.json\"; possible root cause: {failure}"
        ))
    );
}
