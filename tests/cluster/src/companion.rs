//! `mco-companion serve --controller` as a process: the controller and the config server over
//! real TLS (a throw-away CA signs its certificate), asking clients for the kubelet's client
//! certificate (`--client-ca`, the API server's client CA). It keeps its port across restarts,
//! so agents and Ignition find it again.
//!
//! With several replicas ([`Companion::with_replicas`]) each listens on its own port behind a
//! front ([`crate::proxy`]: a Service's endpoints), each reaches the API server through its own
//! forwarder a scenario can cut, and each is named as its pod would be (`companion-N`, the
//! Lease's holder identity). Every replica, even a single one, runs with leader election on
//! the tier's short timings ([`LEADER_TIMINGS`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use mco_test_support::tls::TestCa;

use crate::api::MCO_NAMESPACE;
use crate::proxy::Proxy;

/// The tier's leader election timings (`--leader-elect-lease-duration`, `-renew-deadline`,
/// `-retry-period`): OpenShift's 137 s / 107 s / 26 s shrunk to seconds, keeping the margins
/// `Timings::validate` asks for.
pub const LEADER_TIMINGS: [&str; 6] = [
    "--leader-elect-lease-duration",
    "6s",
    "--leader-elect-renew-deadline",
    "4s",
    "--leader-elect-retry-period",
    "1s",
];
/// The lease duration of [`LEADER_TIMINGS`].
pub const LEASE_DURATION: Duration = Duration::from_secs(6);
/// The leader election's Lease (the companion's default name).
pub const LEADER_LEASE: &str = "mco-companion-controller";

/// One replica: its port, its forwarder to the API server (several replicas only), its process.
struct Replica {
    port: u16,
    kubeconfig: PathBuf,
    api: Option<Proxy>,
    child: Option<Child>,
    starts: u32,
}

/// The companion, running or not.
pub struct Companion {
    binary: PathBuf,
    dir: PathBuf,
    client_ca: PathBuf,
    /// Where clients connect: the only replica, or the front of several.
    port: u16,
    /// The CA that signs the server's certificate (agents' `--ca`).
    pub ca_file: PathBuf,
    ca_pem: String,
    replicas: Vec<Replica>,
    front: Option<Proxy>,
}

impl Companion {
    /// Writes its TLS material; not started yet.
    pub fn new(binary: &Path, dir: &Path, kubeconfig: &Path, client_ca: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        mco_test_support::tls::install_ring_provider();
        let ca = TestCa::new("mco-companion e2e CA")?;
        let cert = ca.issue_server_cert(&["127.0.0.1".to_string(), "localhost".to_string()])?;
        cert.write_to(dir, "tls")?;
        let ca_file = dir.join("ca.crt");
        std::fs::write(&ca_file, ca.cert_pem())?;
        let port = free_port()?;
        Ok(Companion {
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
            client_ca: client_ca.to_path_buf(),
            port,
            ca_file,
            ca_pem: ca.cert_pem().to_string(),
            replicas: vec![Replica {
                port,
                kubeconfig: kubeconfig.to_path_buf(),
                api: None,
                child: None,
                starts: 0,
            }],
            front: None,
        })
    }

    /// `n` replicas (not started yet) behind a front, each reaching the API server at
    /// `api_url` through its own forwarder. Needs a Tokio runtime (the forwarders).
    pub fn with_replicas(mut self, n: usize, api_url: &str) -> Result<Self> {
        if n <= 1 {
            return Ok(self);
        }
        let api: SocketAddr = api_url
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .parse()
            .with_context(|| format!("the API server's address in {api_url}"))?;
        let template = std::fs::read_to_string(&self.replicas[0].kubeconfig)?;
        let mut replicas = Vec::new();
        for i in 0..n {
            let proxy = Proxy::to(api)?;
            let kubeconfig = self.dir.join(format!("replica-{i}.kubeconfig"));
            let through = format!("https://127.0.0.1:{}", proxy.port);
            std::fs::write(
                &kubeconfig,
                template.replace(api_url.trim_end_matches('/'), &through),
            )?;
            replicas.push(Replica {
                port: free_port()?,
                kubeconfig,
                api: Some(proxy),
                child: None,
                starts: 0,
            });
        }
        let targets = replicas
            .iter()
            .map(|r| SocketAddr::from(([127, 0, 0, 1], r.port)))
            .collect();
        let front = Proxy::front(targets)?;
        self.port = front.port;
        self.front = Some(front);
        self.replicas = replicas;
        Ok(self)
    }

    /// Replica `i`'s own port (not through the front).
    pub fn replica_port(&self, i: usize) -> u16 {
        self.replicas[i].port
    }

    /// How many replicas there are.
    pub fn replica_count(&self) -> usize {
        self.replicas.len()
    }

