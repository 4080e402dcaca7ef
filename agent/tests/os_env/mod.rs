//! Shared setup of the OS integration tests: a private system bus, a real ostree sysroot and
//! the rpm-ostree stand-in serving it: in this process, on its own bus connection, over a
//! sysroot that is not booted (changes become the new default deployment at once); or, with
//! [`EnvOptions::booted`], in the booted simulation of test-support's `sysroot::booted` (changes
//! are staged, `lock-finalization` holds them back at a shutdown, [`Env::reboot`] shuts down and
//! boots the default deployment).

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mco_agent::os::{Backoff, ClientConfig, DbusOsUpdater};
use mco_test_support::dbus::PrivateBus;
use mco_test_support::rpmostreed::auth::RegistryAuth;
use mco_test_support::rpmostreed::{Config, Daemon};
use mco_test_support::sysroot::{BootedProcess, DeploymentEntry, TestSysroot};

pub const BASE_KARGS: &[&str] = &["root=LABEL=root", "rw"];

pub struct Env {
    pub daemon: Option<Daemon>,
    /// The stand-in in the booted simulation, and the ignored test of the current test binary
    /// that runs it (see [`booted_standin_main`]).
    booted: Option<(BootedProcess, String)>,
    pub bus: PrivateBus,
    pub sysroot: TestSysroot,
    pub image_map: PathBuf,
    run_dir: tempfile::TempDir,
}

pub struct EnvOptions<'a> {
    pub kargs: &'a [&'a str],
    pub txn_delay: Duration,
    /// The stand-in's `peer_setup_delay` (a descheduled accepting task, pinned).
    pub peer_setup_delay: Duration,
    /// Run the stand-in in the booted simulation, as this ignored test of the current test
    /// binary (which calls [`booted_standin_main`]).
    pub booted: Option<&'a str>,
    /// Registries that refuse pulls without credentials in `/run/ostree/auth.json` of
    /// `auth_root` (the stand-in's `RegistryAuth`).
    pub auth_required: &'a [&'a str],
    /// The root of that auth file (default: the sysroot); not with `booted`.
    pub auth_root: Option<PathBuf>,
}

impl Default for EnvOptions<'_> {
    fn default() -> Self {
        EnvOptions {
            kargs: BASE_KARGS,
            txn_delay: Duration::ZERO,
            peer_setup_delay: Duration::ZERO,
            booted: None,
            auth_required: &[],
            auth_root: None,
        }
    }
}

/// Where the booted stand-in puts its transaction sockets and finds its image map (both under
/// `/tmp`, which the simulation shares).
const RUN_DIR_ENV: &str = "MCO_TEST_STANDIN_RUN_DIR";
const IMAGE_MAP_ENV: &str = "MCO_TEST_STANDIN_IMAGE_MAP";

/// The body of the ignored child test that runs the stand-in in the booted simulation: the
/// sysroot is `/` there. Runs until the simulation is killed.
pub async fn booted_standin_main() {
    mco_test_support::child::assert_child("a test with EnvOptions::booted");
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter("info")
        .try_init();
    let var = |name| std::env::var_os(name).map(PathBuf::from);
    mco_test_support::rpmostreed::run(Config {
        sysroot: PathBuf::from("/"),
        run_dir: var(RUN_DIR_ENV).expect("the stand-in's run directory"),
        image_map: var(IMAGE_MAP_ENV),
        auth: Default::default(),
        txn_delay: Duration::ZERO,
        peer_setup_delay: Duration::ZERO,
    })
    .await
    .expect("the booted rpm-ostree stand-in");
}

