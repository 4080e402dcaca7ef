//! Booted systemd containers for tests: `systemd-nspawn --boot --register=no` on the Debian
//! rootfs that `tests/vm/build-image.sh rootfs` builds (real systemd, journald, logind and
//! dbus as PID 1's world, about a second to boot).
//!
//! The container runs on an overlay (`--volatile=overlay`): it starts from the pristine rootfs
//! and its changes vanish with it. Talk to it from the test process through
//! [`Container::bus_address`] (its system bus, reachable through `/proc/<leader>/root`) or run
//! commands in it with [`Container::exec`] (`nsenter`). Dropping a [`Container`] kills it.
//!
//! Rootfs: `$MCO_TEST_ROOTFS` if set (used as is), else `$MCO_VM_CACHE/rootfs` (default
//! `tests/vm/.cache/rootfs`), built or refreshed by the builder first (idempotent, ~0.02 s when
//! current). When the builder cannot run here (not root, or nspawn/debootstrap/the builder
//! missing), [`rootfs`] fails the test with the reason ([`crate::component::missing`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Exit status of `systemd-nspawn` when the container rebooted (its `reboot` ends nspawn with
/// 133, so a caller may start it again on the same root).
pub const REBOOT_EXIT_CODE: i32 = 133;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cache_dir() -> PathBuf {
    std::env::var_os("MCO_VM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/vm/.cache"))
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Why the rootfs cannot be built here, if it cannot.
fn builder_unavailable(builder: &Path) -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not running as root".to_owned());
    }
    for program in ["systemd-nspawn", "debootstrap", "nsenter"] {
        if !on_path(program) {
            return Some(format!(
                "{program} is not installed (tests/setup.sh installs it)"
            ));
        }
    }
    if !builder.is_file() {
        return Some(format!(
            "the rootfs builder {} is missing",
            builder.display()
        ));
    }
    None
}

/// The container rootfs, built or refreshed first. Fails the test, naming the reason, when it
/// cannot be built on this machine (see [`crate::component`] for the opt-out).
pub fn rootfs() -> Result<PathBuf> {
    if let Some(explicit) = std::env::var_os("MCO_TEST_ROOTFS") {
        let path = PathBuf::from(explicit);
        if !path.join("etc/os-release").exists() && !path.join("usr/lib/os-release").exists() {
            bail!(
                "MCO_TEST_ROOTFS={} is not a root file system (no os-release)",
                path.display()
            );
        }
        return Ok(path);
    }
    let builder = workspace_root().join("tests/vm/build-image.sh");
    if let Some(why) = builder_unavailable(&builder) {
        crate::component::missing(
            "nspawn",
            &format!(
                "a booted systemd container, whose rootfs cannot be built here ({why}; \
                 MCO_TEST_ROOTFS may name a Debian rootfs with systemd instead)"
            ),
        );
    }
    let out = Command::new(&builder)
        .arg("rootfs")
        .env("MCO_VM_CACHE", cache_dir())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} rootfs", builder.display()))?;
    if !out.status.success() {
        bail!(
            "{} rootfs failed ({}): {}",
            builder.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(cache_dir().join("rootfs"))
}

/// How to start a container.
#[derive(Debug, Clone)]
pub struct Options {
    /// Host directory -> path in the container (`--bind`).
    pub binds: Vec<(PathBuf, String)>,
    /// How long systemd may take to reach `running` (or `degraded`).
    pub boot_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        // ~1 s on an idle machine; generous for 2 cores shared with builds.
        Self {
            binds: Vec::new(),
            boot_timeout: Duration::from_secs(60),
        }
    }
}

