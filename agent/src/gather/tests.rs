//! Collection over a node tree in a temp dir, the journal and rpm-ostreed faked.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde_json::json;

use super::*;
use crate::engine::record::{self, HookMark, HookState, Step};
use crate::rootfs::Owner;

const HASH: &str = "$6$gathersalt$GATHERHASHsecretvalue0123456789";
const KEY_BODY: &str = "R0FUSEVSUFJJVkFURUtFWQ";
const AUTH: &str = "R0FUSEVSUFVMTFNFQ1JFVA";
const DIRS: [&str; 2] = ["/usr/lib/mco-agent/config.d", "/etc/mco-agent/config.d"];

fn key() -> String {
    format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\n")
}

fn data_url(text: &str) -> String {
    format!(
        "data:,{}",
        percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC)
    )
}

fn config(name: &str) -> MachineConfig {
    let pull = format!(r#"{{"auths":{{"registry.example":{{"auth":"{AUTH}"}}}}}}"#);
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": {
            "ignition": {"version": "3.4.0"},
            "passwd": {"users": [{"name": "core", "passwordHash": HASH}]},
            "storage": {"files": [
                {"path": "/home/core/.ssh/id_ed25519", "mode": 384, "contents": {"source": data_url(&key())}},
                {"path": KUBELET_PULL_SECRET, "mode": 384, "contents": {"source": data_url(&pull)}}
            ]}
        }}
    }))
    .unwrap()
}

fn write(root: &Root, path: &str, text: &str, mode: u32) {
    root.write_atomic(Path::new(path), text.as_bytes(), mode, owner())
        .unwrap();
}

fn owner() -> Owner {
    Owner {
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
    }
}

/// A node in the middle of an update `rendered-worker-1 -> rendered-worker-2`, at the reboot,
/// its post-apply hook run.
fn node() -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    let current = config("rendered-worker-1");
    write(
        &root,
        CURRENT_CONFIG,
        &serde_json::to_string(&current).unwrap(),
        0o644,
    );
    let mut rec = UpdateRecord::new(
        current,
        config("rendered-worker-2"),
        Step::RebootRequested,
        "b1",
    );
    rec.hooks = vec![HookMark {
        phase: "post-apply".into(),
        name: "10-check".into(),
        state: HookState::Succeeded,
    }];
    record::store(&root, &rec).unwrap();
    write(
        &root,
        "/etc/mco-agent/hooks.d/post-apply/10-check",
        "#!/bin/sh\ntrue\n",
        0o755,
    );
    write(
        &root,
        "/etc/mco-agent/config.d/60-fleet-lock.toml",
        "strategy = \"fleet_lock\"\nfleet_lock_url = \"https://lockuser:LOCKPASSWORD@lock.example\"\n",
        0o644,
    );
    write(
        &root,
        "/etc/shadow",
        &format!("core:{HASH}:19000::::::\n"),
        0o600,
    );
    write(&root, KUBELET_PULL_SECRET, r#"{"auths":{}}"#, 0o600);
    write(&root, "/etc/ssh/ssh_host_ed25519_key", &key(), 0o600);
    (dir, root)
}

fn sources() -> FakeSources {
    let mut journals = BTreeMap::new();
    journals.insert(
        ("mco-agent.service".to_string(), 0),
        Ok(format!("started\nhook printed {HASH}\n{}done\n", key()).into_bytes()),
    );
    journals.insert(
        ("ostree-finalize-staged.service".to_string(), 0),
        Ok(b"Finalized deployment\n".to_vec()),
    );
    FakeSources {
        journals,
        rpm_ostree: Some(Ok(
            json!({"deployments": [{"id": "fedora-abc.0", "booted": true,
            "origin": "https://mirror:MIRRORPASS@mirror.example/os"}], "transaction": null}),
        )),
    }
}

async fn bundle(root: &Root, sources: &FakeSources) -> Bundle {
    let request = Request {
        status: json!({"state": "Working", "current": "rendered-worker-1", "desired": "rendered-worker-2",
                       "deployments": {"source": "sysroot /"}}),
        config_dirs: &DIRS,
        now_ms: 1_700_000_000_000,
    };
    collect(root, request, sources).await
}

