//! The booted simulation: a process that sees a deployment of a test sysroot
//! as the running system, so libostree reports it booted and stages deployments.
//!
//! `unshare -m` gives the process its own mount namespace. Inside, the deployment directory
//! becomes the root (bind-mounted onto itself, as ostree-prepare-root does): the host's `/usr` (binaries and libraries), `/dev` and `/tmp` are bind
//! mounted into it, the sysroot at `/sysroot` (so `/ostree` resolves) with its `boot` at
//! `/boot` and the stateroot's `var` at `/var`, a fresh `/proc` whose `cmdline` is the
//! deployment's BLS `options` (with `ostree=`), and a tmpfs `/run` holding `ostree-booted`.
//! Then it is `chroot`ed into and the program runs. Nothing is visible outside the namespace;
//! killing the process (on drop) tears it down.
//!
//! The process keeps the host's PID namespace so that D-Bus peers outside can authenticate to
//! it (a server cannot see the credentials of a peer outside its PID namespace).
//! [`BootedProcess::exec`] runs commands in its mount namespace and root, adding a PID
//! namespace of their own: the ostree CLI needs one to write (it reads `/proc/1/ns/mnt`,
//! which the machine's real PID 1 does not allow).
//!
//! Paths the program needs from the host (its binary, a bus socket, a run directory) must be
//! under `/tmp`, which is shared.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::TestSysroot;

/// A process running with a deployment of a [`TestSysroot`] as its booted root. Killed on drop.
#[derive(Debug)]
pub struct BootedProcess {
    unshare: Child,
    pid: u32,
}

impl TestSysroot {
    /// Runs `program args` as if the deployment at `index` were booted. `program` is copied
    /// under this sysroot's temporary directory (which must be under `/tmp`) first.
    pub fn spawn_booted(
        &self,
        index: usize,
        program: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Result<BootedProcess> {
        let deployments = self.deployments()?;
        let d = deployments
            .get(index)
            .with_context(|| format!("no deployment {index}"))?;
        let deploy_dir = self.sysroot.join(format!(
            "ostree/deploy/{}/deploy/{}.{}",
            d.osname, d.checksum, d.serial
        ));
        let bin_dir = self.work.join("bin");
        std::fs::create_dir_all(&bin_dir)?;
        let name = program.file_name().context("program has no file name")?;
        let copy = bin_dir.join(name);
        // Through a new file renamed into place: the copy a previous simulation ran may still be
        // executing (being killed), and a running binary cannot be opened for writing.
        let partial = bin_dir.join(format!(".{}.partial", name.to_string_lossy()));
        std::fs::copy(program, &partial)
            .and_then(|_| std::fs::rename(&partial, &copy))
            .with_context(|| format!("copying {} into the test sysroot", program.display()))?;
        for p in [&copy, &self.sysroot] {
            if !p.starts_with("/tmp") {
                bail!(
                    "{} is not under /tmp, which is all the booted simulation shares",
                    p.display()
                );
            }
        }
        let script = format!(
            r#"set -e
D={d}; S={s}
mount --bind "$D" "$D"
mount --bind /usr "$D/usr"
mount --bind /dev "$D/dev"
mount --bind /tmp "$D/tmp"
mount --bind "$S/boot" "$D/boot"
mount --bind "$S" "$D/sysroot"
mount --bind "$S/ostree/deploy/{os}/var" "$D/var"
mount -t proc proc "$D/proc"
mount -t tmpfs tmpfs "$D/run"
touch "$D/run/ostree-booted"
printf '%s\n' {opts} > "$D/run/.cmdline"
mount --bind "$D/run/.cmdline" "$D/proc/cmdline"
exec chroot "$D" "$@"
"#,
            d = shell_quote(&deploy_dir.display().to_string()),
            s = shell_quote(&self.sysroot.display().to_string()),
            os = d.osname,
            opts = shell_quote(&d.options),
        );
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--mount",
            "--fork",
            "--kill-child",
            "--propagation",
            "private",
        ])
        .args(["sh", "-c", &script, "booted-sim"])
        .arg(&copy)
        .args(args)
        .stdin(Stdio::null());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut unshare = cmd.spawn().context("starting unshare (util-linux)")?;
        let pid = match wait_for_child(unshare.id()) {
            Ok(pid) => pid,
            Err(e) => {
                let _ = unshare.kill();
                let _ = unshare.wait();
                return Err(e);
            }
        };
        Ok(BootedProcess { unshare, pid })
    }
}

impl BootedProcess {
    /// The simulated system's process id as the host sees it.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.unshare.try_wait(), Ok(None))
    }

    /// Runs a command inside the simulation (same mounts and root, a PID namespace of its
    /// own), e.g. `ostree admin finalize-staged`, which stands in for
    /// `ostree-finalize-staged.service` at shutdown. Returns stdout; fails with stderr.
    pub fn exec(&self, args: &[&str]) -> Result<String> {
        // A nested mount namespace, so the fresh /proc does not hide the simulated
        // /proc/cmdline from the process itself.
        let inner =
            "mount -t proc proc /proc && mount --bind /run/.cmdline /proc/cmdline && exec \"$@\"";
        let out = Command::new("nsenter")
            .arg(format!("--target={}", self.pid))
            .args(["--mount", "--root", "--wd", "--"])
            .args([
                "unshare",
                "--mount",
                "--pid",
                "--fork",
                "--propagation",
                "unchanged",
            ])
            .args(["sh", "-c", inner, "booted-sim-exec"])
            .args(args)
            .output()
            .context("running nsenter (util-linux)")?;
        if !out.status.success() {
            bail!(
                "{} in the booted simulation failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for BootedProcess {
    fn drop(&mut self) {
        // --kill-child: unshare's death takes its child with it.
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// The pid of unshare's forked child (the simulated system's first process).
fn wait_for_child(unshare: u32) -> Result<u32> {
    let children = PathBuf::from(format!("/proc/{unshare}/task/{unshare}/children"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&children).unwrap_or_default();
        if let Some(pid) = text.split_whitespace().next() {
            return pid.parse().context("parsing a child pid");
        }
        if Instant::now() > deadline {
            bail!("unshare started no child within 10 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
