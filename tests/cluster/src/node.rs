//! One node of the tier: a sandbox root (the user database a CoreOS node has before its config
//! is applied), the kubelet's client certificate where the kubelet keeps it, and `mco-agent
//! start` as a process on that root (killed and restarted at will; a reboot is a new boot id).
//!
//! By default no system bus is given to the agent (its address points at nothing), so it can
//! neither reach rpm-ostree nor reboot anything: those rollouts are files-only. A node given an
//! OS ([`Node::set_os`], [`crate::os::NodeOs`]) has its own bus with the rpm-ostree stand-in over
//! its own sysroot, and its agent rebases through it. Either way the agent runs with
//! `--skip-reboot`, and the fixture reboots the node (a new boot id) when its agent says it
//! waits for one.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::os::NodeOs;

/// Where the kubelet keeps its current client certificate and key (one PEM).
pub const KUBELET_CLIENT_PEM: &str = "var/lib/kubelet/pki/kubelet-client-current.pem";

/// How the agent reaches the cluster and the config server.
#[derive(Debug, Clone)]
pub struct AgentWiring {
    pub binary: PathBuf,
    pub kubeconfig: PathBuf,
    pub config_server: String,
    pub ca: PathBuf,
    /// `--drain-mode`, the drain's timings, and the scenario's own arguments.
    pub drain_args: Vec<String>,
}

/// What the agent logs when its update waits for a reboot it may not make (`--skip-reboot`).
const AWAITS_REBOOT: &str = "the node needs a reboot to finish the update";

pub struct Node {
    pub name: String,
    pub root: PathBuf,
    dir: PathBuf,
    boot_id_file: PathBuf,
    boots: u32,
    agent: Option<Child>,
    starts: u32,
    /// The node's OS (bus, sysroot, rpm-ostree stand-in), if it has one.
    pub os: Option<NodeOs>,
}

impl Node {
    /// A fresh node root under `dir`, with `client_pem` as the kubelet's certificate.
    pub fn new(name: &str, dir: &Path, client_pem: &str) -> Result<Node> {
        let root = dir.join("root");
        seed_root(&root)?;
        let pem = root.join(KUBELET_CLIENT_PEM);
        fs::create_dir_all(pem.parent().context("pem directory")?)?;
        fs::write(&pem, client_pem)?;
        fs::set_permissions(&pem, fs::Permissions::from_mode(0o600))?;
        let boot_id_file = dir.join("boot_id");
        fs::write(&boot_id_file, "boot-1\n")?;
        Ok(Node {
            name: name.to_string(),
            root,
            dir: dir.to_path_buf(),
            boot_id_file,
            boots: 1,
            agent: None,
            starts: 0,
            os: None,
        })
    }

    /// Gives the node an OS: its agent's system bus is `os`'s from the next start on.
    pub fn set_os(&mut self, os: NodeOs) {
        self.os = Some(os);
    }

    /// Starts `mco-agent start` in host-first mode: the Node's `desiredConfig`, the rendered
    /// config fetched from the config server by name.
    pub fn start_agent(&mut self, wiring: &AgentWiring) -> Result<()> {
        if self.agent.is_some() {
            bail!("the agent of {} is already running", self.name);
        }
        self.starts += 1;
        let log = fs::File::create(self.log_path(self.starts))?;
        // Without an OS, no system bus: nothing on this machine can be asked to reboot or rebase.
        let bus = match &self.os {
            Some(os) => os.bus_address().to_string(),
            None => format!("unix:path={}", self.dir.join("no-system-bus").display()),
        };
        let child = Command::new(&wiring.binary)
            .arg("start")
            .arg("--root")
            .arg(&self.root)
            .args(["--node-name", &self.name])
            .arg("--kubeconfig")
            .arg(&wiring.kubeconfig)
            .args(["--config-server", &wiring.config_server])
            .arg("--ca")
            .arg(&wiring.ca)
            .arg("--client-cert")
            .arg(self.root.join(KUBELET_CLIENT_PEM))
            .arg("--boot-id-file")
            .arg(&self.boot_id_file)
            .args(["--skip-reboot", "--metrics-listen", "127.0.0.1:0"])
            .args(&wiring.drain_args)
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
            .env("RUST_LOG", "info")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("INVOCATION_ID")
            .env_remove("JOURNAL_STREAM")
            .env_remove("MCO_METRICS_LISTEN")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", wiring.binary.display()))?;
        self.agent = Some(child);
        Ok(())
    }

    /// SIGKILLs the agent (a crash, a power cut) and waits for it.
    pub fn kill_agent(&mut self) {
        if let Some(mut child) = self.agent.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The running agent's process id.
    pub fn agent_pid(&self) -> Option<u32> {
        self.agent.as_ref().map(Child::id)
    }

    /// Whether the agent process is running.
    pub fn agent_running(&mut self) -> bool {
        self.agent
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// A reboot: the agent stops, the boot id changes, the agent starts again.
    pub fn reboot(&mut self, wiring: &AgentWiring) -> Result<()> {
        self.kill_agent();
        self.boots += 1;
        fs::write(&self.boot_id_file, format!("boot-{}\n", self.boots))?;
        self.start_agent(wiring)
    }

    /// How many times the node has booted.
    pub fn boots(&self) -> u32 {
        self.boots
    }

    /// Whether the agent of this boot waits for a reboot to finish its update.
    pub fn awaits_reboot(&self) -> bool {
        fs::read_to_string(self.log_path(self.starts)).is_ok_and(|log| log.contains(AWAITS_REBOOT))
    }

    fn log_path(&self, n: u32) -> PathBuf {
        self.dir.join(format!("agent-{n}.log"))
    }

    /// Every agent log so far (and the rpm-ostree stand-in's, if the node has an OS).
    pub fn logs(&self) -> String {
        let standin = self
            .os
            .as_ref()
            .map(|os| format!("--- {} rpm-ostree stand-in ---\n{}", self.name, os.logs()));
        (1..=self.starts)
            .map(|n| {
                format!(
                    "--- {} agent run {n} ---\n{}",
                    self.name,
                    fs::read_to_string(self.log_path(n)).unwrap_or_default()
                )
            })
            .chain(standin)
            .collect()
    }

    /// The host path of `node_path` inside the root.
    pub fn path(&self, node_path: &str) -> PathBuf {
        self.root.join(node_path.trim_start_matches('/'))
    }

    /// A file of the root, if it exists.
    pub fn read(&self, node_path: &str) -> Option<String> {
        fs::read_to_string(self.path(node_path)).ok()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill_agent();
    }
}

/// The user database a CoreOS node has before its config is applied: root and core (1000:1000),
/// group wheel, shadow entries with `*` hashes; `/home/core` owned by core.
fn seed_root(root: &Path) -> Result<()> {
    fs::create_dir_all(root.join("etc"))?;
    fs::create_dir_all(root.join("home/core"))?;
    std::os::unix::fs::chown(root.join("home/core"), Some(1000), Some(1000))?;
    fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n",
    )?;
    fs::write(
        root.join("etc/group"),
        "root:x:0:\nwheel:x:10:core\nusers:x:100:\ncore:x:1000:\n",
    )?;
    fs::write(
        root.join("etc/shadow"),
        "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n",
    )?;
    fs::write(
        root.join("etc/gshadow"),
        "root:*::\nwheel:*::core\nusers:*::\ncore:!::\n",
    )?;
    fs::set_permissions(root.join("etc/shadow"), fs::Permissions::from_mode(0o640))?;
    Ok(())
}
