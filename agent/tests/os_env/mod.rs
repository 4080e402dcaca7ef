//! Shared setup of the OS integration tests: a private system bus, a real ostree sysroot and
//! the rpm-ostree stand-in serving it (in this process, on its own bus connection).

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use mco_agent::os::{Backoff, ClientConfig, DbusOsUpdater};
use mco_test_support::dbus::PrivateBus;
use mco_test_support::rpmostreed::{Config, Daemon};
use mco_test_support::sysroot::{DeploymentEntry, TestSysroot};

pub const BASE_KARGS: &[&str] = &["root=LABEL=root", "rw"];

pub struct Env {
    pub daemon: Option<Daemon>,
    pub bus: PrivateBus,
    pub sysroot: TestSysroot,
    pub image_map: PathBuf,
    run_dir: tempfile::TempDir,
}

pub struct EnvOptions<'a> {
    pub kargs: &'a [&'a str],
    pub txn_delay: Duration,
}

impl Default for EnvOptions<'_> {
    fn default() -> Self {
        EnvOptions {
            kargs: BASE_KARGS,
            txn_delay: Duration::ZERO,
        }
    }
}

impl Env {
    pub async fn start(opts: EnvOptions<'_>) -> Env {
        let bus = PrivateBus::start().expect("private bus");
        let sysroot = TestSysroot::builder()
            .kargs(opts.kargs)
            .build()
            .expect("test sysroot");
        let run_dir = tempfile::tempdir().expect("run dir");
        let image_map = run_dir.path().join("images");
        std::fs::write(&image_map, "").expect("image map");
        let conn = bus.connect().await.expect("daemon bus connection");
        let daemon = Daemon::start(
            Config {
                sysroot: sysroot.path().to_path_buf(),
                run_dir: run_dir.path().join("run"),
                image_map: Some(image_map.clone()),
                txn_delay: opts.txn_delay,
            },
            conn,
        )
        .await
        .expect("stand-in");
        Env {
            daemon: Some(daemon),
            bus,
            sysroot,
            image_map,
            run_dir,
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
