//! What the engine tells the MachineConfigNode at each step, and the MCD's OS events, for a
//! reboot update (drain, kernel arguments staged, reboot, verified) and a rebootless one.

use machine_config::mco::node_conditions::Progress;

use super::*;
use crate::engine::Outcome;

fn config(name: &str, kargs: &[&str]) -> MachineConfig {
    mc(name, &[(CRIO_POLICY, "{}\n")], kargs, IMAGE)
}

#[tokio::test]
async fn a_reboot_update_reports_each_step_of_the_mcd() {
    let node = Node::new();
    node.provision(&config("rendered-a", &[])).await;
    let b = mc(
        "rendered-b",
        &[(CRIO_POLICY, "{}\n"), (REBOOT_FILE, "b\n")],
        &["nosmt"],
        IMAGE,
    );
    let seen = node.cluster.progress().len();
    assert_eq!(
        node.engine().update(&b, false).await.outcome,
        Outcome::Rebooting
    );
    node.reboot(false);
    assert_eq!(node.engine().resume().await.unwrap().outcome, Outcome::Done);
    let b = || "rendered-b".to_string();
    assert_eq!(
        node.cluster.progress()[seen..],
        [
            Progress::NeedsUpdate,
            Progress::Prepared { drain: true },
            Progress::Draining { config: b() },
            Progress::Cordoned,
            Progress::Drained { config: b() },
            // the MCD counts neither kernel arguments as OS nor files as "SSH Keys"
            Progress::ApplyingFilesAndOs {
                os: false,
                files: false
            },
            Progress::AppliedFilesAndOs {
                os: false,
                files: false
            },
            Progress::RebootRequired,
            // after the boot
            Progress::Rebooted,
            Progress::Resumed {
                config: b(),
                applying: true
            },
            Progress::Uncordoned,
            Progress::Degraded { error: None },
        ]
    );
    let events: Vec<(String, String)> = node
        .cluster
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            crate::engine::fake::ClusterCall::Event(r, m) => Some((r, m)),
            _ => None,
        })
        .collect();
    for wanted in [
        (
            "OSUpgradeSkipped",
            "OS upgrade skipped; new MachineConfig (rendered-b) has same OS image (".to_string()
                + IMAGE
                + ") as old MachineConfig (rendered-a)",
        ),
        ("OSUpdateStaged", "Changes to OS staged".to_string()),
        (
            "NodeDone",
            "Setting node node-0, currentConfig rendered-b to Done".to_string(),
        ),
    ] {
        assert!(
            events.contains(&(wanted.0.to_string(), wanted.1.clone())),
            "{wanted:?} not in {events:?}"
        );
    }
}

#[tokio::test]
async fn a_failed_reload_is_the_mcd_event_and_node_degraded() {
    let node = Node::new();
    node.provision(&config("rendered-a", &[])).await;
    // A reload that fails: the MCD's FailedServiceReload, then NodeDegraded with the reason.
    node.systemd.fail_job(
        crate::host::systemd::JobKind::Reload,
        "crio.service",
        "failed",
    );
    let c = mc("rendered-c", &[(CRIO_POLICY, "[]\n")], &[], IMAGE);
    let report = node.engine().update(&c, false).await;
    let Outcome::Degraded(reason) = report.outcome else {
        panic!("{report:?}")
    };
    let progress = node.cluster.progress();
    assert_eq!(
        progress.last(),
        Some(&Progress::Degraded {
            error: Some(reason)
        })
    );
    assert!(
        node.cluster.calls().iter().any(|c| matches!(c,
            crate::engine::fake::ClusterCall::Event(r, m)
                if r == "FailedServiceReload"
                    && m.starts_with("Reloading service crio.service failed. Error: ")
        )),
        "{:?}",
        node.cluster.calls()
    );
}
