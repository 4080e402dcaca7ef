//! Provisioning a guest the way a node is provisioned: the real `mco-companion serve` runs on
//! the host (the guest reaches it at 10.0.2.2) and serves a pool's rendered config as Ignition,
//! with the files the config server appends for first boot; the files of the served config are
//! then written into the guest as Ignition's files stage writes them (contents and mode).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use machine_config::Config;
use mco_test_support::tls::TestCa;
use serde_json::Value;

use crate::agent::binary_dir;
use crate::vm::{GUEST_SHARE, HOST_FROM_GUEST, Vm};

/// The Accept header of an Ignition that reads spec `version` (e.g. `3.4.0`).
pub fn ignition_accept(version: &str) -> String {
    format!("application/vnd.coreos.ignition+json;version={version}")
}

/// `mco-companion serve --manifests DIR` on 127.0.0.1, with a certificate for 127.0.0.1 and
/// 10.0.2.2 signed by a throw-away CA. Killed when dropped (and, through setpriv's parent-death
/// signal, when the test process dies).
pub struct ConfigServerForGuests {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl ConfigServerForGuests {
    /// Writes `manifests` ((file name, MachineConfig or MachineConfigPool YAML/JSON)) into a
    /// manifests directory and serves it.
    pub fn start(manifests: &[(&str, &str)]) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("mco-vm-config-server-")
            .tempdir()?;
        let manifest_dir = dir.path().join("manifests");
        std::fs::create_dir(&manifest_dir)?;
        for (name, text) in manifests {
            std::fs::write(manifest_dir.join(name), text)
                .with_context(|| format!("writing manifest {name}"))?;
        }
        let ca = TestCa::new("mco-vmtest-config-server-ca")?;
        let cert = ca.issue_server_cert(&[HOST_FROM_GUEST.to_string(), "127.0.0.1".to_string()])?;
        std::fs::write(dir.path().join("ca.crt"), ca.cert_pem())?;
        std::fs::write(dir.path().join("tls.crt"), &cert.cert_pem)?;
        let key = dir.path().join("tls.key");
        std::fs::write(&key, &cert.key_pem)?;
        // the companion refuses a key others can read
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        let companion = binary_dir().join("mco-companion");
        ensure!(
            companion.is_file(),
            "{}: missing (cargo build -p mco-companion)",
            companion.display()
        );
        let log_path = dir.path().join("companion.log");
        let log = std::fs::File::create(&log_path)?;
        let child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--"])
            .arg(&companion)
            .args(["serve", "--listen", "127.0.0.1:0", "--poll-interval", "1"])
            .arg("--manifests")
            .arg(&manifest_dir)
            .arg("--cert")
            .arg(dir.path().join("tls.crt"))
            .arg("--key")
            .arg(dir.path().join("tls.key"))
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", companion.display()))?;
        let mut server = ConfigServerForGuests {
            child,
            dir,
            port: 0,
        };
        server.port = server.wait_listening(Duration::from_secs(20))?;
        Ok(server)
    }

    /// The port from the companion's "Launching server on 127.0.0.1:PORT".
    fn wait_listening(&mut self, timeout: Duration) -> Result<u16> {
        const LAUNCHED: &str = "Launching server on 127.0.0.1:";
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.log();
            if let Some(at) = log.find(LAUNCHED) {
                let rest = &log[at + LAUNCHED.len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                return digits
                    .parse()
                    .with_context(|| format!("no port in the companion's log:\n{log}"));
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("mco-companion serve exited ({status}):\n{log}");
            }
            if Instant::now() >= deadline {
                bail!("mco-companion serve not listening after {timeout:?}:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The companion's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("companion.log")).unwrap_or_default()
    }

    /// The server as guests reach it: `https://10.0.2.2:PORT`.
    pub fn guest_url(&self) -> String {
        format!("https://{HOST_FROM_GUEST}:{}", self.port)
    }

    /// The CA certificate (PEM file) that signs the server's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// What the server serves for `pool` to an Ignition reading spec `version`, fetched with
    /// curl over TLS (verified against the CA), as JSON.
    pub fn served(&self, pool: &str, version: &str) -> Result<Value> {
        let url = format!("https://127.0.0.1:{}/config/{pool}", self.port);
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "30", "-H"])
            .arg(format!("Accept: {}", ignition_accept(version)))
            .arg("--cacert")
            .arg(self.ca_file())
            .arg(&url)
            .output()
            .context("running curl")?;
        ensure!(
            out.status.success(),
            "GET {url}: {}\ncompanion log:\n{}",
            String::from_utf8_lossy(&out.stderr).trim(),
            self.log()
        );
        serde_json::from_slice(&out.stdout).with_context(|| format!("GET {url}: not JSON"))
    }
}

impl Drop for ConfigServerForGuests {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A file of a served Ignition config, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedFile {
    pub path: String,
    pub mode: u32,
    pub contents: Vec<u8>,
}

/// The `storage.files` of a served Ignition config, decoded (mode 0644 when it has none, as
/// Ignition defaults). A config with anything else to provision (users, groups, units,
/// directories, links, kernel arguments) is refused: only files are written here.
pub fn served_files(ignition: &Value) -> Result<Vec<ServedFile>> {
    let config = Config::from_value(ignition.clone()).context("parsing the served Ignition")?;
    let storage = &config.storage;
    for (what, present) in [
        ("users or groups", !config.passwd.is_empty()),
        ("units", !config.systemd.is_empty()),
        ("directories", !storage.directories.is_empty()),
        ("links", !storage.links.is_empty()),
        ("kernel arguments", !config.kernel_arguments.is_empty()),
    ] {
        ensure!(
            !present,
            "the served config has {what}, which provisioning here does not write"
        );
    }
    config
        .storage
        .files
        .iter()
        .map(|f| {
            let mode = f.mode.unwrap_or(0o644);
            Ok(ServedFile {
                path: f.path.clone(),
                mode: u32::try_from(mode).with_context(|| format!("{}: mode {mode}", f.path))?,
                contents: f
                    .decoded_contents()
                    .with_context(|| format!("decoding {}", f.path))?,
            })
        })
        .collect()
}

impl Vm {
    /// Writes `files` into the guest as Ignition's files stage would (root-owned, the given
    /// mode, parent directories created), through the 9p share.
    pub fn write_files(&mut self, files: &[ServedFile]) -> Result<()> {
        let staging = self.share().join("provision");
        std::fs::create_dir_all(&staging)?;
        let mut script = String::from("set -e\n");
        for (i, file) in files.iter().enumerate() {
            ensure!(
                Path::new(&file.path).is_absolute() && !file.path.contains('\''),
                "cannot provision {:?}",
                file.path
            );
            std::fs::write(staging.join(i.to_string()), &file.contents)?;
            script.push_str(&format!(
                "install -D -m{:o} {GUEST_SHARE}/provision/{i} '{}'\n",
                file.mode, file.path
            ));
        }
        self.run(&script)
            .context("writing the provisioned files in the guest")?;
        Ok(())
    }
}
