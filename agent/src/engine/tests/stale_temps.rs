//! Temp files that killed writes left: removed at start in the directories the agent writes in
//! (those of the current config, of a recorded update's configs, their backups, the unit and
//! state directories), and nowhere else.

use super::*;
use crate::engine::record::{self, Step, UpdateRecord};

/// A pid above Linux's largest `pid_max`: the writer is certainly gone.
const DEAD: u32 = 999_999_999;

fn stale(dir: &str, name: &str) -> String {
    format!("{dir}/.{name}.mco-tmp-{DEAD}-7")
}

#[tokio::test]
async fn stale_temp_files_in_the_managed_directories_are_removed_at_start() {
    let node = Node::new();
    let current = mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE);
    node.provision(&current).await;
    // An update to a config with a file in a directory the current one does not write in.
    let desired = mc(
        "rendered-b",
        &[(CRIO_POLICY, "{}\n"), ("/etc/nmstate/new.yaml", "b\n")],
        &[],
        IMAGE,
    );
    let root = Root::open(node.path()).unwrap();
    record::store(
        &root,
        &UpdateRecord::new(current, desired, Step::Writing, "boot-1"),
    )
    .unwrap();
    let removable = [
        stale("/etc/containers", "policy.json"),
        stale("/etc/nmstate", "new.yaml"),
        stale("/etc/machine-config-daemon/orig/etc/nmstate", "new.yaml"),
        stale(
            "/etc/machine-config-daemon/noorig/etc/containers",
            "policy.json",
        ),
        stale("/etc/machine-config-daemon", "currentconfig"),
        stale("/etc/machine-config-daemon", "mco-agent-update.json"),
        stale("/etc/systemd/system", "kubelet.service"),
        stale("/etc/systemd/system/multi-user.target.wants", "foo.service"),
        stale("/home/core/.ssh/authorized_keys.d", "ignition"),
        stale("/etc", "shadow"),
    ];
    let kept = [
        stale("/var/lib/other", "data"),
        stale("/etc/containers/registries.d", "x.yaml"),
        "/etc/containers/.policy.json.tmp1234".to_string(),
        "/etc/nmstate/.new.yaml.mco-tmp-saved".to_string(),
    ];
    for path in removable.iter().chain(&kept) {
        node.write(path, "partial");
    }

    let mut removed: Vec<String> = node
        .engine()
        .remove_stale_temp_files()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    removed.sort();
    let mut expected = removable.to_vec();
    expected.sort();
    assert_eq!(removed, expected);
    for path in &removable {
        assert_eq!(node.read(path), None, "{path} left");
    }
    for path in &kept {
        assert_eq!(
            node.read(path).as_deref(),
            Some("partial"),
            "{path} removed"
        );
    }
    assert_eq!(node.read(CRIO_POLICY).as_deref(), Some("{}\n"));
    assert_eq!(node.recorded_step().as_deref(), Some("Writing"));
}