    /// The pod name replica `i` runs as (its identity in the Lease).
    pub fn identity(i: usize) -> String {
        format!("companion-{i}")
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The CA certificate (PEM) of the server.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Starts every replica at once and waits until each listens (the config server listens
    /// once it has listed pools and MachineConfigs; no replica waits for the Lease).
    pub fn start(&mut self) -> Result<()> {
        for i in 0..self.replicas.len() {
            self.spawn(i)?;
        }
        for i in 0..self.replicas.len() {
            self.wait_listening(i)?;
        }
        Ok(())
    }

    /// Starts replica `i` and waits until it listens.
    pub fn start_replica(&mut self, i: usize) -> Result<()> {
        self.spawn(i)?;
        self.wait_listening(i)
    }

    fn spawn(&mut self, i: usize) -> Result<()> {
        let replica = &mut self.replicas[i];
        if replica.child.is_some() {
            bail!("companion replica {i} is already running");
        }
        replica.starts += 1;
        let log = std::fs::File::create(log_path(&self.dir, i, replica.starts))?;
        let child = Command::new(&self.binary)
            .args(["serve", "--controller"])
            .arg("--kubeconfig")
            .arg(&replica.kubeconfig)
            .args(["--listen", &format!("127.0.0.1:{}", replica.port)])
            .arg("--cert")
            .arg(self.dir.join("tls.crt"))
            .arg("--key")
            .arg(self.dir.join("tls.key"))
            .arg("--client-ca")
            .arg(&self.client_ca)
            // the drain controller's timings shrunk from the MCO's minutes to seconds: a
            // blocked drain is tried again every 500 ms, each try given 2 s
            .args([
                "--drain-requeue",
                "500ms",
                "--drain-failing-threshold",
                "3s",
            ])
            .args(["--drain-failing-requeue", "500ms", "--drain-attempt", "2s"])
            .args(LEADER_TIMINGS)
            // what the Deployment's downward API gives each pod
            .env("POD_NAME", Self::identity(i))
            .env("POD_NAMESPACE", MCO_NAMESPACE)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        replica.child = Some(child);
        Ok(())
    }

    fn wait_listening(&mut self, i: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let replica = &mut self.replicas[i];
            if std::net::TcpStream::connect(("127.0.0.1", replica.port)).is_ok() {
                return Ok(());
            }
            if let Some(child) = replica.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                replica.child = None;
                bail!("companion replica {i} exited ({status}):\n{}", self.logs());
            }
            if Instant::now() > deadline {
                bail!(
                    "companion replica {i} did not listen within 30 s:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The first replica's process id.
    pub fn pid(&self) -> Option<u32> {
        self.replicas[0].child.as_ref().map(Child::id)
    }

    /// Replica `i`'s process id.
    pub fn replica_pid(&self, i: usize) -> Option<u32> {
        self.replicas[i].child.as_ref().map(Child::id)
    }

    /// SIGKILL to every replica, as a crash or an evicted pod would stop it.
    pub fn kill(&mut self) {
        for i in 0..self.replicas.len() {
            self.kill_replica(i);
        }
    }

    /// SIGKILL to replica `i`.
    pub fn kill_replica(&mut self, i: usize) {
        if let Some(mut child) = self.replicas[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM to replica `i`, as the kubelet stops a pod; waits (up to `limit`) until it exited
    /// and returns how long that took.
    pub fn terminate_replica(&mut self, i: usize, limit: Duration) -> Result<Duration> {
        let Some(mut child) = self.replicas[i].child.take() else {
            bail!("companion replica {i} is not running");
        };
        let started = Instant::now();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id())?);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
        loop {
            if let Some(status) = child.try_wait()? {
                if !status.success() {
                    bail!("companion replica {i} exited with {status} on SIGTERM");
                }
                return Ok(started.elapsed());
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                bail!("companion replica {i} did not exit within {limit:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Cuts replica `i`'s connection to the API server (several replicas only).
    pub fn cut_api(&self, i: usize) -> Result<()> {
        let proxy = self.replicas[i].api.as_ref();
        proxy
            .context("a single replica talks to the API server directly")?
            .cut();
        Ok(())
    }

    /// Gives replica `i` its connection to the API server back.
    pub fn restore_api(&self, i: usize) -> Result<()> {
        let proxy = self.replicas[i].api.as_ref();
        proxy
            .context("a single replica talks to the API server directly")?
            .restore();
        Ok(())
    }

    /// The replica the leader Lease names, if any (read as the administrator).
    pub async fn leader(client: &kube::Client) -> Result<Option<usize>> {
        let leases: Api<Lease> = Api::namespaced(client.clone(), MCO_NAMESPACE);
        let Some(lease) = leases.get_opt(LEADER_LEASE).await? else {
            return Ok(None);
        };
        let holder = lease.spec.and_then(|s| s.holder_identity);
        Ok(holder.and_then(|h| h.strip_prefix("companion-")?.parse().ok()))
    }

    /// Every run's log of every replica.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, replica) in self.replicas.iter().enumerate() {
            for n in 1..=replica.starts {
                let text = std::fs::read_to_string(log_path(&self.dir, i, n)).unwrap_or_default();
                out.push_str(&format!("--- companion replica {i} run {n} ---\n{text}"));
            }
        }
        out
    }

    /// Replica `i`'s log lines (all its runs) that contain `needle`.
    pub fn log_lines(&self, i: usize, needle: &str) -> Vec<String> {
        (1..=self.replicas[i].starts)
            .flat_map(|n| {
                let text = std::fs::read_to_string(log_path(&self.dir, i, n)).unwrap_or_default();
                text.lines()
                    .filter(|l| l.contains(needle))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// Replica `i`'s log of its run `n` (replica 0's keeps the single companion's name).
fn log_path(dir: &Path, i: usize, n: u32) -> PathBuf {
    match i {
        0 => dir.join(format!("companion-{n}.log")),
        i => dir.join(format!("replica-{i}-{n}.log")),
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Drop for Companion {
    fn drop(&mut self) {
        self.kill();
    }
}
