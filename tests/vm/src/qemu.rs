//! One qemu process = one boot. Always TCG unless KVM is asked for and really usable;
//! `-no-reboot`, so a guest reboot ends the process and the harness decides what boots next.
//! qemu is killed when this value is dropped, at the VM's deadline, and (through setpriv's
//! parent-death signal) when the test process itself dies.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::console::{BootEnd, Console};

/// What to boot and what to attach.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub cmdline: String,
    /// Raw disk image, the guest's /dev/vda.
    pub disk: PathBuf,
    /// Host directory shared as 9p tag `hostshare` (the guest mounts it on /mnt/host).
    pub share: PathBuf,
    /// Host socket of the guest agent's virtio-serial port.
    pub agent_socket: PathBuf,
    /// (host port on 127.0.0.1, guest port) TCP forwards.
    pub forwards: Vec<(u16, u16)>,
    /// (name, file) fw_cfg blobs, e.g. `opt/com.coreos/config`.
    pub fw_cfg: Vec<(String, PathBuf)>,
    pub memory_mb: u32,
}

/// The accelerator: TCG unless `MCO_VM_ACCEL=kvm` and the CPU has VMX/SVM and the KVM module is
/// not `kvm_pvm` (there `/dev/kvm` exists but a Debian guest hangs).
pub fn accel() -> Result<(&'static str, &'static str)> {
    let setting = std::env::var("MCO_VM_ACCEL").ok();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    choose_accel(
        setting.as_deref(),
        &cpuinfo,
        Path::new("/sys/module/kvm_pvm").exists(),
    )
}

/// (qemu `-accel`, `-cpu`) for the `MCO_VM_ACCEL` setting on a host with these CPU flags.
fn choose_accel(
    setting: Option<&str>,
    cpuinfo: &str,
    kvm_pvm: bool,
) -> Result<(&'static str, &'static str)> {
    match setting {
        None | Some("") | Some("tcg") => Ok(("tcg,tb-size=256", "max")),
        Some("kvm") => {
            let hw = cpuinfo
                .split_whitespace()
                .any(|flag| flag == "vmx" || flag == "svm");
            if !hw || kvm_pvm {
                bail!(
                    "MCO_VM_ACCEL=kvm, but KVM is unusable here (no VMX/SVM flag, or kvm_pvm, \
                     under which a Debian guest hangs): unset MCO_VM_ACCEL to use TCG"
                );
            }
            Ok(("kvm", "host"))
        }
        Some(other) => bail!("MCO_VM_ACCEL={other}: expected tcg or kvm"),
    }
}

impl QemuConfig {
    /// The qemu argument list (without the program).
    pub fn args(&self, accel: &str, cpu: &str) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut push = |items: &[&str]| args.extend(items.iter().map(OsString::from));
        let path = |p: &Path| p.display().to_string();
        let memory = self.memory_mb.to_string();
        push(&["-accel", accel, "-cpu", cpu, "-m", &memory, "-smp", "1"]);
        push(&[
            "-nographic",
            "-no-reboot",
            "-nodefaults",
            "-serial",
            "stdio",
        ]);
        push(&[
            "-kernel",
            &path(&self.kernel),
            "-initrd",
            &path(&self.initrd),
        ]);
        push(&["-append", &self.cmdline]);
        let drive = format!(
            "file={},if=virtio,format=raw,cache=unsafe",
            path(&self.disk)
        );
        push(&["-drive", &drive]);
        let share = format!(
            "local,path={},mount_tag=hostshare,security_model=none,id=hs",
            path(&self.share)
        );
        push(&["-virtfs", &share]);
        let mut net = "user,id=n0".to_string();
        for (host, guest) in &self.forwards {
            net.push_str(&format!(",hostfwd=tcp:127.0.0.1:{host}-:{guest}"));
        }
        // no option ROM: the firmware would load and run iPXE's on every boot, and nothing
        // boots from the network (the kernel is given with -kernel)
        push(&[
            "-netdev",
            &net,
            "-device",
            "virtio-net-pci,netdev=n0,romfile=",
        ]);
        let chardev = format!(
            "socket,path={},server=on,wait=off,id=qga0",
            path(&self.agent_socket)
        );
        push(&["-chardev", &chardev, "-device", "virtio-serial"]);
        push(&[
            "-device",
            "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
        ]);
        push(&["-device", "virtio-rng-pci"]);
        for (name, file) in &self.fw_cfg {
            push(&["-fw_cfg", &format!("name={name},file={}", path(file))]);
        }
        args
    }
}

