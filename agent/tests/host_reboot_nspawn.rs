//! `LogindRebooter` against real systemd and logind booted in a container: the reboot really
//! happens (systemd-nspawn exits with 133), after the staged-deployment finalize check; block
//! inhibitor locks and an inactive finalize service refuse it.

use std::path::Path;
use std::time::{Duration, Instant};

use mco_agent::host::reboot::{
    FINALIZE_STAGED_UNIT, LogindRebooter, RebootError, Rebooter, STAGED_DEPLOYMENT_MARKER,
};
use mco_test_support::nspawn::{self, Container, Options, REBOOT_EXIT_CODE};

const RESULTS: &str = "/mnt/mco-results";

/// A container with a host directory at /mnt/mco-results and another at /run/mco-agent (so the
/// recorded reboot reason outlives the container).
fn boot(results: &Path, reason_dir: &Path) -> Container {
    let rootfs = nspawn::rootfs().expect("container rootfs");
    let options = Options {
        binds: vec![
            (results.to_owned(), RESULTS.to_owned()),
            (reason_dir.to_owned(), "/run/mco-agent".to_owned()),
        ],
        ..Options::default()
    };
    Container::boot(&rootfs, &options).expect("boot the container")
}

async fn rebooter_of(container: &Container) -> LogindRebooter {
    let conn = zbus::connection::Builder::address(container.bus_address().as_str())
        .expect("bus address")
        .build()
        .await
        .expect("connect to the container's system bus");
    LogindRebooter::on_connection(conn, container.root())
}

/// Stages a (pretend) ostree deployment the way ostree leaves a booted, staged system:
/// /run/ostree-booted and /run/ostree/staged-deployment. The path unit that would start the
/// finalize service by itself is stopped first, so the rebooter has to start it.
fn stage_deployment(container: &Container, ostree_booted: bool) {
    container
        .run(&["systemctl", "stop", "ostree-finalize-staged.path"])
        .expect("stop the path unit");
    if ostree_booted {
        container
            .write_file("/run/ostree-booted", "")
            .expect("ostree-booted");
    }
    container
        .write_file(&format!("/{STAGED_DEPLOYMENT_MARKER}"), "staged")
        .expect("staged marker");
}

fn active_state(container: &Container, unit: &str) -> String {
    let out = container
        .exec(&["systemctl", "is-active", unit])
        .expect("systemctl is-active");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reboot_starts_the_finalize_service_honours_delay_locks_and_really_reboots() {
    let results = tempfile::tempdir().expect("tempdir");
    let reasons = tempfile::tempdir().expect("tempdir");
    let mut container = boot(results.path(), reasons.path());

    // The real ExecStop runs `ostree admin finalize-staged`, which needs a booted sysroot; in
    // the container it is replaced by a marker that shows the service was stopped at shutdown.
    container
        .write_file(
            &format!("/run/systemd/system/{FINALIZE_STAGED_UNIT}.d/test.conf"),
            &format!("[Service]\nExecStop=\nExecStop=/bin/sh -c 'echo finalized > {RESULTS}/finalize-stopped'\n"),
        )
        .expect("drop-in");
    // A shorter delay than logind's 5 s default keeps the test quick; the lock must still hold
    // the shutdown back for it.
    container
        .write_file(
            "/etc/systemd/logind.conf.d/mco-test.conf",
            "[Login]\nInhibitDelayMaxSec=2\n",
        )
        .expect("logind.conf");
    container
        .run(&["systemctl", "daemon-reload"])
        .expect("daemon-reload");
    container
        .run(&["systemctl", "restart", "systemd-logind"])
        .expect("restart logind");
    container
        .run(&[
            "systemd-run",
            "--unit=mco-delay",
            "systemd-inhibit",
            "--what=shutdown",
            "--mode=delay",
            "--who=mco-delay-test",
            "--why=testing",
            "sleep",
            "infinity",
        ])
        .expect("delay lock");
    wait_for_inhibitor(&container, "mco-delay-test");
    stage_deployment(&container, true);
    assert_eq!(active_state(&container, FINALIZE_STAGED_UNIT), "inactive");

    let rebooter = rebooter_of(&container).await;
    rebooter
        .reboot("Node will reboot into config rendered-worker-2")
        .await
        .expect("reboot");
    let queued = Instant::now();

    let status = tokio::task::block_in_place(|| container.wait_exit(Duration::from_secs(60)))
        .expect("container exits");
    assert_eq!(
        status.code(),
        Some(REBOOT_EXIT_CODE),
        "nspawn exit: {status}\n{}",
        container.log_tail()
    );
    assert!(
        queued.elapsed() >= Duration::from_millis(1500),
        "the shutdown did not wait for the delay lock ({:?})",
        queued.elapsed()
    );
    let finalized =
        std::fs::read_to_string(results.path().join("finalize-stopped")).unwrap_or_default();
    assert_eq!(
        finalized.trim(),
        "finalized",
        "{FINALIZE_STAGED_UNIT} was not stopped at shutdown"
    );
    let reason =
        std::fs::read_to_string(reasons.path().join("reboot-reason")).expect("reboot reason");
    assert_eq!(reason, "Node will reboot into config rendered-worker-2\n");
}

fn wait_for_inhibitor(container: &Container, who: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = container
            .run(&["systemd-inhibit", "--list", "--no-pager"])
            .expect("list inhibitors");
        if listed.contains(who) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "inhibitor {who} never showed up:\n{listed}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_still_running(container: &mut Container) {
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        container.is_running(),
        "the container went down:\n{}",
        container.log_tail()
    );
    let state = container
        .exec(&["systemctl", "is-system-running"])
        .expect("is-system-running");
    let state = String::from_utf8_lossy(&state.stdout).trim().to_owned();
    assert!(
        state == "running" || state == "degraded",
        "system state {state}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inactive_finalize_service_refuses_the_reboot() {
    let results = tempfile::tempdir().expect("tempdir");
    let reasons = tempfile::tempdir().expect("tempdir");
    let mut container = boot(results.path(), reasons.path());
    // Without /run/ostree-booted the service's condition fails: starting it leaves it inactive.
    stage_deployment(&container, false);

    let err = rebooter_of(&container)
        .await
        .reboot("os update")
        .await
        .expect_err("refused");
    assert!(
        matches!(err, RebootError::FinalizeServiceInactive { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("ostree-finalize-staged.service is inactive"),
        "{err}"
    );
    assert_still_running(&mut container);
    assert!(
        !reasons.path().join("reboot-reason").exists(),
        "a refused reboot recorded a reason"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_lock_refuses_the_reboot_naming_its_holder() {
    let results = tempfile::tempdir().expect("tempdir");
    let reasons = tempfile::tempdir().expect("tempdir");
    let mut container = boot(results.path(), reasons.path());
    container
        .run(&[
            "systemd-run",
            "--unit=mco-block",
            "systemd-inhibit",
            "--what=shutdown",
            "--mode=block",
            "--who=mco-block-test",
            "--why=backup running",
            "sleep",
            "infinity",
        ])
        .expect("block lock");
    wait_for_inhibitor(&container, "mco-block-test");

    let err = rebooter_of(&container)
        .await
        .reboot("os update")
        .await
        .expect_err("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("blocked by inhibitor lock(s) held by 'mco-block-test'"),
        "{msg}"
    );
    assert!(msg.contains("backup running"), "{msg}");
    assert_still_running(&mut container);
}
