//! Originals survive rollbacks and repeated rollbacks (the reason for `engine::backups`).

use super::*;
use crate::engine::Outcome;
use crate::engine::record::{self, Step};

const ORIG: &str = "/etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig";
const ADMIN_ORIG: &str = "/etc/machine-config-daemon/orig/etc/admin.conf.mcdorig";

/// `a` manages chrony.conf (whose vendor original is kept); `b` drops it and takes over
/// admin.conf, which an administrator wrote.
fn a() -> MachineConfig {
    mc(
        "rendered-a",
        &[(CRIO_POLICY, "{}\n"), ("/etc/chrony.conf", "pool a\n")],
        &[],
        IMAGE,
    )
}

fn b() -> MachineConfig {
    mc(
        "rendered-b",
        &[(CRIO_POLICY, "[]\n"), ("/etc/admin.conf", "managed\n")],
        &[],
        IMAGE,
    )
}

/// An engine where changes to these files need no reboot (a user policy).
fn engine(node: &Node, seams: Seams) -> crate::engine::Engine {
    let none = machine_config::machineconfiguration::PolicyAction {
        type_: "None".into(),
        reload: None,
        restart: None,
    };
    let user = machine_config::NodeDisruptionPolicy {
        files: ["/etc/chrony.conf", "/etc/admin.conf"]
            .iter()
            .map(|path| machine_config::machineconfiguration::FilePolicy {
                path: path.to_string(),
                actions: vec![none.clone()],
            })
            .collect(),
        ..Default::default()
    };
    let policy = crate::engine::ActivePolicy {
        policies: machine_config::ClusterPolicies::merged(&user),
        overrides: Default::default(),
        source: "a test policy".into(),
    };
    node.engine_with(seams)
        .with_policy_source(std::sync::Arc::new(crate::engine::FixedPolicy(policy)))
}

#[tokio::test]
async fn rollback_keeps_originals_even_when_repeated() {
    let node = Node::new();
    node.provision(&a()).await;
    assert_eq!(node.read(ORIG).unwrap(), "vendor\n");
    node.write("/etc/admin.conf", "admin\n");

    // A forward apply that fails at the end (the crio reload), then a rollback.
    let failing = FakeSystemd::new()
        .with_unit("crio.service", ActiveState::Active)
        .with_reloadable("crio.service");
    failing.fail_job(
        crate::host::systemd::JobKind::Reload,
        "crio.service",
        "failed",
    );
    let failing = Seams {
        systemd: Some(Arc::new(failing)),
        ..node.seams()
    };
    let report = engine(&node, failing).update(&b(), false).await;
    assert!(matches!(report.outcome, Outcome::Degraded(_)), "{report:?}");
    let check = |when: &str| {
        assert_eq!(node.read("/etc/chrony.conf").unwrap(), "pool a\n", "{when}");
        assert_eq!(node.read(ORIG).unwrap(), "vendor\n", "{when}");
        assert_eq!(node.read("/etc/admin.conf").unwrap(), "admin\n", "{when}");
        assert_eq!(node.read(ADMIN_ORIG), None, "{when}");
    };
    check("after the rollback");

    // A crash after the rollback but before the record was cleared: the rollback runs again
    // over a disk where the releases already happened.
    let root = Root::open(node.path()).unwrap();
    let mut rec = record::UpdateRecord::new(a(), b(), Step::RollingBack, "boot-1");
    rec.stamped = vec!["/etc/admin.conf".into(), "/etc/chrony.conf".into()];
    rec.reason = Some("crashed".into());
    record::store(&root, &rec).unwrap();
    let report = engine(&node, node.seams()).resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Degraded("crashed".into()));
    check("after the rollback ran twice");

    // The update itself, once crio reloads again: the vendor file comes back, the admin's
    // file is kept as the original of the managed one.
    let report = engine(&node, node.seams()).update(&b(), false).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(node.read("/etc/chrony.conf").unwrap(), "vendor\n");
    assert_eq!(node.read(ORIG), None);
    assert_eq!(node.read("/etc/admin.conf").unwrap(), "managed\n");
    assert_eq!(node.read(ADMIN_ORIG).unwrap(), "admin\n");
}