/// A running qemu.
pub struct Qemu {
    child: Arc<Mutex<Child>>,
    console: Console,
    /// Takes a later deadline, or `None` to end.
    watchdog: Option<(Sender<Option<Instant>>, JoinHandle<()>)>,
}

impl Qemu {
    /// Starts qemu; its console goes to `console_log`. It is killed at `deadline` at the latest.
    pub fn spawn(
        config: &QemuConfig,
        console_log: &Path,
        t0: Instant,
        deadline: Instant,
    ) -> Result<Qemu> {
        let (accel, cpu) = accel()?;
        let _ = std::fs::remove_file(&config.agent_socket);
        let stderr_log = console_log.with_extension("qemu-stderr");
        let stderr = std::fs::File::create(&stderr_log)
            .with_context(|| format!("creating {}", stderr_log.display()))?;
        let mut child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--", "qemu-system-x86_64"])
            .args(config.args(accel, cpu))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("starting qemu-system-x86_64 (package qemu-system-x86, util-linux setpriv)")?;
        let stdout = child.stdout.take().context("qemu stdout")?;
        let console = Console::start(stdout, console_log, t0)?;
        let child = Arc::new(Mutex::new(child));
        let (cancel, cancelled) = mpsc::channel::<Option<Instant>>();
        let watched = Arc::clone(&child);
        let watchdog = std::thread::Builder::new()
            .name("vm-watchdog".into())
            .spawn(move || {
                watch_until(deadline, &cancelled, || {
                    let mut child = watched.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = child.kill();
                });
            })
            .context("spawning the VM watchdog")?;
        Ok(Qemu {
            child,
            console,
            watchdog: Some((cancel, watchdog)),
        })
    }

    /// Whether qemu has exited.
    pub fn exited(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        !matches!(child.try_wait(), Ok(None))
    }