#[tokio::test]
async fn every_item_is_in_the_manifest_with_its_state() {
    let (_dir, root) = node();
    let b = bundle(&root, &sources()).await;
    let got: Vec<(&str, State)> = b
        .manifest
        .items
        .iter()
        .map(|i| (i.name.as_str(), i.state))
        .collect();
    assert_eq!(
        got,
        [
            ("status.json", State::Collected),
            ("node/var/lib/mco-agent/boot-rollback.json", State::Absent),
            (
                "node/etc/machine-config-daemon/mco-agent-update.json",
                State::Collected
            ),
            (
                "node/etc/machine-config-daemon/currentconfig",
                State::Collected
            ),
            ("configs.json", State::Collected),
            ("journal/mco-agent.service.boot0.log", State::Collected),
            ("journal/mco-agent.service.boot-1.log", State::Failed),
            (
                "journal/ostree-finalize-staged.service.boot0.log",
                State::Collected
            ),
            (
                "journal/ostree-finalize-staged.service.boot-1.log",
                State::Failed
            ),
            ("rpm-ostree-status.json", State::Collected),
            ("node/usr/lib/mco-agent/config.d", State::Absent),
            (
                "node/etc/mco-agent/config.d/60-fleet-lock.toml",
                State::Collected
            ),
            ("hooks.json", State::Collected),
        ]
    );
    // every collected item is a file of the bundle, and nothing else is
    let collected: Vec<&str> = b
        .manifest
        .items
        .iter()
        .filter(|i| i.state == State::Collected)
        .map(|i| i.name.as_str())
        .collect();
    let files: Vec<&str> = b.files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(collected, files);
    let failed = &b.manifest.items[6];
    assert_eq!(failed.reason.as_deref(), Some("no boot -1 in the journal"));
    assert_eq!(failed.source, "fake-journal mco-agent.service -1");
    let not_collected: Vec<&str> = b
        .manifest
        .not_collected
        .iter()
        .map(|n| n.why.as_str())
        .collect();
    assert_eq!(
        not_collected,
        [
            "password hashes",
            "the cluster's pull secret (config.json)",
            "an SSH host private key"
        ]
    );
}

#[tokio::test]
async fn no_secret_reaches_the_archive_and_each_is_listed() {
    let (_dir, root) = node();
    let b = bundle(&root, &sources()).await;
    let archive = tar_gz(&b).unwrap();
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(archive.as_slice())
        .read_to_end(&mut text)
        .unwrap();
    let text = String::from_utf8_lossy(&text);
    for secret in [
        HASH,
        "GATHERHASHsecretvalue",
        KEY_BODY,
        AUTH,
        "LOCKPASSWORD",
        "MIRRORPASS",
    ] {
        assert!(!text.contains(secret), "{secret} is in the archive");
    }
    let left = |name: &str| -> Vec<(String, String)> {
        let item = b.manifest.items.iter().find(|i| i.name == name).unwrap();
        item.left_out
            .iter()
            .map(|l| (l.at.clone(), l.why.clone()))
            .collect()
    };
    let contents = "file or unit contents, which may hold private keys, tokens or pull secrets";
    let mut record_left = Vec::new();
    for which in ["current", "desired"] {
        record_left.extend([
            (
                format!("$.{which}.spec.config.passwd.users[0].passwordHash"),
                "a password hash".to_string(),
            ),
            (
                format!("$.{which}.spec.config.storage.files[0].contents"),
                contents.to_string(),
            ),
            (
                format!("$.{which}.spec.config.storage.files[1].contents"),
                contents.to_string(),
            ),
        ]);
    }
    assert_eq!(
        left("node/etc/machine-config-daemon/mco-agent-update.json"),
        record_left
    );
    assert_eq!(
        left("journal/mco-agent.service.boot0.log"),
        [
            ("line 2".to_string(), "a password hash".to_string()),
            ("line 3".to_string(), "a private key".to_string())
        ]
    );
    assert_eq!(
        left("node/etc/mco-agent/config.d/60-fleet-lock.toml"),
        [("line 2".to_string(), "the credentials of a URL".to_string())]
    );
    assert_eq!(left("rpm-ostree-status.json").len(), 1);
    assert_eq!(
        left("hooks.json"),
        [(
            "/etc/mco-agent/hooks.d/post-apply/10-check".to_string(),
            "a hook's contents (a script may hold credentials; its sha256 identifies it)"
                .to_string()
        )]
    );
}

