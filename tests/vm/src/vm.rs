//! A test VM across its boots: its own copy of a cached disk, a 9p share, a guest agent
//! connection, and a boot loop that follows reboots the way a boot loader would (the ostree
//! disk boots the highest-version BLS entry with its options).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;

use crate::bls::BootEntry;
use crate::console::{self, BootEnd};
use crate::ext4;
use crate::images::{self, Images};
use crate::qemu::{Qemu, QemuConfig};
use crate::qga::{ExecOutput, GuestAgent};

mod power;

/// The host's loopback as the guest sees it (qemu user-mode network).
pub const HOST_FROM_GUEST: &str = "10.0.2.2";
/// Where the guest mounts the VM's share directory.
pub const GUEST_SHARE: &str = "/mnt/host";
/// Kernel command line of the plain disk (the ostree disk's comes from its boot entries, which
/// `build-image.sh` gives the same arguments). `no_timer_check`: under TCG on a loaded host the
/// kernel's check that the timer interrupt ticks within a few emulated jiffies fails at random
/// ("IO-APIC + timer doesn't work!", a panic before init); `quiet`: the kernel's and systemd's
/// boot messages are written to the emulated UART character by character, which costs each boot
/// seconds of emulated CPU (the journal in the guest keeps them all, and errors still reach the
/// console).
const PLAIN_CMDLINE: &str = "root=/dev/vda rw console=ttyS0 panic=-1 no_timer_check quiet";
/// What the SELinux disk adds: Debian's kernel starts AppArmor unless told otherwise.
const SELINUX_KARGS: &str = "security=selinux selinux=1 enforcing=0";

/// Which cached disk the VM boots (a private copy of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disk {
    /// Plain ext4 root: Debian with systemd, writable /usr.
    Plain,
    /// ostree sysroot: booted through its BLS entries; commits `debian/mco/a` and `b`.
    Ostree,
    /// The plain disk with Debian's reference policy and the `mco_agent` module, labelled,
    /// booted with SELinux on in permissive mode (denials are logged, not enforced).
    SELinux,
}

/// Options of a VM; `boot()` starts it.
#[derive(Debug, Clone)]
pub struct VmBuilder {
    name: String,
    disk: Disk,
    kargs: Vec<String>,
    memory_mb: u32,
    timeout: Duration,
    forwards: Vec<u16>,
    fw_cfg: Vec<(String, PathBuf)>,
}

/// One boot of the VM.
#[derive(Debug, Clone)]
pub struct Boot {
    /// The BLS entry booted (ostree disk).
    pub entry: Option<BootEntry>,
    pub cmdline: String,
    /// The serial console, ANSI stripped.
    pub console_log: PathBuf,
    /// `systemctl is-system-running --wait` once the boot finished: `running` or `degraded`.
    pub system_state: String,
    /// When qemu was started for it.
    pub started: Instant,
    /// From qemu's start to the system up (`systemctl is-system-running --wait` returned): how
    /// fast this host runs the guest right now.
    pub up: Option<Duration>,
}

/// A booted VM. Dropping it kills qemu; if the test is failing, the console logs are kept and
/// their tail printed.
pub struct Vm {
    name: String,
    disk: Disk,
    images: &'static Images,
    work: tempfile::TempDir,
    disk_image: PathBuf,
    share: PathBuf,
    log_dir: PathBuf,
    kargs: Vec<String>,
    memory_mb: u32,
    forwards: Vec<(u16, u16)>,
    fw_cfg: Vec<(String, PathBuf)>,
    t0: Instant,
    deadline: Instant,
    qemu: Option<Qemu>,
    agent: Option<GuestAgent>,
    boots: Vec<Boot>,
    /// Kernel arguments for the next boot only (`Vm::next_boot_kargs`).
    next_boot_kargs: Vec<String>,
}

impl Vm {
    /// A VM named `name` (logs go to `$MCO_VM_CACHE/logs/<name>/`) booting `disk`.
    pub fn builder(name: &str, disk: Disk) -> VmBuilder {
        let timeout = std::env::var("MCO_VM_TIMEOUT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(300);
        VmBuilder {
            name: name.to_string(),
            disk,
            kargs: Vec::new(),
            memory_mb: 1024,
            timeout: Duration::from_secs(timeout),
            forwards: Vec::new(),
            fw_cfg: Vec::new(),
        }
    }
}

impl VmBuilder {
    /// An extra kernel argument for every boot.
    pub fn karg(mut self, arg: &str) -> Self {
        self.kargs.push(arg.to_string());
        self
    }

    pub fn memory_mb(mut self, mb: u32) -> Self {
        self.memory_mb = mb;
        self
    }

