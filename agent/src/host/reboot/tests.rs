use std::sync::Arc;

use crate::host::systemd::{ActiveState, FakeSystemd, JobKind, SystemdCall};

use super::*;

mod finalize;

pub(super) struct Host {
    pub root: tempfile::TempDir,
    pub systemd: Arc<FakeSystemd>,
    pub login: Arc<FakeLoginManager>,
}

impl Host {
    pub fn new(systemd: FakeSystemd, login: FakeLoginManager) -> Self {
        Self {
            root: tempfile::tempdir().expect("tempdir"),
            systemd: Arc::new(systemd),
            login: Arc::new(login),
        }
    }

    pub fn stage_deployment(&self) {
        let marker = self.root.path().join(STAGED_DEPLOYMENT_MARKER);
        std::fs::create_dir_all(marker.parent().expect("parent")).expect("mkdir");
        std::fs::write(marker, b"staged").expect("marker");
    }

    pub fn rebooter(&self) -> LogindRebooter {
        LogindRebooter::new(self.systemd.clone(), self.login.clone(), self.root.path())
    }

    pub fn reason(&self) -> Option<String> {
        recorded_reason(self.root.path()).expect("read reason")
    }
}

pub(super) fn finalize(state: ActiveState) -> FakeSystemd {
    FakeSystemd::new().with_unit(FINALIZE_STAGED_UNIT, state)
}

pub(super) fn lock(what: &str, who: &str, mode: &str) -> Inhibitor {
    Inhibitor {
        what: what.into(),
        who: who.into(),
        why: "testing".into(),
        mode: mode.into(),
        uid: 0,
        pid: 42,
    }
}

#[tokio::test]
async fn without_a_staged_deployment_reboots_without_touching_systemd() {
    let host = Host::new(finalize(ActiveState::Inactive), FakeLoginManager::new());
    host.rebooter()
        .reboot("Node will reboot into config rendered-worker-1")
        .await
        .expect("reboot");
    assert_eq!(host.login.reboots(), 1);
    assert!(
        host.systemd.calls().is_empty(),
        "{:?}",
        host.systemd.calls()
    );
    assert_eq!(
        host.reason().as_deref(),
        Some("Node will reboot into config rendered-worker-1")
    );
}

#[tokio::test]
async fn staged_deployment_with_active_finalize_service_reboots() {
    let host = Host::new(finalize(ActiveState::Active), FakeLoginManager::new());
    host.stage_deployment();
    host.rebooter().reboot("os update").await.expect("reboot");
    assert_eq!(host.login.reboots(), 1);
    assert_eq!(
        host.systemd.calls(),
        vec![SystemdCall::ActiveState(FINALIZE_STAGED_UNIT.into())]
    );
}

#[tokio::test]
async fn inactive_finalize_service_is_started_before_rebooting() {
    let host = Host::new(finalize(ActiveState::Inactive), FakeLoginManager::new());
    host.stage_deployment();
    host.rebooter().reboot("os update").await.expect("reboot");
    assert_eq!(
        host.systemd.calls(),
        vec![
            SystemdCall::ActiveState(FINALIZE_STAGED_UNIT.into()),
            SystemdCall::Start(FINALIZE_STAGED_UNIT.into()),
            SystemdCall::ActiveState(FINALIZE_STAGED_UNIT.into()),
        ]
    );
    assert_eq!(host.login.reboots(), 1);
}

#[tokio::test]
async fn caller_can_say_a_deployment_is_staged_without_the_marker() {
    let host = Host::new(finalize(ActiveState::Inactive), FakeLoginManager::new());
    host.rebooter()
        .with_staged_deployment(StagedDeployment::Present)
        .reboot("os update")
        .await
        .expect("reboot");
    assert!(
        host.systemd
            .calls()
            .contains(&SystemdCall::Start(FINALIZE_STAGED_UNIT.into()))
    );

    let host = Host::new(finalize(ActiveState::Inactive), FakeLoginManager::new());
    host.stage_deployment();
    host.rebooter()
        .with_staged_deployment(StagedDeployment::Absent)
        .reboot("files")
        .await
        .expect("reboot");
    assert!(host.systemd.calls().is_empty());
}

