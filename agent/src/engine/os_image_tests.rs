//! The rebase as the MCD's `updateLayeredOS` decides it, one row per decision, each naming
//! the MCD function it follows (upstream `pkg/daemon/update.go`, `podman.go`, `rpm-ostree.go`).

use std::sync::Arc;
use std::time::Duration;

use super::os_image::*;
use crate::host::command::{FakeCommands, HostCommands};
use crate::host::systemd::{ActiveState, FakeSystemd, SystemdCall};
use crate::os::{FakeOsUpdater, OsCall, OsImage};
use crate::rootfs::Root;

const IMAGE: &str =
    "quay.io/openshift/os@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const RESTRICTIVE: &str = r#"{"default":[{"type":"reject"}],"transports":{"docker":{"quay.io":[{"type":"insecureAcceptAnything"}]}}}"#;
const PERMISSIVE: &str = r#"{"default":[{"type":"insecureAcceptAnything"}]}"#;
const PODMAN_IMAGES: &[&str] = &["podman", "images", "--format=json", "--filter"];

fn listed(digests: &[&str]) -> String {
    serde_json::json!([{"Id": "abc123", "RepoDigests": digests, "Names": ["x"]}]).to_string()
}

fn storage_info() -> &'static str {
    r#"{"store":{"graphDriverName":"overlay","graphRoot":"/var/lib/containers/storage"}}"#
}

struct Row {
    /// The MCD function the row follows, and what it shows.
    what: &'static str,
    host: bool,
    commands: FakeCommands,
    policy: Option<&'static str>,
    rebase_failures: usize,
    /// The rebases asked of rpm-ostree.
    rebases: Vec<OsImage>,
    /// The error, when the rebase fails (its whole chain).
    error: Option<&'static str>,
    systemd: Vec<SystemdCall>,
    /// The time spent waiting between attempts.
    waited: Duration,
}

fn restarts_rpm_ostreed() -> Vec<SystemdCall> {
    let once = [
        SystemdCall::DaemonReload,
        SystemdCall::ActiveState("rpm-ostreed.service".into()),
        SystemdCall::Restart("rpm-ostreed.service".into()),
    ];
    once.iter().chain(once.iter()).cloned().collect()
}

