//! The stand-in binary on a *booted* sysroot (the booted simulation), driven by the agent's
//! rpm-ostree client: changes are staged, finalized at "shutdown" by
//! `ostree admin finalize-staged`, and a deployment staged with `lock-finalization` is kept
//! back until `FinalizeDeployment` releases it (and asks logind to reboot).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mco_agent::os::{ClientConfig, DbusOsUpdater, KargsChange, OsUpdater};
use mco_test_support::dbus::PrivateBus;
use mco_test_support::sysroot::{BootedProcess, TestSysroot};

const STANDIN: &str = env!("CARGO_BIN_EXE_mco-test-rpmostreed");

struct Sim {
    standin: BootedProcess,
    sysroot: TestSysroot,
    bus: PrivateBus,
    _run: tempfile::TempDir,
}

async fn boot() -> Sim {
    let bus = PrivateBus::start().unwrap();
    let sysroot = TestSysroot::builder().build().unwrap();
    let run = tempfile::Builder::new()
        .prefix("mco-test-rpmostreed-run.")
        .tempdir_in("/tmp")
        .unwrap();
    let run_dir = run.path().display().to_string();
    let mut standin = sysroot
        .spawn_booted(
            0,
            Path::new(STANDIN),
            &["--sysroot", "/", "--run-dir", &run_dir],
            &[
                ("DBUS_SYSTEM_BUS_ADDRESS", bus.address()),
                ("OSTREE_SYSROOT_DEBUG", "mutable-deployments"),
            ],
        )
        .unwrap();
    let conn = bus.connect().await.unwrap();
    let dbus = zbus::fdo::DBusProxy::new(&conn).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dbus
        .name_has_owner("org.projectatomic.rpmostree1".try_into().unwrap())
        .await
        .unwrap()
    {
        assert!(standin.is_running(), "the stand-in exited");
        assert!(
            Instant::now() < deadline,
            "the stand-in did not take its name"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Sim {
        standin,
        sysroot,
        bus,
        _run: run,
    }
}

async fn client(sim: &Sim, config: ClientConfig) -> DbusOsUpdater {
    let conn = sim.bus.connect().await.unwrap();
    DbusOsUpdater::new(&conn, config).await.unwrap()
}

fn karg(a: &str) -> KargsChange {
    KargsChange::from_argv(&[format!("--append={a}")]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_staged_and_finalized_at_shutdown() {
    let sim = boot().await;
    let os = client(&sim, ClientConfig::default()).await;
    let status = os.status().await.unwrap();
    assert_eq!(status.deployments.len(), 1);
    assert!(status.booted().is_some(), "{status:?}");

    os.kernel_args(None, &karg("staged=1")).await.unwrap();
    let status = os.status().await.unwrap();
    let staged = status.staged().expect("a staged deployment");
    assert_eq!(status.pending().unwrap().id, staged.id);
    assert!(!staged.finalization_locked);
    assert!(staged.kargs.as_deref().unwrap().contains("staged=1"));
    // Staged: the bootloader does not know it yet.
    assert_eq!(sim.sysroot.bls_entries().unwrap().len(), 1);

    // What ostree-finalize-staged.service does at shutdown.
    sim.standin
        .exec(&["ostree", "admin", "finalize-staged"])
        .unwrap();
    let bls = sim.sysroot.bls_entries().unwrap();
    assert_eq!(bls.len(), 2);
    assert!(
        bls[0].options.split(' ').any(|a| a == "staged=1"),
        "{bls:?}"
    );
    assert!(!bls[1].options.contains("staged=1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locked_finalization_waits_for_finalize_deployment() {
    let sim = boot().await;
    let reboots = Arc::new(AtomicU32::new(0));
    let _logind = zbus::connection::Builder::address(sim.bus.address())
        .unwrap()
        .name("org.freedesktop.login1")
        .unwrap()
        .serve_at(
            "/org/freedesktop/login1",
            FakeLogind {
                reboots: reboots.clone(),
            },
        )
        .unwrap()
        .build()
        .await
        .unwrap();
    let os = client(
        &sim,
        ClientConfig {
            lock_finalization: true,
            ..Default::default()
        },
    )
    .await;
    os.kernel_args(None, &karg("locked=1")).await.unwrap();
    let status = os.status().await.unwrap();
    let staged = status.staged().unwrap().clone();
    assert!(staged.finalization_locked, "{staged:?}");

    // Shutdown while locked: not finalized.
    sim.standin
        .exec(&["ostree", "admin", "finalize-staged"])
        .unwrap();
    assert_eq!(sim.sysroot.bls_entries().unwrap().len(), 1);

    let err = os.finalize_deployment("0000").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("Expected staged base checksum 0000, but found"),
        "{err}"
    );
    let out = os.finalize_deployment(&staged.checksum).await.unwrap();
    assert_eq!(
        out.messages,
        [format!(
            "Finalized deployment; rebooting into {}",
            staged.checksum
        )]
    );
    // The reboot is asked for on a task of its own, as rpm-ostreed's does not depend on the
    // client (which has left by now: that closed the transaction, and once lost the reboot).
    let deadline = Instant::now() + Duration::from_secs(10);
    while reboots.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "logind was not asked to reboot within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        reboots.load(Ordering::SeqCst),
        1,
        "rebooted once, through logind"
    );
    assert!(
        !os.status()
            .await
            .unwrap()
            .staged()
            .unwrap()
            .finalization_locked
    );
    sim.standin
        .exec(&["ostree", "admin", "finalize-staged"])
        .unwrap();
    let bls = sim.sysroot.bls_entries().unwrap();
    assert_eq!(bls.len(), 2);
    assert!(
        bls[0].options.split(' ').any(|a| a == "locked=1"),
        "{bls:?}"
    );
}

struct FakeLogind {
    reboots: Arc<AtomicU32>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl FakeLogind {
    fn reboot(&self, _interactive: bool) {
        self.reboots.fetch_add(1, Ordering::SeqCst);
    }
}
