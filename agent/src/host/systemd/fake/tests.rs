//! The fake follows the systemd behaviour the nspawn tests check on the real manager.

use super::*;

#[tokio::test]
async fn unit_file_states_follow_enable_disable_mask_unmask_preset() {
    let fake = FakeSystemd::new()
        .with_unit_file("a.service", "disabled")
        .with_preset("b.service", "disabled")
        .with_unit_file("b.service", "enabled");
    let steps: &[(&str, &str, &str)] = &[
        ("enable", "a.service", "enabled"),
        ("disable", "a.service", "disabled"),
        ("mask", "a.service", "masked"),
        ("unmask", "a.service", "disabled"),
        ("preset", "a.service", "enabled"),
        ("preset", "b.service", "disabled"),
    ];
    for (op, unit, want) in steps {
        let units = [*unit];
        match *op {
            "enable" => fake.enable_unit_files(&units).await,
            "disable" => fake.disable_unit_files(&units).await,
            "mask" => fake.mask_unit_files(&units).await,
            "unmask" => fake.unmask_unit_files(&units).await,
            "preset" => fake.preset_unit_files(&units).await,
            other => panic!("unknown step {other}"),
        }
        .unwrap_or_else(|e| panic!("{op} {unit}: {e}"));
        assert_eq!(
            fake.unit_file_state(unit).await.expect("state"),
            *want,
            "after {op} {unit}"
        );
    }
}

#[tokio::test]
async fn enable_reports_the_symlink_and_a_second_enable_changes_nothing() {
    let fake = FakeSystemd::new().with_unit_file("a.service", "disabled");
    let changes = fake
        .enable_unit_files(&["a.service"])
        .await
        .expect("enable");
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].kind, "symlink");
    assert!(
        changes[0].path.ends_with(".wants/a.service"),
        "{}",
        changes[0]
    );
    assert!(
        fake.enable_unit_files(&["a.service"])
            .await
            .expect("enable again")
            .is_empty()
    );
    assert_eq!(
        fake.calls(),
        vec![
            SystemdCall::Enable(vec!["a.service".into()]),
            SystemdCall::Enable(vec!["a.service".into()])
        ]
    );
}

#[tokio::test]
async fn masked_and_missing_unit_files_are_errors_naming_the_unit() {
    let fake = FakeSystemd::new().with_unit_file("a.service", "enabled");
    fake.mask_unit_files(&["a.service"]).await.expect("mask");
    let masked = fake
        .enable_unit_files(&["a.service"])
        .await
        .expect_err("masked");
    assert_eq!(
        masked.dbus_name(),
        Some("org.freedesktop.systemd1.UnitMasked")
    );
    assert!(masked.to_string().contains("a.service"), "{masked}");
    let missing = fake
        .unit_file_state("nope.service")
        .await
        .expect_err("missing");
    assert!(missing.to_string().contains("nope.service"), "{missing}");
}

#[tokio::test]
async fn failed_jobs_name_unit_and_result_and_leave_the_unit_failed() {
    let fake = FakeSystemd::new().with_unit("crio.service", ActiveState::Active);
    fake.fail_job(JobKind::Restart, "crio.service", "failed");
    let err = fake
        .restart_unit("crio.service")
        .await
        .expect_err("restart fails");
    assert_eq!(
        err.to_string(),
        "restart of crio.service ended with result 'failed'"
    );
    let state = fake.unit_active_state("crio.service").await.expect("state");
    assert_eq!(state.active_state, ActiveState::Failed);
}

#[tokio::test]
async fn a_failing_job_set_back_to_done_succeeds_again() {
    let fake = FakeSystemd::new().with_unit("crio.service", ActiveState::Active);
    fake.fail_job(JobKind::Restart, "crio.service", "failed");
    fake.fail_job(JobKind::Start, "crio.service", "timeout");
    fake.restart_unit("crio.service")
        .await
        .expect_err("restart fails");
    fake.fail_job(JobKind::Restart, "crio.service", "done");
    fake.restart_unit("crio.service")
        .await
        .expect("restart succeeds again");
    let state = fake.unit_active_state("crio.service").await.expect("state");
    assert_eq!(state.active_state, ActiveState::Active);
    // Only that kind of job was cleared.
    let err = fake
        .start_unit("crio.service")
        .await
        .expect_err("start still fails");
    assert_eq!(
        err.to_string(),
        "start of crio.service ended with result 'timeout'"
    );
}

#[tokio::test]
async fn reload_needs_exec_reload() {
    let fake = FakeSystemd::new()
        .with_unit("plain.service", ActiveState::Active)
        .with_unit("crio.service", ActiveState::Active)
        .with_reloadable("crio.service");
    fake.reload_unit("crio.service").await.expect("reloadable");
    let err = fake
        .reload_unit("plain.service")
        .await
        .expect_err("no ExecReload");
    assert_eq!(
        err.dbus_name(),
        Some("org.freedesktop.systemd1.JobTypeNotApplicable")
    );
    assert!(err.to_string().contains("plain.service"), "{err}");
}

#[tokio::test]
async fn start_activates_unless_told_to_stay_inactive_and_unknown_units_are_not_found() {
    let fake = FakeSystemd::new()
        .with_unit_file("a.service", "static")
        .with_unit_file("b.service", "static");
    fake.stay_inactive_after_start("b.service");
    fake.start_unit("a.service").await.expect("start a");
    fake.start_unit("b.service").await.expect("start b");
    assert!(
        fake.unit_active_state("a.service")
            .await
            .expect("a")
            .active_state
            .is_active()
    );
    assert_eq!(
        fake.unit_active_state("b.service")
            .await
            .expect("b")
            .active_state,
        ActiveState::Inactive
    );
    let unknown = fake
        .unit_active_state("nope.service")
        .await
        .expect("unknown");
    assert!(!unknown.is_found());
    assert_eq!(unknown.load_state, "not-found");
}

#[tokio::test]
async fn injected_call_failures_are_returned() {
    let fake = FakeSystemd::new();
    fake.fail_call("Reload", "the manager", "Access denied");
    let err = fake.daemon_reload().await.expect_err("reload fails");
    assert_eq!(
        err.to_string(),
        "systemd Reload for the manager failed: Access denied"
    );
    assert_eq!(fake.calls(), vec![SystemdCall::DaemonReload]);

    fake.succeed_call("Reload", "the manager");
    fake.daemon_reload().await.expect("reload succeeds again");
    assert_eq!(
        fake.calls(),
        vec![SystemdCall::DaemonReload, SystemdCall::DaemonReload]
    );
}
