//! A node for end-to-end tests of `mco-agent start`, without a VM: a temp root, a private
//! system bus with the rpm-ostree stand-in over a real ostree sysroot and a fake logind, the
//! companion serving a manifests directory over TLS (in this process), and the agent itself as a
//! process (killed and restarted at will; a "reboot" is a new boot id file). A fake systemd
//! manager on the bus reports `ostree-finalize-staged.service` active, for the reboot checks.
//! [`Node::new_booted`] runs the stand-in in the booted simulation instead (see `os_env`).

#![allow(dead_code)]

pub mod requests;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use machine_config::MachineConfiguration;
use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, REASON, STATE};
use mco_agent::engine::Status;
use mco_companion::fleet_lock::access::StandaloneGroups;
use mco_companion::fleet_lock::file_store::FileStore;
use mco_companion::fleet_lock::{FleetLock, Slots};
use mco_companion::server::{self, ConfigSource, Limits};
use mco_companion::standalone::Standalone;
use mco_test_support::apiserver::{ServerOptions, Target, TestApiServer, fixtures};
use mco_test_support::logind::FakeLogind;
use mco_test_support::systemd::FakeSystemdBus;
use mco_test_support::tls::TestCa;
use tokio::sync::watch;

use crate::os_env::{Env, EnvOptions};

/// The pool every test config belongs to.
pub const POOL: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: worker}
spec:
  machineConfigSelector:
    matchLabels: {machineconfiguration.openshift.io/role: worker}
"#;

/// A MachineConfig of the worker pool with these files (`data:,` URL-encoded contents) and
/// kernel arguments.
pub fn machine_config(name: &str, files: &[(&str, &str)], kargs: &[&str]) -> String {
    let files: Vec<String> = files
        .iter()
        .map(|(path, contents)| {
            format!(
                "      - {{path: {path}, mode: 0644, overwrite: true, contents: {{source: \"data:,{}\"}}}}\n",
                percent_encoding::utf8_percent_encode(contents, percent_encoding::NON_ALPHANUMERIC)
            )
        })
        .collect();
    let kargs: Vec<String> = kargs.iter().map(|k| format!("\"{k}\"")).collect();
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\n  labels: {{machineconfiguration.openshift.io/role: worker}}\nspec:\n  kernelArguments: [{}]\n  config:\n    ignition: {{version: 3.2.0}}\n    storage:\n      files:\n{}",
        kargs.join(", "),
        files.concat()
    )
}

pub struct Node {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub manifests: PathBuf,
    pub boot_file: PathBuf,
    pub os: Env,
    pub logind: FakeLogind,
    _systemd: FakeSystemdBus,
    pub url: String,
    pub ca_file: PathBuf,
    stop_companion: watch::Sender<bool>,
    /// The companion's FleetLock state file (FleetLock is served at `url`).
    pub fleet_lock_state: PathBuf,
    agent: Option<tokio::process::Child>,
    /// The process id of the agent started last.
    last_agent_pid: Option<u32>,
    boots: u32,
    starts: u32,
    /// The Kubernetes API test server and the kubelet kubeconfig, in cluster mode.
    pub cluster: Option<(TestApiServer, PathBuf)>,
    /// `--pool` of the agent (`worker`); `None` lets it work the pool out.
    pub pool_arg: Option<String>,
    /// Whether the agent gets `--config-server` (true); without it, in cluster mode, it reads
    /// rendered configs by name from the API server.
    pub config_server_arg: bool,
    /// Further options of `mco-agent start` (hidden test timings).
    pub agent_args: Vec<String>,
}

/// The Node object's name.
pub const NODE: &str = "node-0";

impl Node {
    /// Everything up, the manifests directory holding `manifests` (file name, YAML); the agent
    /// not started yet.
    pub async fn new(manifests: &[(&str, &str)]) -> Node {
        Self::with_env(Env::start(EnvOptions::default()).await, manifests).await
    }

    /// [`Node::new`] with the stand-in in the booted simulation, run as `child` (an ignored test
    /// of the current test binary calling `os_env::booted_standin_main`). Reboot it with
    /// [`Node::reboot_os`].
    pub async fn new_booted(manifests: &[(&str, &str)], child: &str) -> Node {
        let os = Env::start(EnvOptions {
            booted: Some(child),
            ..EnvOptions::default()
        })
        .await;
        Self::with_env(os, manifests).await
    }