/// A booted container; killed (with everything in it) on drop.
pub struct Container {
    nspawn: Child,
    leader: u32,
    name: String,
    log: PathBuf,
    _logdir: tempfile::TempDir,
    exit: Option<ExitStatus>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl Container {
    /// Boots `rootfs` and waits until systemd reports `running` or `degraded`.
    pub fn boot(rootfs: &Path, options: &Options) -> Result<Self> {
        let name = format!(
            "mcotest-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let logdir = tempfile::tempdir().context("temp dir for the container log")?;
        let log = logdir.path().join("nspawn.log");
        let log_file = File::create(&log).context("container log")?;
        let mut cmd = Command::new("systemd-nspawn");
        cmd.arg("-D")
            .arg(rootfs)
            .args([
                "--volatile=overlay",
                "--boot",
                "--register=no",
                "--keep-unit",
                "--console=pipe",
            ])
            .arg(format!("--machine={name}"));
        for (host, guest) in &options.binds {
            cmd.arg(format!("--bind={}:{guest}", host.display()));
        }
        let nspawn = cmd
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().context("container log")?)
            .stderr(log_file)
            .spawn()
            .context("starting systemd-nspawn")?;
        let mut container = Self {
            nspawn,
            leader: 0,
            name,
            log,
            _logdir: logdir,
            exit: None,
        };
        container.wait_booted(options.boot_timeout)?;
        Ok(container)
    }

    fn wait_booted(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut state = String::new();
        loop {
            if let Some(status) = self.nspawn.try_wait()? {
                self.exit = Some(status);
                bail!(
                    "systemd-nspawn exited during boot ({status}):\n{}",
                    self.log_tail()
                );
            }
            // nspawn's first child sets up namespaces and exits once the container's init,
            // reparented to nspawn, runs: look the child up again until systemd answers.
            self.leader = child_of(self.nspawn.id()).unwrap_or(0);
            if self.leader != 0 {
                let out = self.exec(&["systemctl", "is-system-running"])?;
                state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                match state.as_str() {
                    "running" => return Ok(()),
                    "degraded" => {
                        let failed = self.exec(&["systemctl", "--failed", "--no-legend"])?;
                        eprintln!(
                            "container {} booted degraded; failed units:\n{}",
                            self.name,
                            String::from_utf8_lossy(&failed.stdout)
                        );
                        return Ok(());
                    }
                    _ => {}
                }
            }
            if Instant::now() > deadline {
                let jobs = match self.leader {
                    0 => "(no container init yet)".to_owned(),
                    _ => self
                        .exec(&["systemctl", "list-jobs", "--no-legend"])
                        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                        .unwrap_or_else(|e| e.to_string()),
                };
                bail!(
                    "container did not finish booting within {timeout:?} (state {state:?}); pending jobs:\n{jobs}\nlog:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// PID (in the host's namespace) of the container's init.
    pub fn leader(&self) -> u32 {
        self.leader
    }

    /// The container's root directory, seen from the host.
    pub fn root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.leader))
    }

    /// A D-Bus address for the container's system bus (uid 0 on both sides: EXTERNAL auth works).
    pub fn bus_address(&self) -> String {
        format!(
            "unix:path=/proc/{}/root/run/dbus/system_bus_socket",
            self.leader
        )
    }

    /// Runs a command in all of the container's namespaces.
    pub fn exec(&self, argv: &[&str]) -> Result<Output> {
        Command::new("nsenter")
            .args(["-t", &self.leader.to_string(), "-a"])
            .args(argv)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("nsenter {argv:?}"))
    }

    /// Runs a command in the container; fails unless it succeeds; returns its stdout.
    pub fn run(&self, argv: &[&str]) -> Result<String> {
        let out = self.exec(argv)?;
        if !out.status.success() {
            bail!(
                "{argv:?} in the container failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes a file in the container (creating its parent directories).
    pub fn write_file(&self, path: &str, contents: &str) -> Result<()> {
        let path = self.root().join(path.trim_start_matches('/'));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))
    }

    /// Waits for systemd-nspawn to exit (reboot: [`REBOOT_EXIT_CODE`], poweroff: 0).
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit {
                return Ok(status);
            }
            if let Some(status) = self.nspawn.try_wait()? {
                self.exit = Some(status);
                continue;
            }
            if Instant::now() > deadline {
                bail!(
                    "container still running after {timeout:?}:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether systemd-nspawn is still running.
    pub fn is_running(&mut self) -> bool {
        self.exit.is_none() && matches!(self.nspawn.try_wait(), Ok(None))
    }

    /// The last lines of the container's console and nspawn's messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

/// The one child process of `pid` (nspawn's child is the container's init).
fn child_of(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

impl Drop for Container {
    fn drop(&mut self) {
        // Killing the container's init ends its whole PID namespace, and nspawn exits after
        // it. Never kill nspawn first: its container would live on as an orphan. The init is
        // looked up afresh as nspawn's child each time, so a reused PID is never signalled.
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.is_running() && Instant::now() < deadline {
            if let Some(pid) =
                child_of(self.nspawn.id()).and_then(|p| rustix::process::Pid::from_raw(p as i32))
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.is_running() {
            let _ = self.nspawn.kill();
            let _ = self.nspawn.wait();
        }
    }
}