    /// Wall-clock limit for the whole VM, all boots included (default 300 s, or
    /// `$MCO_VM_TIMEOUT` seconds); qemu is killed when it passes.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Forwards a free host port on 127.0.0.1 to TCP `guest_port` (see `Vm::host_port`).
    pub fn forward(mut self, guest_port: u16) -> Self {
        self.forwards.push(guest_port);
        self
    }

    /// A fw_cfg blob, e.g. `("opt/com.coreos/config", ign)`: the guest reads it at
    /// `/sys/firmware/qemu_fw_cfg/by_name/<name>/raw`.
    pub fn fw_cfg(mut self, name: &str, file: &Path) -> Self {
        self.fw_cfg.push((name.to_string(), file.to_path_buf()));
        self
    }

    /// Copies the disk, boots, and waits until the guest finished booting.
    pub fn boot(self) -> Result<Vm> {
        let images = Images::ensure()?;
        let t0 = Instant::now();
        let work = tempfile::Builder::new()
            .prefix(&format!("mco-vm-{}-", self.name))
            .tempdir()
            .context("creating the VM's work directory")?;
        let log_dir = images::cache_dir().join("logs").join(&self.name);
        let _ = std::fs::remove_dir_all(&log_dir);
        std::fs::create_dir_all(&log_dir)
            .with_context(|| format!("creating {}", log_dir.display()))?;
        let share = work.path().join("share");
        std::fs::create_dir(&share)?;
        let source = match self.disk {
            Disk::Plain => &images.disk,
            Disk::Ostree => &images.ostree,
            Disk::SELinux => Images::selinux_disk()?,
        };
        let disk_image = work.path().join("disk.raw");
        let status = Command::new("cp")
            .arg("--sparse=always")
            .arg(source)
            .arg(&disk_image)
            .status()
            .context("running cp")?;
        ensure!(status.success(), "copying {} failed", source.display());
        let mut forwards = Vec::new();
        for guest in &self.forwards {
            forwards.push((free_port()?, *guest));
        }
        let mut vm = Vm {
            name: self.name,
            disk: self.disk,
            images,
            work,
            disk_image,
            share,
            log_dir,
            kargs: self.kargs,
            memory_mb: self.memory_mb,
            forwards,
            fw_cfg: self.fw_cfg,
            t0,
            deadline: t0 + self.timeout,
            qemu: None,
            agent: None,
            boots: Vec::new(),
            next_boot_kargs: Vec::new(),
        };
        match vm.start_boot() {
            Ok(()) => Ok(vm),
            Err(e) => Err(vm.with_console(e)),
        }
    }
}

/// A port nobody listens on right now.
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Vm {
    /// Boots the disk once and waits until the boot finished (`start_boot`), through the guest
    /// agent.
    fn start_boot(&mut self) -> Result<()> {
        let agent_socket = self.launch_boot()?;
        self.finish_boot(&agent_socket)
    }

    /// Starts qemu on what a boot loader would pick now (the kernel, initramfs and command
    /// line); returns the guest agent's socket. Does not wait for anything.
    fn launch_boot(&mut self) -> Result<PathBuf> {
        let n = self.boots.len() + 1;
        let (kernel, initrd, entry, mut cmdline) = match self.disk {
            Disk::Plain => (
                self.images.vmlinux.clone(),
                self.images.initrd.clone(),
                None,
                PLAIN_CMDLINE.to_string(),
            ),
            Disk::SELinux => (
                self.images.vmlinux.clone(),
                self.images.initrd.clone(),
                None,
                format!("{PLAIN_CMDLINE} {SELINUX_KARGS}"),
            ),
            Disk::Ostree => {
                let entry = ext4::default_boot_entry(&self.disk_image)?;
                let kernel = self.work.path().join(format!("boot{n}-kernel"));
                let initrd = self.work.path().join(format!("boot{n}-initrd"));
                // BLS paths are relative to the boot partition; here /boot is on the root fs
                ext4::dump(&self.disk_image, &format!("/boot{}", entry.linux), &kernel)?;
                let initrd_path = entry
                    .initrd
                    .as_ref()
                    .with_context(|| format!("boot entry {} has no initrd", entry.file))?;
                ext4::dump(&self.disk_image, &format!("/boot{initrd_path}"), &initrd)?;
                let cmdline = entry.options.clone();
                (kernel, initrd, Some(entry), cmdline)
            }
        };
        for karg in self.kargs.iter().chain(&self.next_boot_kargs) {
            cmdline.push(' ');
            cmdline.push_str(karg);
        }
        self.next_boot_kargs.clear();
        let config = QemuConfig {
            kernel,
            initrd,
            cmdline: cmdline.clone(),
            disk: self.disk_image.clone(),
            share: self.share.clone(),
            agent_socket: self.work.path().join("qga.sock"),
            forwards: self.forwards.clone(),
            fw_cfg: self.fw_cfg.clone(),
            memory_mb: self.memory_mb,
        };
        let console_log = self.log_dir.join(format!("boot{n}.log"));
        self.log(&format!("boot {n}: {cmdline}"));
        let qemu = Qemu::spawn(&config, &console_log, self.t0, self.deadline)?;
        self.qemu = Some(qemu);
        self.boots.push(Boot {
            entry,
            cmdline,
            console_log,
            system_state: String::new(),
            started: Instant::now(),
            up: None,
        });
        Ok(config.agent_socket)
    }

    /// Connects to the guest agent of the boot just launched and waits until the boot finished.
    fn finish_boot(&mut self, agent_socket: &Path) -> Result<()> {
        let n = self.boots.len();
        self.connect_agent(agent_socket)?;
        let state = self.exec("systemctl is-system-running --wait")?;
        let state = state.stdout.trim().to_string();
        self.log(&format!("boot {n}: system {state}"));
        if let Some(boot) = self.boots.last_mut() {
            boot.system_state = state;
            boot.up = Some(boot.started.elapsed());
        }
        Ok(())
    }

    /// Connects to the guest agent, giving up early when qemu exits (a failed boot).
    fn connect_agent(&mut self, socket: &Path) -> Result<()> {
        loop {
            if self.qemu.as_ref().is_none_or(Qemu::exited) {
                bail!("{}: qemu exited during boot", self.name);
            }
            let attempt = (Instant::now() + Duration::from_secs(10)).min(self.deadline);
            match GuestAgent::connect(socket, attempt) {
                Ok(agent) => {
                    self.agent = Some(agent);
                    return Ok(());
                }
                Err(e) if Instant::now() >= self.deadline => {
                    return Err(e.context(format!("{}: VM timeout while booting", self.name)));
                }
                Err(_) => {}
            }
        }
    }

    /// `error`, with the tail of the current boot's console attached.
    fn with_console(&self, error: anyhow::Error) -> anyhow::Error {
        match self.boots.last() {
            Some(boot) => error.context(format!(
                "{}: boot {} failed; last lines of {}:\n{}",
                self.name,
                self.boots.len(),
                boot.console_log.display(),
                console::tail(&boot.console_log, 30)
            )),
            None => error,
        }
    }

    fn log(&self, message: &str) {
        eprintln!(
            "[{:7.2}] vm {}: {message}",
            self.t0.elapsed().as_secs_f64(),
            self.name
        );
    }

    fn agent(&mut self) -> Result<&mut GuestAgent> {
        self.agent
            .as_mut()
            .with_context(|| format!("{}: the VM is not running", self.name))
    }

    /// Runs `script` with `/bin/sh -c` in the guest and returns what it did.
    pub fn exec(&mut self, script: &str) -> Result<ExecOutput> {
        self.exec_with_input(script, b"")
    }

    /// Like `exec`, with `stdin` as the script's standard input.
    pub fn exec_with_input(&mut self, script: &str, stdin: &[u8]) -> Result<ExecOutput> {
        let deadline = self.deadline;
        self.agent()?
            .exec(&["/bin/sh", "-c", script], stdin, deadline)
    }

    /// Runs `script` and returns its stdout; a non-zero exit is an error carrying its output.
    pub fn run(&mut self, script: &str) -> Result<String> {
        let out = self.exec(script)?;
        ensure!(
            out.success(),
            "{}: `{script}` failed ({:?}, signal {:?})\nstdout: {}\nstderr: {}",
            self.name,
            out.code,
            out.signal,
            out.stdout.trim_end(),
            out.stderr.trim_end()
        );
        Ok(out.stdout)
    }

    /// Starts a command in the guest without waiting for it (e.g. `systemctl reboot`).
    fn spawn_in_guest(&mut self, argv: &[&str]) -> Result<()> {
        let deadline = self.deadline;
        let (path, args) = argv.split_first().context("empty command")?;
        self.agent()?
            .call("guest-exec", json!({"path": path, "arg": args}), deadline)?;
        Ok(())
    }

    /// Waits for the current boot to end and says how.
    fn wait_for_end(&mut self, deadline: Instant) -> Result<BootEnd> {
        self.agent = None;
        let mut qemu = self
            .qemu
            .take()
            .with_context(|| format!("{}: the VM is not running", self.name))?;
        let end = qemu.wait(deadline);
        self.log(&format!("boot {} ended: {end:?}", self.boots.len()));
        end
    }

    /// Reboots from inside (`systemctl reboot`) and boots again: the ostree disk boots whatever
    /// its boot entries say now. Returns when the new boot finished.
    pub fn reboot(&mut self) -> Result<()> {
        self.spawn_in_guest(&["/bin/systemctl", "reboot"])?;
        self.follow_reboot(self.deadline)
            .map_err(|e| self.with_console(e))
    }

    /// Waits, at most `within`, for the guest to reboot by itself (e.g. the agent after an OS
    /// change), then boots again and waits until that boot finished.
    pub fn wait_for_reboot(&mut self, within: Duration) -> Result<()> {
        let deadline = (Instant::now() + within).min(self.deadline);
        self.follow_reboot(deadline)
            .map_err(|e| self.with_console(e))
    }

    /// Like `reboot`, but the boot after it is expected to reboot by itself, within `within`,
    /// before it finishes booting (e.g. a first-boot unit ordered early in the boot that stages
    /// OS changes and reboots into them): that boot is followed without waiting for the guest
    /// agent, and this returns when the boot after it finished.
    pub fn reboot_through_a_rebooting_boot(&mut self, within: Duration) -> Result<()> {
        self.spawn_in_guest(&["/bin/systemctl", "reboot"])?;
        let deadline = (Instant::now() + within).min(self.deadline);
        let result = self.follow_early_reboot(deadline);
        result.map_err(|e| self.with_console(e))
    }

    fn follow_early_reboot(&mut self, deadline: Instant) -> Result<()> {
        let end = self.wait_for_end(deadline)?;
        ensure!(
            end == BootEnd::Reboot,
            "{}: expected a reboot, the boot ended with {end:?}",
            self.name
        );
        self.launch_boot()?;
        let end = self.wait_for_end(deadline).with_context(|| {
            format!(
                "{}: boot {} did not reboot by itself",
                self.name,
                self.boots.len()
            )
        })?;
        ensure!(
            end == BootEnd::Reboot,
            "{}: boot {} was to reboot by itself, it ended with {end:?}",
            self.name,
            self.boots.len()
        );
        self.start_boot()
    }

    fn follow_reboot(&mut self, deadline: Instant) -> Result<()> {
        let end = self.wait_for_end(deadline)?;
        ensure!(
            end == BootEnd::Reboot,
            "{}: expected a reboot, the boot ended with {end:?}",
            self.name
        );
        self.start_boot()
    }

    /// Powers off from inside and waits for qemu to exit.
    pub fn poweroff(mut self) -> Result<()> {
        self.spawn_in_guest(&["/bin/systemctl", "poweroff"])?;
        match self.wait_for_end(self.deadline) {
            Ok(BootEnd::PowerOff) => Ok(()),
            Ok(end) => Err(self.with_console(anyhow::anyhow!(
                "{}: expected a power-off, the boot ended with {end:?}",
                self.name
            ))),
            Err(e) => Err(self.with_console(e)),
        }
    }

    /// The host directory the guest sees at `/mnt/host`.
    pub fn share(&self) -> &Path {
        &self.share
    }

    /// Every boot so far, the current one last.
    pub fn boots(&self) -> &[Boot] {
        &self.boots
    }

    /// The current (last) boot.
    pub fn current_boot(&self) -> &Boot {
        self.boots.last().expect("a Vm has booted at least once")
    }

    /// The host port (127.0.0.1) forwarded to `guest_port`.
    pub fn host_port(&self, guest_port: u16) -> Option<u16> {
        self.forwards
            .iter()
            .find(|(_, guest)| *guest == guest_port)
            .map(|(host, _)| *host)
    }

    /// Lets the VM live until `timeout` after its start, if that is later than its deadline
    /// now (the current boot's qemu included).
    pub fn extend_life(&mut self, timeout: Duration) {
        let deadline = self.t0 + timeout;
        if deadline > self.deadline {
            self.deadline = deadline;
            if let Some(qemu) = &self.qemu {
                qemu.extend_deadline(deadline);
            }
        }
    }

    /// Where this VM's console logs are kept.
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.agent = None;
        if let Some(mut qemu) = self.qemu.take() {
            qemu.kill();
        }
        if std::thread::panicking() {
            let last = self.boots.last().map(|b| b.console_log.clone());
            eprintln!(
                "vm {}: failed after {:.0} s, {} boot(s); console logs in {}",
                self.name,
                self.t0.elapsed().as_secs_f64(),
                self.boots.len(),
                self.log_dir.display()
            );
            if let Some(log) = last {
                eprintln!(
                    "--- last lines of {}:\n{}",
                    log.display(),
                    console::tail(&log, 40)
                );
            }
        }
    }
}
