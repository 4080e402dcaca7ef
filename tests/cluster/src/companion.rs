//! `mco-companion serve --controller` as a process: the controller and the config server over
//! real TLS (a throw-away CA signs its certificate), asking clients for the kubelet's client
//! certificate (`--client-ca`, the API server's client CA). It keeps its port across restarts,
//! so agents and Ignition find it again.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mco_test_support::tls::TestCa;

/// The companion, running or not.
pub struct Companion {
    binary: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
    client_ca: PathBuf,
    port: u16,
    /// The CA that signs the server's certificate (agents' `--ca`).
    pub ca_file: PathBuf,
    ca_pem: String,
    child: Option<Child>,
    starts: u32,
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
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        Ok(Companion {
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            client_ca: client_ca.to_path_buf(),
            port,
            ca_file,
            ca_pem: ca.cert_pem().to_string(),
            child: None,
            starts: 0,
        })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The CA certificate (PEM) of the server.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Starts it and waits until `/healthz` answers (the config server listens once it has
    /// listed pools and MachineConfigs).
    pub fn start(&mut self) -> Result<()> {
        if self.child.is_some() {
            bail!("the companion is already running");
        }
        self.starts += 1;
        let log = std::fs::File::create(self.log_path(self.starts))?;
        let child = Command::new(&self.binary)
            .args(["serve", "--controller"])
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
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
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                bail!("the companion exited ({status}):\n{}", self.logs());
            }
            if Instant::now() > deadline {
                bail!("the companion did not listen within 30 s:\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL, as a crash or an evicted pod would stop it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log_path(&self, n: u32) -> PathBuf {
        self.dir.join(format!("companion-{n}.log"))
    }

    /// Every run's log.
    pub fn logs(&self) -> String {
        (1..=self.starts)
            .map(|n| {
                format!(
                    "--- companion run {n} ---\n{}",
                    std::fs::read_to_string(self.log_path(n)).unwrap_or_default()
                )
            })
            .collect()
    }
}

impl Drop for Companion {
    fn drop(&mut self) {
        self.kill();
    }
}