fn rows() -> Vec<Row> {
    let registry = || OsImage::Registry(IMAGE.into());
    let storage = |r: &str| OsImage::ContainersStorage(r.into());
    vec![
        Row {
            what: "updateLayeredOS without the host's programs (alternate root): from the registry",
            host: false,
            commands: FakeCommands::new(),
            policy: None,
            rebase_failures: 0,
            rebases: vec![registry()],
            error: None,
            systemd: vec![],
            waited: Duration::ZERO,
        },
        Row {
            what: "GetPodmanImageInfoByReference lists nothing: RebaseLayered from the registry",
            host: true,
            commands: FakeCommands::new().ok(PODMAN_IMAGES, "[]"),
            policy: Some(RESTRICTIVE),
            rebase_failures: 0,
            rebases: vec![registry()],
            error: None,
            systemd: vec![],
            waited: Duration::ZERO,
        },
        Row {
            what: "any podman result means local: RebaseLayeredFromContainerStorage by the repo digest equal to the image",
            host: true,
            commands: FakeCommands::new()
                .ok(PODMAN_IMAGES, &listed(&["quay.io/other@sha256:9", IMAGE])),
            policy: None,
            rebase_failures: 0,
            rebases: vec![storage(IMAGE)],
            error: None,
            systemd: vec![],
            waited: Duration::ZERO,
        },
        Row {
            what: "no repo digest equals the reference (a tag): the reference itself (the MCD's is empty)",
            host: true,
            commands: FakeCommands::new().ok(PODMAN_IMAGES, &listed(&[])),
            policy: Some(PERMISSIVE),
            rebase_failures: 0,
            rebases: vec![storage(IMAGE)],
            error: None,
            systemd: vec![],
            waited: Duration::ZERO,
        },
        Row {
            what: "no podman on the node (it cannot be started): nothing is local, RebaseLayered from the registry",
            host: true,
            // the fake answers a program it has no rule for as one that cannot be started
            commands: FakeCommands::new(),
            policy: None,
            rebase_failures: 0,
            rebases: vec![registry()],
            error: None,
            systemd: vec![],
            waited: Duration::ZERO,
        },
        Row {
            what: "updateLayeredOS: an error from podman aborts the update, nothing is rebased",
            host: true,
            commands: FakeCommands::new().fails(PODMAN_IMAGES, 125, "Error: database is locked"),
            policy: None,
            rebase_failures: 0,
            rebases: vec![],
            error: Some(
                "asking podman whether quay.io/openshift/os@sha256:1111111111111111111111111111111111111111111111111111111111111111 is in local storage: podman failed (exit status 125): Error: database is locked",
            ),
            systemd: vec![],
            waited: Duration::ZERO,
        },
        Row {
            what: "patchPoliciesForContainerStorage: a restrictive policy is patched, rpm-ostreed restarted with it and without it after",
            host: true,
            commands: FakeCommands::new()
                .ok(PODMAN_IMAGES, &listed(&[IMAGE]))
                .ok(&["podman", "system", "info"], storage_info()),
            policy: Some(RESTRICTIVE),
            rebase_failures: 0,
            rebases: vec![storage(IMAGE)],
            error: None,
            systemd: restarts_rpm_ostreed(),
            waited: Duration::ZERO,
        },
        Row {
            what: "patchPoliciesForContainerStorage: errors while patching are logged, the rebase goes on",
            host: true,
            commands: FakeCommands::new()
                .ok(PODMAN_IMAGES, &listed(&[IMAGE]))
                .fails(&["podman", "system", "info"], 1, "no store"),
            policy: Some(RESTRICTIVE),
            rebase_failures: 0,
            rebases: vec![storage(IMAGE)],
            error: None,
            systemd: vec![],
            waited: Duration::ZERO,
        },
        Row {
            what: "RebaseLayeredFromContainerStorage fails: no retry on the local path",
            host: true,
            commands: FakeCommands::new().ok(PODMAN_IMAGES, &listed(&[IMAGE])),
            policy: Some(PERMISSIVE),
            rebase_failures: 1,
            rebases: vec![storage(IMAGE)],
            error: Some(
                "failed to update OS from local storage: quay.io/openshift/os@sha256:1111111111111111111111111111111111111111111111111111111111111111: rpm-ostree Rebase transaction failed: pull failed 1",
            ),
            systemd: vec![],
            waited: Duration::ZERO,
        },
        Row {
            what: "RebaseLayered retried (OCPBUGS-43406): two failures, the third attempt 10 s + 20 s later succeeds",
            host: false,
            commands: FakeCommands::new(),
            policy: None,
            rebase_failures: 2,
            rebases: vec![registry(), registry(), registry()],
            error: None,
            systemd: vec![],
            waited: Duration::from_secs(30),
        },
        Row {
            what: "RebaseLayered: 3 attempts (the capped backoff), then the MCD's error with the last cause",
            host: true,
            commands: FakeCommands::new().ok(PODMAN_IMAGES, "[]"),
            policy: None,
            rebase_failures: 5,
            rebases: vec![registry(), registry(), registry()],
            error: Some(
                "failed to update OS to quay.io/openshift/os@sha256:1111111111111111111111111111111111111111111111111111111111111111 after retries: timed out waiting for the condition: rpm-ostree Rebase transaction failed: pull failed 3",
            ),
            systemd: vec![],
            waited: Duration::from_secs(30),
        },
    ]
}