impl Env {
    pub async fn start(opts: EnvOptions<'_>) -> Env {
        // The stand-in's and the client's logs, in the test's captured output (shown when it
        // fails or hangs; `RUST_LOG` changes the level).
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_ansi(false)
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "info".into()),
            )
            .try_init();
        let bus = PrivateBus::start().expect("private bus");
        let sysroot = TestSysroot::builder()
            .kargs(opts.kargs)
            .build()
            .expect("test sysroot");
        let run_dir = tempfile::tempdir().expect("run dir");
        let image_map = run_dir.path().join("images");
        std::fs::write(&image_map, "").expect("image map");
        let mut env = Env {
            daemon: None,
            booted: None,
            bus,
            sysroot,
            image_map,
            run_dir,
        };
        match opts.booted {
            Some(child) => env.boot(child).await,
            None => {
                let conn = env.bus.connect().await.expect("daemon bus connection");
                let daemon = Daemon::start(
                    Config {
                        sysroot: env.sysroot.path().to_path_buf(),
                        run_dir: env.run_dir.path().join("run"),
                        image_map: Some(env.image_map.clone()),
                        auth: RegistryAuth {
                            root: opts
                                .auth_root
                                .clone()
                                .unwrap_or_else(|| env.sysroot.path().to_path_buf()),
                            required: opts.auth_required.iter().map(|r| r.to_string()).collect(),
                        },
                        txn_delay: opts.txn_delay,
                        peer_setup_delay: opts.peer_setup_delay,
                    },
                    conn,
                )
                .await
                .expect("stand-in");
                env.daemon = Some(daemon);
            }
        }
        env
    }

    /// Boots the default deployment with the stand-in as `child` and waits for its bus name.
    async fn boot(&mut self, child: &str) {
        let run = self.run_dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        let exe = std::env::current_exe().expect("the test binary");
        let (run_s, map_s) = (
            run.display().to_string(),
            self.image_map.display().to_string(),
        );
        let mut process = self
            .sysroot
            .spawn_booted(
                0,
                &exe,
                &[
                    child,
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ],
                &[
                    ("DBUS_SYSTEM_BUS_ADDRESS", self.bus.address()),
                    mco_test_support::sysroot::MUTABLE_DEPLOYMENTS,
                    (mco_test_support::child::CHILD_ENV, "1"),
                    (RUN_DIR_ENV, &run_s),
                    (IMAGE_MAP_ENV, &map_s),
                ],
            )
            .expect("the booted simulation");
        let conn = self.bus.connect().await.unwrap();
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !dbus
            .name_has_owner("org.projectatomic.rpmostree1".try_into().unwrap())
            .await
            .unwrap()
        {
            assert!(process.is_running(), "the booted stand-in exited");
            assert!(
                Instant::now() < deadline,
                "the booted stand-in did not take its name"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.booted = Some((process, child.to_string()));
    }

    /// A reboot of the booted simulation: what `ostree-finalize-staged.service` does at
    /// shutdown (a staged deployment is written out unless its finalization is locked), then
    /// the default deployment boots with a new stand-in. Nothing to do on a sysroot that is not
    /// booted (its default deployment is what "boots").
    pub async fn reboot(&mut self) {
        let Some((process, child)) = self.booted.take() else {
            return;
        };
        process
            .exec(&["ostree", "admin", "finalize-staged"])
            .expect("finalizing at shutdown");
        drop(process);
        // The bus frees the stopped stand-in's name once it has seen its connection close; until
        // then the name still has an owner, and the wait for one in `boot` would return before
        // the new stand-in took it (an agent started then finds no rpm-ostree).
        self.wait_name_released().await;
        self.boot(&child).await;
    }

    /// Waits (up to 30 s) until nothing owns rpm-ostree's bus name.
    async fn wait_name_released(&self) {
        let conn = self.bus.connect().await.unwrap();
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while dbus
            .name_has_owner("org.projectatomic.rpmostree1".try_into().unwrap())
            .await
            .unwrap()
        {
            assert!(
                Instant::now() < deadline,
                "the stopped stand-in's bus name was not released"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A client with a fast retry policy.
    pub async fn client(&self) -> DbusOsUpdater {
        self.client_with(ClientConfig {
            busy_retry: Backoff {
                initial: Duration::from_millis(100),
                max: Duration::from_millis(400),
                give_up_after: Duration::from_secs(60),
            },
            transaction_timeout: Duration::from_secs(60),
            ..Default::default()
        })
        .await
    }

    pub async fn client_with(&self, config: ClientConfig) -> DbusOsUpdater {
        let conn = self.bus.connect().await.expect("client bus connection");
        DbusOsUpdater::new(&conn, config).await.expect("client")
    }

    /// Maps an image to an ostree revision for the stand-in.
    pub fn map_image(&self, image: &str, rev: &str) {
        let mut text = std::fs::read_to_string(&self.image_map).unwrap();
        text.push_str(&format!("{image} {rev}\n"));
        std::fs::write(&self.image_map, text).unwrap();
    }

    pub fn deployments(&self) -> Vec<DeploymentEntry> {
        self.sysroot.deployments().expect("reading the sysroot")
    }

    /// The default deployment's kernel arguments without the `ostree=` one.
    pub fn default_kargs(&self) -> Vec<String> {
        without_ostree(&self.deployments()[0].options)
    }

    pub async fn stop(mut self) {
        if let Some(d) = self.daemon.take() {
            d.shutdown().await;
        }
        self.booted = None;
    }
}

pub fn without_ostree(options: &str) -> Vec<String> {
    options
        .split(' ')
        .filter(|a| !a.starts_with("ostree="))
        .map(str::to_string)
        .collect()
}

/// Waits (up to 10 s) until `f` holds.
pub async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