    async fn with_env(os: Env, manifests: &[(&str, &str)]) -> Node {
        let logind = FakeLogind::start(os.bus.connect().await.unwrap())
            .await
            .unwrap();
        let systemd = FakeSystemdBus::start(
            os.bus.connect().await.unwrap(),
            &[(
                mco_agent::host::reboot::FINALIZE_STAGED_UNIT,
                "active",
                "exited",
            )],
        )
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        crate::common::seed_root(&root);
        let manifest_dir = dir.path().join("manifests");
        std::fs::create_dir(&manifest_dir).unwrap();
        std::fs::write(manifest_dir.join("pool.yaml"), POOL).unwrap();
        for (name, yaml) in manifests {
            std::fs::write(manifest_dir.join(name), yaml).unwrap();
        }
        let boot_file = dir.path().join("boot_id");
        std::fs::write(&boot_file, "boot-1\n").unwrap();

        mco_test_support::tls::install_ring_provider();
        let ca = TestCa::new("mco-e2e-ca").unwrap();
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, ca.cert_pem()).unwrap();
        let tls = ca
            .issue_server_cert(&["127.0.0.1".to_string()])
            .unwrap()
            .server_config(&[b"http/1.1"])
            .unwrap();
        let standalone = Arc::new(Standalone::open(&manifest_dir, Default::default()).unwrap());
        let (stop_companion, stopped) = watch::channel(false);
        tokio::spawn(
            standalone
                .clone()
                .watch(Duration::from_millis(100), stopped.clone()),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        // FleetLock on, as `mco-companion serve` has it by default: the manifests' pools
        let fleet_lock_state = dir.path().join("fleet-lock.json");
        let groups = Arc::new(StandaloneGroups {
            source: standalone.clone(),
            configured: Default::default(),
        });
        let fleet_lock = Arc::new(FleetLock::new(
            Arc::new(FileStore::open(&fleet_lock_state).unwrap()),
            Slots::default(),
            groups,
            false,
        ));
        let source: Arc<dyn ConfigSource> = standalone;
        tokio::spawn(server::serve_with_fleet_lock(
            listener,
            Some(tls),
            None,
            source,
            Some(fleet_lock),
            Limits::default(),
            stopped,
        ));
        Node {
            dir,
            root,
            manifests: manifest_dir,
            boot_file,
            os,
            logind,
            _systemd: systemd,
            url,
            ca_file,
            stop_companion,
            fleet_lock_state,
            agent: None,
            last_agent_pid: None,
            boots: 1,
            starts: 0,
            cluster: None,
            pool_arg: Some("worker".into()),
            config_server_arg: true,
            agent_args: Vec::new(),
        }
    }

    /// Cluster mode: a Kubernetes API test server enforcing RBAC (the Node authorizer,
    /// NodeRestriction and the RBAC objects of the repository's `manifests/`) with this node's
    /// Node object (no annotations yet) and `MachineConfiguration/cluster` with the node
    /// disruption status the MCO's operator (or the companion's controller) computes for an
    /// empty spec; the agent gets `--kubeconfig` with the kubelet's credentials (a client
    /// certificate for `system:node:NAME` in `system:nodes`), so a call the shipped rules do
    /// not allow fails the test. The test itself acts as the admin.
    pub fn with_cluster(mut self) -> Self {
        let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
        mco_test_support::shipped::load_rbac(&server).unwrap();
        server.seed(fixtures::node(NODE)).unwrap();
        let mut policies = MachineConfiguration::from_slice(
            b"apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\n",
        )
        .unwrap();
        policies.metadata.generation = Some(1);
        policies.status = policies.computed_policy_status();
        server
            .seed(serde_json::to_value(&policies).unwrap())
            .unwrap();
        let kubeconfig = self.dir.path().join("kubelet.kubeconfig");
        server.write_node_kubeconfig(&kubeconfig, NODE).unwrap();
        self.cluster = Some((server, kubeconfig));
        self
    }

    pub fn api(&self) -> &TestApiServer {
        &self.cluster.as_ref().expect("not in cluster mode").0
    }

    /// Sets the node's `desiredConfig`, as the node controller does.
    pub fn set_desired(&self, name: &str) {
        self.api()
            .patch(
                "nodes",
                None,
                NODE,
                &serde_json::json!({"metadata": {"annotations": {DESIRED_CONFIG: name}}}),
                Target::Main,
            )
            .unwrap();
    }

    /// Waits until the companion serves `name` for the pool (it reloads the manifests
    /// asynchronously).
    pub async fn wait_served(&self, name: &str) {
        self.wait_served_in("worker", name).await;
    }