fn file_json(b: &Bundle, name: &str) -> serde_json::Value {
    let (_, bytes) = b.files.iter().find(|(n, _)| n == name).unwrap();
    serde_json::from_slice(bytes).unwrap()
}

#[tokio::test]
async fn configs_hooks_and_rpm_ostree_say_what_support_asks_first() {
    let (_dir, root) = node();
    let b = bundle(&root, &sources()).await;
    let configs = file_json(&b, "configs.json");
    assert_eq!(configs["current"], "rendered-worker-1");
    assert_eq!(configs["desired"], "rendered-worker-2");
    assert_eq!(
        configs["plan_of"],
        "the update in progress, rendered-worker-1 -> rendered-worker-2"
    );
    assert_eq!(configs["plan"]["reconcilable"], true, "{configs}");
    let hooks = file_json(&b, "hooks.json");
    let hook = &hooks["hooks"][0];
    assert_eq!(hook["name"], "10-check");
    assert_eq!(hook["phase"], "post-apply");
    assert_eq!(hook["mode"], "755");
    assert_eq!(hook["last_result"]["state"], "succeeded");
    assert_eq!(
        hook["sha256"],
        hex::encode(Sha256::digest(b"#!/bin/sh\ntrue\n"))
    );
    let status = file_json(&b, "status.json");
    // a status field named `source` is no file's contents
    assert_eq!(status["deployments"]["source"], "sysroot /");
    let rpm = file_json(&b, "rpm-ostree-status.json");
    assert_eq!(rpm["deployments"][0]["id"], "fedora-abc.0");
}

#[tokio::test]
async fn a_node_without_an_update_or_the_host_tools_still_gives_a_bundle() {
    // (what the node has, the plan's note)
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    let cases: [(Option<&str>, &str); 3] = [
        (
            None,
            "no plan: the desired config rendered-worker-2 is not on the node (the agent fetches it when it updates), only its name",
        ),
        (
            Some("rendered-worker-2"),
            "no update: the node is in its desired config",
        ),
        (
            Some("rendered-worker-1"),
            "no plan: the desired config rendered-worker-2 is not on the node (the agent fetches it when it updates), only its name",
        ),
    ];
    for (current, note) in cases {
        if let Some(name) = current {
            write(
                &root,
                CURRENT_CONFIG,
                &serde_json::to_string(&config(name)).unwrap(),
                0o644,
            );
        }
        let b = bundle(&root, &FakeSources::default()).await;
        assert_eq!(
            file_json(&b, "configs.json")["plan_of"],
            note,
            "{current:?}"
        );
        let rpm = b
            .manifest
            .items
            .iter()
            .find(|i| i.name == "rpm-ostree-status.json")
            .unwrap();
        assert_eq!(rpm.state, State::Failed);
        assert_eq!(rpm.reason.as_deref(), Some("rpm-ostreed is not running"));
        let record = b
            .manifest
            .items
            .iter()
            .find(|i| i.name == "node/etc/machine-config-daemon/mco-agent-update.json")
            .unwrap();
        assert_eq!(
            (record.state, record.reason.as_deref()),
            (State::Absent, Some("no update in progress"))
        );
    }
}

#[tokio::test]
async fn a_record_that_is_not_json_is_left_out_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    write(
        &root,
        record::UPDATE_RECORD,
        &format!("{{\"passwordHash\": \"{HASH}\""),
        0o600,
    );
    let b = bundle(&root, &FakeSources::default()).await;
    let item = b
        .manifest
        .items
        .iter()
        .find(|i| i.name == "node/etc/machine-config-daemon/mco-agent-update.json")
        .unwrap();
    assert_eq!(item.state, State::Failed);
    assert!(
        item.reason.as_deref().unwrap().starts_with("not JSON ("),
        "{item:?}"
    );
    assert!(
        !b.files
            .iter()
            .any(|(_, bytes)| String::from_utf8_lossy(bytes).contains(HASH))
    );
}