#[tokio::test(start_paused = true)]
async fn the_rebase_follows_the_mcds_decisions() {
    for row in rows() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        if let Some(p) = row.policy {
            std::fs::create_dir_all(dir.path().join("etc/containers")).unwrap();
            std::fs::write(dir.path().join("etc/containers/policy.json"), p).unwrap();
        }
        let os = FakeOsUpdater::booted("rhcos", "quay.io/openshift/os@sha256:0", "rw");
        for n in 1..=row.rebase_failures {
            os.fail_next("Rebase", &format!("pull failed {n}"));
        }
        let systemd = FakeSystemd::new().with_unit("rpm-ostreed.service", ActiveState::Active);
        let commands = Arc::new(row.commands);
        let host = ImageHost {
            root: &root,
            commands: commands.as_ref() as &dyn HostCommands,
            systemd: Some(&systemd),
        };
        let begun = tokio::time::Instant::now();
        let result = rebase(&os, IMAGE, None, row.host.then_some(host)).await;
        let what = row.what;
        match (&result, row.error) {
            (Ok(()), None) => {}
            (Err(e), Some(want)) => assert_eq!(format!("{e:#}"), want, "{what}"),
            (r, want) => panic!("{what}: got {r:?}, wanted error {want:?}"),
        }
        let rebases: Vec<OsImage> = os
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                OsCall::Rebase(i) => Some(i),
                _ => None,
            })
            .collect();
        assert_eq!(rebases, row.rebases, "{what}");
        assert_eq!(systemd.calls(), row.systemd, "{what}");
        assert_eq!(begun.elapsed(), row.waited, "{what}");
        for leftover in [TEMP_POLICY, POLICY_DROP_IN] {
            assert!(
                !dir.path().join(&leftover[1..]).exists(),
                "{what}: {leftover} left behind"
            );
        }
        if let Some(p) = row.policy {
            assert_eq!(
                std::fs::read_to_string(dir.path().join("etc/containers/policy.json")).unwrap(),
                p,
                "{what}: the node's own policy changed"
            );
        }
    }
}

#[test]
fn the_policy_is_patched_only_when_it_would_refuse_local_storage() {
    let json = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
    for (policy, accepts) in [
        (PERMISSIVE, true),
        (RESTRICTIVE, false),
        (r#"{"default":[{"type":"reject"}]}"#, false),
        (
            r#"{"default":[{"type":"insecureAcceptAnything"}],"transports":{"containers-storage":{"":[{"type":"reject"}]}}}"#,
            false,
        ),
    ] {
        assert_eq!(policy_accepts_storage(&json(policy)), accepts, "{policy}");
    }
    let patched = patched_policy(
        json(RESTRICTIVE),
        "overlay",
        "/var/lib/containers/storage",
        IMAGE,
        "abc123",
    )
    .unwrap();
    assert_eq!(
        patched["transports"]["containers-storage"]
            [format!("[overlay@/var/lib/containers/storage]{IMAGE}@abc123")],
        json(r#"[{"type":"insecureAcceptAnything"}]"#)
    );
    assert_eq!(
        patched["transports"]["docker"],
        json(RESTRICTIVE)["transports"]["docker"]
    );
    assert_eq!(patched["default"], json(RESTRICTIVE)["default"]);
    let e = patched_policy(json("[]"), "o", "/r", IMAGE, "i").unwrap_err();
    assert_eq!(e.to_string(), "the policy is not a JSON object");
}

/// A crash between patching and unpatching leaves the drop-in in `/run`: it is removed and
/// rpm-ostreed restarted without it (the MCD does this when its rpm-ostree client starts).
#[tokio::test]
async fn a_leftover_policy_patch_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    let systemd = FakeSystemd::new().with_unit("rpm-ostreed.service", ActiveState::Inactive);
    remove_policy_patch(&root, &systemd).await;
    assert_eq!(
        systemd.calls(),
        vec![],
        "nothing to remove, nothing restarted"
    );
    for p in [TEMP_POLICY, POLICY_DROP_IN] {
        let p = dir.path().join(&p[1..]);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "x").unwrap();
    }
    remove_policy_patch(&root, &systemd).await;
    assert_eq!(
        systemd.calls(),
        vec![
            SystemdCall::DaemonReload,
            SystemdCall::ActiveState("rpm-ostreed.service".into())
        ],
        "an inactive rpm-ostreed is not restarted (try-restart)"
    );
    assert!(!dir.path().join(&TEMP_POLICY[1..]).exists());
    assert!(!dir.path().join(&POLICY_DROP_IN[1..]).exists());
}
