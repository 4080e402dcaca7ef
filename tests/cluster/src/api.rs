//! The Kubernetes API test server as a process (`mco-test-apiserver --rbac`), with one
//! kubeconfig per identity the binaries run as: the administrator (the test), the companion's
//! service account, and each node's kubelet (a client certificate signed by the server's client
//! CA, as a kubelet's is).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mco_test_support::apiserver::{AuditEvent, read_audit_log};

pub use mco_test_support::shipped::{
    COMPANION_NAMESPACE as MCO_NAMESPACE, COMPANION_SERVICE_ACCOUNT as COMPANION_ACCOUNT,
};

/// The running API server.
pub struct ApiServer {
    child: Child,
    pub url: String,
    pub admin_kubeconfig: PathBuf,
    pub companion_kubeconfig: PathBuf,
    /// The CA that signs the kubelets' client certificates (the companion's `--client-ca`).
    pub client_ca: PathBuf,
    audit_log: PathBuf,
    dir: PathBuf,
}

impl ApiServer {
    /// Starts the server with RBAC, loaded from the shipped `manifests/` (so a rule they lack
    /// fails a scenario), writing kubeconfigs for the companion (its shipped service account)
    /// and for `nodes` (every node the test will ever have: the binary writes them at start).
    pub fn start(binary: &Path, dir: &Path, nodes: &[String]) -> Result<Self> {
        Self::start_seeded(binary, dir, nodes, &[])
    }

    /// [`ApiServer::start`], also loading the objects of `seeds` (manifest files, statuses
    /// kept) before it answers.
    pub fn start_seeded(
        binary: &Path,
        dir: &Path,
        nodes: &[String],
        seeds: &[PathBuf],
    ) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let rbac_seed = dir.join("rbac-from-manifests.yaml");
        std::fs::write(&rbac_seed, mco_test_support::shipped::rbac_seed()?)?;
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        let companion_kubeconfig = dir.join("companion.kubeconfig");
        let client_ca = dir.join("client-ca.crt");
        let audit_log = dir.join("audit.jsonl");
        let log = std::fs::File::create(dir.join("apiserver.log"))?;
        let mut command = Command::new(binary);
        command
            .args(["--rbac", "--listen", "127.0.0.1:0"])
            .arg("--kubeconfig-out")
            .arg(&admin_kubeconfig)
            .arg("--client-ca-out")
            .arg(&client_ca)
            .arg("--audit-log")
            .arg(&audit_log)
            .arg("--seed")
            .arg(&rbac_seed)
            .args(
                seeds
                    .iter()
                    .flat_map(|seed| [std::ffi::OsStr::new("--seed"), seed.as_os_str()]),
            )
            .arg("--serviceaccount-kubeconfig")
            .arg(format!(
                "{MCO_NAMESPACE}/{COMPANION_ACCOUNT}={}",
                companion_kubeconfig.display()
            ));
        for node in nodes {
            command.arg("--node-kubeconfig").arg(format!(
                "{node}={}",
                Self::node_kubeconfig_in(dir, node).display()
            ));
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = child.stdout.take().context("the server's stdout")?;
        let mut url = String::new();
        BufReader::new(stdout)
            .read_line(&mut url)
            .context("reading the server's URL")?;
        let url = url.trim().to_string();
        if url.is_empty() {
            let _ = child.kill();
            let log = std::fs::read_to_string(dir.join("apiserver.log")).unwrap_or_default();
            bail!("mco-test-apiserver did not start:\n{log}");
        }
        Ok(ApiServer {
            child,
            url,
            admin_kubeconfig,
            companion_kubeconfig,
            client_ca,
            audit_log,
            dir: dir.to_path_buf(),
        })
    }

    fn node_kubeconfig_in(dir: &Path, node: &str) -> PathBuf {
        dir.join(format!("kubelet-{node}.kubeconfig"))
    }

    /// The kubelet kubeconfig of `node` (client certificate for `system:node:NODE`).
    pub fn node_kubeconfig(&self, node: &str) -> PathBuf {
        Self::node_kubeconfig_in(&self.dir, node)
    }

    /// The kubelet's client certificate and key of `node` as one PEM, as the kubelet keeps
    /// them in `/var/lib/kubelet/pki/kubelet-client-current.pem`.
    pub fn kubelet_client_pem(&self, node: &str) -> Result<String> {
        use base64::Engine;
        let path = self.node_kubeconfig(node);
        let text = std::fs::read_to_string(&path)?;
        let doc: serde_json::Value = serde_saphyr::from_str(&text)
            .with_context(|| format!("{}: not YAML", path.display()))?;
        let user = &doc["users"][0]["user"];
        let decode = |key: &str| -> Result<String> {
            let data = user[key]
                .as_str()
                .with_context(|| format!("{}: no {key}", path.display()))?;
            let bytes = base64::engine::general_purpose::STANDARD.decode(data)?;
            Ok(String::from_utf8(bytes)?)
        };
        Ok(format!(
            "{}{}",
            decode("client-certificate-data")?,
            decode("client-key-data")?
        ))
    }

    /// A client with the administrator's credentials.
    pub async fn admin_client(&self) -> Result<kube::Client> {
        client_from(&self.admin_kubeconfig).await
    }

    /// A client with `node`'s kubelet credentials.
    pub async fn node_client(&self, node: &str) -> Result<kube::Client> {
        client_from(&self.node_kubeconfig(node)).await
    }

    /// Ends every open watch (SIGUSR1): clients must re-establish them.
    pub fn drop_watches(&self) -> Result<()> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR1)
            .context("signalling the API server")
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every authorization decision so far.
    pub fn audit(&self) -> Result<Vec<AuditEvent>> {
        read_audit_log(&self.audit_log)
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("apiserver.log")).unwrap_or_default()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn client_from(path: &Path) -> Result<kube::Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    // Tests wait on conditions themselves: fail fast rather than hang on a dead server.
    let mut config = config;
    config.read_timeout = Some(Duration::from_secs(30));
    Ok(kube::Client::try_from(config)?)
}