    /// Waits for qemu to exit, until `deadline` (then kills it and fails), and says how the
    /// boot ended.
    pub fn wait(&mut self, deadline: Instant) -> Result<BootEnd> {
        while !self.exited() {
            if Instant::now() >= deadline {
                self.kill();
                bail!(
                    "qemu still running at the deadline: killed (console: {})",
                    self.console.path().display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.stop_watchdog();
        Ok(self.console.finish())
    }

    /// Kills qemu (if running) and reaps it.
    pub fn kill(&mut self) {
        {
            let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stop_watchdog();
        self.console.finish();
    }

    fn stop_watchdog(&mut self) {
        if let Some((cancel, thread)) = self.watchdog.take() {
            let _ = cancel.send(None);
            let _ = thread.join();
        }
    }

    /// Moves the deadline qemu is killed at to `later`.
    pub fn extend_deadline(&self, later: Instant) {
        if let Some((watchdog, _)) = &self.watchdog {
            let _ = watchdog.send(Some(later));
        }
    }

    pub fn console_log(&self) -> &Path {
        self.console.path()
    }
}

/// The watchdog's loop: calls `kill` at `deadline`, unless told of a later deadline (`Some`)
/// or to end (`None`, or the sender gone) first. Returns whether it killed.
fn watch_until(
    mut deadline: Instant,
    told: &mpsc::Receiver<Option<Instant>>,
    kill: impl FnOnce(),
) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match told.recv_timeout(left) {
            Ok(Some(later)) => deadline = later,
            Ok(None) | Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => {
                kill();
                return true;
            }
        }
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_kills_at_the_latest_deadline_it_was_given() {
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        tx.send(Some(start + Duration::from_millis(300))).unwrap();
        let mut killed_at = None;
        assert!(watch_until(start + Duration::from_millis(50), &rx, || {
            killed_at = Some(start.elapsed())
        }));
        let at = killed_at.expect("the watchdog said it killed");
        assert!(
            at >= Duration::from_millis(300),
            "killed at {at:?}, before its later deadline"
        );
    }

    #[test]
    fn the_watchdog_ends_without_killing_when_told_or_dropped() {
        let (tx, rx) = mpsc::channel();
        tx.send(None).unwrap();
        assert!(!watch_until(
            Instant::now() + Duration::from_secs(60),
            &rx,
            || { panic!("killed although told to end") }
        ));
        let (tx, rx) = mpsc::channel::<Option<Instant>>();
        drop(tx);
        assert!(!watch_until(
            Instant::now() + Duration::from_secs(60),
            &rx,
            || { panic!("killed although its sender is gone") }
        ));
    }

    fn config() -> QemuConfig {
        QemuConfig {
            kernel: "/c/vmlinux".into(),
            initrd: "/c/initrd.img".into(),
            cmdline: "root=/dev/vda rw console=ttyS0".into(),
            disk: "/w/disk.raw".into(),
            share: "/w/share".into(),
            agent_socket: "/w/qga.sock".into(),
            forwards: vec![(40001, 8797)],
            fw_cfg: vec![("opt/com.coreos/config".into(), "/w/config.ign".into())],
            memory_mb: 1024,
        }
    }

    #[test]
    fn command_line_boots_directly_without_reboot_and_with_the_attachments() {
        let args: Vec<String> = config()
            .args("tcg,tb-size=256", "max")
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let after = |flag: &str| -> Vec<&str> {
            args.windows(2)
                .filter(|w| w[0] == flag)
                .map(|w| w[1].as_str())
                .collect()
        };
        assert_eq!(after("-accel"), ["tcg,tb-size=256"]);
        assert!(args.iter().any(|a| a == "-no-reboot"));
        assert_eq!(after("-kernel"), ["/c/vmlinux"]);
        assert_eq!(after("-append"), ["root=/dev/vda rw console=ttyS0"]);
        assert_eq!(
            after("-drive"),
            ["file=/w/disk.raw,if=virtio,format=raw,cache=unsafe"]
        );
        assert_eq!(
            after("-netdev"),
            ["user,id=n0,hostfwd=tcp:127.0.0.1:40001-:8797"]
        );
        assert_eq!(
            after("-fw_cfg"),
            ["name=opt/com.coreos/config,file=/w/config.ign"]
        );
        assert!(after("-chardev")[0].starts_with("socket,path=/w/qga.sock,server=on"));
        assert!(after("-virtfs")[0].contains("mount_tag=hostshare"));
    }

    #[test]
    fn kvm_only_when_asked_for_and_real() {
        let vmx = "flags : fpu vme vmx sse2";
        let cases = [
            (None, vmx, false, Ok("tcg,tb-size=256")),
            (Some("tcg"), vmx, false, Ok("tcg,tb-size=256")),
            (Some("kvm"), vmx, false, Ok("kvm")),
            (Some("kvm"), vmx, true, Err("KVM is unusable here")),
            (
                Some("kvm"),
                "flags : fpu sse2",
                false,
                Err("KVM is unusable here"),
            ),
            (Some("hvf"), vmx, false, Err("expected tcg or kvm")),
        ];
        for (setting, cpuinfo, pvm, want) in cases {
            let got = choose_accel(setting, cpuinfo, pvm);
            match (got, want) {
                (Ok((accel, _)), Ok(want)) => assert_eq!(accel, want),
                (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{e}"),
                (got, want) => panic!("{setting:?} pvm={pvm}: got {got:?}, want {want:?}"),
            }
        }
    }
}
