//! A private, real containerd (Debian's `containerd`) for tests of the CRI image service: its
//! own root, state directory and socket under a temporary directory, the `native` snapshotter
//! (unpacking needs no mounts), no CNI and no runtime (pulls need neither), and registry hosts
//! configured through `certs.d/<host>/hosts.toml` (the CA a test registry's certificate is
//! signed by). Its CRI plugin serves `runtime.v1.ImageService` on the socket, as CRI-O does.
//!
//! With [`Options::disk_bytes`] its root is a tmpfs of that size in a mount namespace of its
//! own (so a full disk is real: writes fail with ENOSPC), which [`TestContainerd::resize_disk`]
//! grows or shrinks. That needs root (`unshare`, `nsenter` from util-linux).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::component::missing;

/// How a containerd is started.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Registry hosts (`host:port`) and the CA (PEM) their certificates are signed by.
    pub registries: Vec<(String, String)>,
    /// The root on a tmpfs of this size (bytes), in a mount namespace of its own.
    pub disk_bytes: Option<u64>,
}

pub struct TestContainerd {
    dir: tempfile::TempDir,
    child: Child,
    root: PathBuf,
    socket: PathBuf,
}

impl TestContainerd {
    /// Starts containerd and waits for its socket.
    pub fn start(options: &Options) -> Result<Self> {
        if !Path::new("/usr/bin/containerd").exists() {
            missing(
                "containerd",
                "/usr/bin/containerd is missing (Debian: containerd)",
            );
        }
        if options.disk_bytes.is_some() && !rustix::process::geteuid().is_root() {
            missing("containerd on a tmpfs", "mounting a tmpfs needs root");
        }
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("root");
        let state = dir.path().join("state");
        let socket = dir.path().join("containerd.sock");
        let certs = dir.path().join("certs.d");
        fs::create_dir_all(&root)?;
        for (host, ca) in &options.registries {
            let host_dir = certs.join(host);
            fs::create_dir_all(&host_dir)?;
            fs::write(host_dir.join("ca.crt"), ca)?;
            fs::write(
                host_dir.join("hosts.toml"),
                format!(
                    "server = \"https://{host}\"\n[host.\"https://{host}\"]\n  ca = \"{}\"\n",
                    host_dir.join("ca.crt").display()
                ),
            )?;
        }
        let config = dir.path().join("config.toml");
        let p = |path: &Path| path.display().to_string();
        fs::write(
            &config,
            format!(
                r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.overlayfs", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  level = "info"
[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni}/bin"
    conf_dir = "{cni}/conf"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{certs}"
"#,
                root = p(&root),
                state = p(&state),
                socket = p(&socket),
                opt = p(&dir.path().join("opt")),
                cni = p(&dir.path().join("cni")),
                certs = p(&certs),
            ),
        )?;
        let log = fs::File::create(dir.path().join("containerd.log"))?;
        let mut command = match options.disk_bytes {
            None => {
                let mut c = Command::new("/usr/bin/containerd");
                c.arg("--config").arg(&config);
                c
            }
            Some(bytes) => {
                // `unshare` without --fork execs: the child's pid is containerd's.
                let mut c = Command::new("unshare");
                c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                    .arg(format!(
                        "mount -t tmpfs -o size={bytes} mco-test-containerd \"$1\" && exec /usr/bin/containerd --config \"$2\""
                    ))
                    .arg("sh")
                    .arg(&root)
                    .arg(&config);
                c
            }
        };
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting containerd")?;
        let mut ctr = TestContainerd {
            dir,
            child,
            root,
            socket,
        };
        ctr.wait_ready()?;
        Ok(ctr)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("containerd exited ({status}): {}", self.log());
            }
            if std::os::unix::net::UnixStream::connect(&self.socket).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "containerd did not serve {} within 60 s: {}",
                    self.socket.display(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The CRI socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// containerd's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    /// Gives the tmpfs root `bytes` (a started-with-[`Options::disk_bytes`] instance only).
    pub fn resize_disk(&self, bytes: u64) -> Result<()> {
        let out = Command::new("nsenter")
            .arg(format!("--target={}", self.child.id()))
            .args(["--mount", "--", "mount", "-o"])
            .arg(format!("remount,size={bytes}"))
            .arg(&self.root)
            .output()
            .context("running nsenter")?;
        if !out.status.success() {
            bail!(
                "resizing containerd's disk: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

impl Drop for TestContainerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