    /// Waits until the companion serves `name` for `pool`.
    pub async fn wait_served_in(&self, pool: &str, name: &str) {
        let server = mco_agent::daemon::config_server::ConfigServer::new(
            &self.url,
            Some(&self.ca_file),
            None,
            pool,
            None,
            false,
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server
            .fetch_once(None)
            .await
            .is_ok_and(|mc| mc.name() == name)
        {
            assert!(
                Instant::now() < deadline,
                "the companion never served {name}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Points the node at the pool's rendered config once it is served: with a cluster, sets
    /// `desiredConfig` (the agent follows the server by itself otherwise). Returns its name.
    pub async fn target_rendered(&self) -> String {
        let name = self.rendered_name();
        self.wait_served(&name).await;
        if self.cluster.is_some() {
            self.set_desired(&name);
        }
        name
    }

    /// One of the node's annotations.
    pub fn annotation(&self, key: &str) -> Option<String> {
        let node = self.api().get("nodes", None, NODE)?;
        node["metadata"]["annotations"][key]
            .as_str()
            .map(str::to_string)
    }

    /// Waits until the node's annotations say `state` (and `currentConfig`, if given).
    pub async fn wait_annotations(
        &self,
        what: &str,
        timeout: Duration,
        state: &str,
        current: Option<&str>,
    ) -> Duration {
        let start = Instant::now();
        loop {
            if self.annotation(STATE).as_deref() == Some(state)
                && (current.is_none() || self.annotation(CURRENT_CONFIG).as_deref() == current)
            {
                return start.elapsed();
            }
            if start.elapsed() > timeout {
                panic!(
                    "timed out after {timeout:?} waiting for {what}: state {:?} reason {:?} currentConfig {:?}\n{}",
                    self.annotation(STATE),
                    self.annotation(REASON),
                    self.annotation(CURRENT_CONFIG),
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Starts `mco-agent start` with `env` added to its environment; its log goes to
    /// `agent-<n>.log`. Metrics are served on an ephemeral port (tests run in parallel: none
    /// may hold the default 8797), unless `env` sets `MCO_METRICS_LISTEN` (a metrics test).
    pub fn start_agent(&mut self, env: &[(&str, &str)]) {
        assert!(self.agent.is_none(), "the agent is already running");
        self.starts += 1;
        let log = std::fs::File::create(self.log_path(self.starts)).unwrap();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco-agent"));
        cmd.arg("start");
        if let Some(pool) = &self.pool_arg {
            cmd.args(["--pool", pool]);
        }
        if self.config_server_arg {
            cmd.arg("--config-server")
                .arg(&self.url)
                .arg("--ca")
                .arg(&self.ca_file);
        }
        cmd.args(&self.agent_args);
        cmd.args(["--node-name", "node-0", "--poll-interval", "100ms"])
            .arg("--root")
            .arg(&self.root)
            .arg("--boot-id-file")
            .arg(&self.boot_file)
            .env("DBUS_SYSTEM_BUS_ADDRESS", self.os.bus.address())
            .env("RUST_LOG", "info")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("INVOCATION_ID")
            .env_remove("JOURNAL_STREAM")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .kill_on_drop(true);
        // The temp root stands in for the host, and the fake logind for its reboots (a test
        // that sets MCO_AGENT_ROOT_IS_HOST decides for itself).
        if !env.iter().any(|(k, _)| *k == "MCO_AGENT_ROOT_IS_HOST") {
            cmd.arg("--root-is-host");
        }
        cmd.env_remove("MCO_AGENT_ROOT_IS_HOST");
        if let Some((_, kubeconfig)) = &self.cluster {
            cmd.arg("--kubeconfig").arg(kubeconfig);
        }
        // the environment variable only counts when the option is not given
        if !env.iter().any(|(k, _)| *k == "MCO_METRICS_LISTEN") {
            cmd.args(["--metrics-listen", "127.0.0.1:0"]);
        }
        cmd.env_remove("MCO_METRICS_LISTEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        self.last_agent_pid = child.id();
        self.agent = Some(child);
    }

    /// The process id of the agent started last (running or not).
    pub fn last_agent_pid(&self) -> Option<u32> {
        self.last_agent_pid
    }

    fn log_path(&self, n: u32) -> PathBuf {
        self.dir.path().join(format!("agent-{n}.log"))
    }

    /// The log of the agent started last.
    pub fn last_log(&self) -> String {
        std::fs::read_to_string(self.log_path(self.starts)).unwrap_or_default()
    }

    /// Every agent log so far.
    pub fn logs(&self) -> String {
        (1..=self.starts)
            .map(|n| {
                format!(
                    "--- agent run {n} ---\n{}",
                    std::fs::read_to_string(self.log_path(n)).unwrap_or_default()
                )
            })
            .collect()
    }

    /// SIGKILLs the agent (as a power cut would stop it) and waits for it.
    pub async fn kill_agent(&mut self) {
        if let Some(mut child) = self.agent.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// Sends SIGTERM to the agent (as `systemctl stop` or a shutdown does), waits for it to
    /// exit (at most `timeout`, else the test fails naming the wait), returns its exit status
    /// and how long it took.
    pub async fn stop_agent(&mut self, timeout: Duration) -> (std::process::ExitStatus, Duration) {
        let pid = self
            .agent
            .as_ref()
            .and_then(|c| c.id())
            .expect("no agent running");
        let sent = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let child = self.agent.as_mut().unwrap();
        let status = tokio::time::timeout(timeout, child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the agent did not exit within {timeout:?} of SIGTERM\n{}",
                    self.logs()
                )
            })
            .unwrap();
        self.agent = None;
        (status, sent.elapsed())
    }

    /// Waits for the agent to exit by itself (e.g. at a failpoint); its exit status.
    pub async fn wait_agent_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let child = self.agent.as_mut().expect("no agent running");
        let status = tokio::time::timeout(timeout, child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!("the agent did not exit within {timeout:?}\n{}", self.logs())
            })
            .unwrap();
        self.agent = None;
        status
    }

    /// A reboot: the boot id changes (the stand-in's sysroot is not booted; what would boot
    /// next is its default deployment).
    pub fn reboot(&mut self) {
        self.boots += 1;
        std::fs::write(&self.boot_file, format!("boot-{}\n", self.boots)).unwrap();
    }

    /// A reboot of the OS too: in the booted simulation, the shutdown finalizes a staged
    /// deployment (unless locked) and the default deployment boots; then the boot id changes.
    pub async fn reboot_os(&mut self) {
        self.os.reboot().await;
        self.reboot();
    }

    pub fn write_manifest(&self, name: &str, yaml: &str) {
        let tmp = self.manifests.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, yaml).unwrap();
        std::fs::rename(&tmp, self.manifests.join(name)).unwrap();
    }

    pub fn remove_manifest(&self, name: &str) {
        std::fs::remove_file(self.manifests.join(name)).unwrap();
    }

    pub fn path(&self, node_path: &str) -> PathBuf {
        self.root.join(node_path.trim_start_matches('/'))
    }

    pub fn read(&self, node_path: &str) -> Option<String> {
        std::fs::read_to_string(self.path(node_path)).ok()
    }

    pub fn status(&self) -> Option<Status> {
        let bytes = std::fs::read(self.path("/run/mco-agent/status.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Waits until the agent has asked logind for a reboot.
    pub async fn wait_reboot_requested(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.logind.reboots() == 0 {
            assert!(
                Instant::now() < deadline,
                "no reboot requested\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the status satisfies `pred`; returns it and how long it took.
    pub async fn wait_status(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Status) -> bool,
    ) -> (Status, Duration) {
        let start = Instant::now();
        loop {
            if let Some(s) = self.status()
                && pred(&s)
            {
                return (s, start.elapsed());
            }
            if start.elapsed() > timeout {
                panic!(
                    "timed out after {timeout:?} waiting for {what}; status: {:?}\n{}",
                    self.status(),
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The rendered config name the companion serves for the pool now.
    pub fn rendered_name(&self) -> String {
        self.rendered_name_of("worker")
    }

    /// The rendered config the companion serves for `pool` now, as a MachineConfig object.
    pub fn rendered_config_of(&self, pool: &str) -> serde_json::Value {
        let manifests = mco_companion::manifests::load(&self.manifests).unwrap();
        let snapshot = mco_companion::standalone::Snapshot::render(&manifests, &Default::default());
        let rendered = snapshot.pools[pool].rendered.as_ref().unwrap();
        serde_json::from_str(&rendered.to_json()).unwrap()
    }

    /// The rendered config name the companion serves for `pool` now.
    pub fn rendered_name_of(&self, pool: &str) -> String {
        let dir = &self.manifests;
        let manifests = mco_companion::manifests::load(dir).unwrap();
        let snapshot = mco_companion::standalone::Snapshot::render(&manifests, &Default::default());
        snapshot.pools[pool]
            .rendered
            .as_ref()
            .unwrap()
            .name()
            .to_string()
    }

    pub async fn stop(mut self) {
        self.kill_agent().await;
        let _ = self.stop_companion.send(true);
        let Node { os, .. } = self;
        os.stop().await;
    }
}

/// Whether the status says the node is Done in `config`.
pub fn done_in(config: &str) -> impl Fn(&Status) -> bool + '_ {
    move |s: &Status| {
        s.state == machine_config::mco::NodeState::Done
            && s.current.as_deref() == Some(config)
            && s.pending_step.is_none()
    }
}

/// A wait's timeout: `n` seconds, times `MCO_TEST_TIME_FACTOR` (a whole number, default 1)
/// where the run starves these tests on purpose (tests/run.sh runs the crash-safety stage niced
/// beside the VM suite and sets 3). Only the bound of a wait for a condition grows; no test
/// waits longer when the condition holds.
pub fn secs(n: u64) -> Duration {
    let factor = std::env::var("MCO_TEST_TIME_FACTOR")
        .ok()
        .and_then(|f| f.parse::<u64>().ok())
        .filter(|f| *f >= 1)
        .unwrap_or(1);
    Duration::from_secs(n * factor)
}