/// Every way the finalize service can fail to be active refuses the reboot, before logind
/// is asked and before a reason is recorded.
#[tokio::test]
async fn refuses_when_the_finalize_service_cannot_be_active() {
    type Setup = fn() -> FakeSystemd;
    let cases: &[(&str, Setup, &str)] = &[
        (
            "condition unmet",
            || {
                let s = finalize(ActiveState::Inactive);
                s.stay_inactive_after_start(FINALIZE_STAGED_UNIT);
                s
            },
            "ostree-finalize-staged.service is inactive (dead, load state loaded) after starting it",
        ),
        (
            "not installed",
            FakeSystemd::new,
            "ostree-finalize-staged.service cannot be found (load state not-found)",
        ),
        (
            "start fails",
            || {
                let s = finalize(ActiveState::Inactive);
                s.fail_job(JobKind::Start, FINALIZE_STAGED_UNIT, "failed");
                s
            },
            "start of ostree-finalize-staged.service ended with result 'failed'",
        ),
        (
            "systemd unreachable",
            || {
                let s = FakeSystemd::new();
                s.fail_call("GetUnit", FINALIZE_STAGED_UNIT, "Connection refused");
                s
            },
            "could not make ostree-finalize-staged.service active",
        ),
    ];
    for (name, setup, want) in cases {
        let host = Host::new(setup(), FakeLoginManager::new());
        host.stage_deployment();
        let err = host.rebooter().reboot("os update").await.expect_err(name);
        let msg = err.to_string();
        assert!(msg.starts_with("refusing to reboot"), "{name}: {msg}");
        assert!(msg.contains(want), "{name}: {msg}");
        assert_eq!(host.login.reboots(), 0, "{name}");
        assert_eq!(host.reason(), None, "{name}");
    }
}

#[tokio::test]
async fn block_locks_on_shutdown_refuse_naming_the_holder() {
    let login = FakeLoginManager::new()
        .with_inhibitor(lock("sleep", "sleepy", "block"))
        .with_inhibitor(lock("shutdown:sleep", "backup-job", "block"))
        .with_inhibitor(lock("shutdown", "kubelet", "delay"));
    let host = Host::new(FakeSystemd::new(), login);
    let err = host
        .rebooter()
        .reboot("os update")
        .await
        .expect_err("blocked");
    assert_eq!(
        err.to_string(),
        "refusing to reboot: shutdown is blocked by inhibitor lock(s) held by 'backup-job' (pid 42, uid 0): testing"
    );
    assert_eq!(host.login.reboots(), 0);
    assert_eq!(host.reason(), None);
}

#[tokio::test]
async fn delay_locks_and_other_block_locks_let_the_reboot_through() {
    let login = FakeLoginManager::new()
        .with_inhibitor(lock("shutdown", "kubelet", "delay"))
        .with_inhibitor(lock("sleep:idle", "sleepy", "block"));
    let host = Host::new(FakeSystemd::new(), login);
    host.rebooter().reboot("os update").await.expect("reboot");
    assert_eq!(host.login.reboots(), 1);
}

#[tokio::test]
async fn logind_failures_are_reported() {
    let host = Host::new(FakeSystemd::new(), FakeLoginManager::new());
    host.login.fail("ListInhibitors", "Connection refused");
    let err = host
        .rebooter()
        .reboot("x")
        .await
        .expect_err("no inhibitor list");
    assert!(
        err.to_string()
            .contains("could not list logind's inhibitor locks"),
        "{err}"
    );
    assert_eq!(host.login.reboots(), 0);

    let host = Host::new(FakeSystemd::new(), FakeLoginManager::new());
    host.login
        .fail("Reboot", "Interactive authentication required.");
    let err = host
        .rebooter()
        .reboot("x")
        .await
        .expect_err("reboot refused");
    assert_eq!(
        err.to_string(),
        "reboot through logind failed: logind Reboot failed: Interactive authentication required."
    );
}

#[tokio::test]
async fn reason_is_recorded_on_one_line_and_replaced_by_the_next() {
    let host = Host::new(FakeSystemd::new(), FakeLoginManager::new());
    host.rebooter()
        .reboot("first\nsecond line\r\n")
        .await
        .expect("reboot");
    assert_eq!(host.reason().as_deref(), Some("first second line"));
    host.rebooter().reboot("again").await.expect("reboot");
    assert_eq!(host.reason().as_deref(), Some("again"));
}

#[tokio::test]
async fn fake_rebooter_records_reasons_and_can_refuse() {
    let fake = FakeRebooter::new();
    fake.reboot("one").await.expect("reboot");
    fake.refuse("no");
    assert!(fake.reboot("two").await.is_err());
    assert_eq!(fake.reasons(), vec!["one".to_owned()]);
}
