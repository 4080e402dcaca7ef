//! Programs the agent runs on the host where no D-Bus interface exists: `podman` (is an image
//! in local container storage, where does that storage live), `mokutil` (is Secure Boot on),
//! `systemd-run ... podman run ... bootupctl update`, the bootloader's EFI copy (`lsblk`,
//! `findmnt`, `mount`, `cp`, ...) and `journalctl` (the previous boot's
//! `ostree-finalize-staged.service`). [`ProcessCommands`] runs them; `FakeCommands` (feature
//! `fakes`) answers from a script, so each decision the MCD makes from their output is one
//! table row in the callers' tests.

#[cfg(any(test, feature = "fakes"))]
pub mod fake;

use async_trait::async_trait;

#[cfg(any(test, feature = "fakes"))]
pub use fake::FakeCommands;

/// What a program printed, and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// An `Ok(stdout)` when it exited 0, else an error naming the program, its exit and the
    /// last line of its stderr.
    pub fn ok(self, program: &str) -> Result<String, CommandError> {
        if self.success() {
            return Ok(self.stdout);
        }
        let why = self.stderr.trim().lines().last().unwrap_or("").to_string();
        Err(CommandError::Failed {
            program: program.to_string(),
            status: match self.code {
                Some(c) => format!("exit status {c}"),
                None => "killed by a signal".to_string(),
            },
            stderr: why,
        })
    }
}

/// Why a program gave no usable answer.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CommandError {
    #[error("running {program}: {message}")]
    Spawn { program: String, message: String },
    #[error("{program} failed ({status}): {stderr}")]
    Failed {
        program: String,
        status: String,
        stderr: String,
    },
}

/// Runs a program on the host and collects what it printed.
#[async_trait]
pub trait HostCommands: Send + Sync {
    /// Runs `argv[0]` with the rest as arguments; `Err` only when it could not be started.
    async fn run(&self, argv: &[&str]) -> Result<Output, CommandError>;

    /// [`HostCommands::run`], then [`Output::ok`].
    async fn stdout(&self, argv: &[&str]) -> Result<String, CommandError> {
        self.run(argv)
            .await?
            .ok(argv.first().copied().unwrap_or(""))
    }
}

/// The real programs, found on `PATH`, with the agent's environment (plus [`Self::with_env`]).
#[derive(Debug, Default, Clone)]
pub struct ProcessCommands {
    env: Vec<(String, String)>,
    outside_the_unit: bool,
}

/// Programs that cannot run inside the agent's unit sandbox. podman as root without
/// CAP_SYS_ADMIN takes itself for a rootless user and tries a user namespace, which
/// `RestrictNamespaces=` refuses: every query fails (exit 1, "cannot write uid_map"). The
/// bootloader's EFI copy mounts an EFI system partition (CAP_SYS_ADMIN, the host's `/dev`
/// and mount namespace) and works on it and on a temp directory `podman cp` filled on the host
/// (`PrivateTmp=` would hide it): every program of it runs on the host.
const NEED_THE_HOST: &[&str] = &[
    "podman", "lsblk", "findmnt", "mktemp", "mount", "umount", "find", "cp", "rm", "sync",
];

/// Properties of the transient service such a program runs in: the proxy settings, as the
/// MCD's podman gets them.
const TRANSIENT_PROPERTIES: &[&str] = &["-p", "EnvironmentFile=-/etc/mco/proxy.env"];

impl ProcessCommands {
    /// Every program also gets `key=value` (a test's `CONTAINERS_STORAGE_CONF`).
    pub fn with_env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// For the daemon running as its systemd service: the programs that need the host's
    /// privileges (podman) run as transient services of systemd (`systemd-run
    /// --pipe --wait`), outside the unit's sandbox, with their output and exit status passed
    /// back as if run here. A program missing from `PATH` still fails to start (the caller's
    /// "not installed").
    pub fn outside_the_unit(mut self) -> Self {
        self.outside_the_unit = true;
        self
    }

    /// Whether this process runs as a systemd service (systemd sets `INVOCATION_ID` for each
    /// service start), that is inside the unit's sandbox.
    pub fn in_a_systemd_unit() -> bool {
        std::env::var_os("INVOCATION_ID").is_some_and(|v| !v.is_empty())
    }

    /// The command line that runs `argv`: itself, or through `systemd-run`.
    fn command_line<'a>(&'a self, argv: &[&'a str]) -> Vec<String> {
        let mut line = Vec::new();
        if self.outside_the_unit && argv.first().is_some_and(|p| NEED_THE_HOST.contains(p)) {
            line.extend(
                ["systemd-run", "--quiet", "--pipe", "--wait", "--collect"]
                    .iter()
                    .chain(["--service-type=exec"].iter())
                    .chain(TRANSIENT_PROPERTIES)
                    .map(|s| s.to_string()),
            );
            // a transient service starts with systemd's environment, not this one's
            for (k, v) in &self.env {
                line.push(format!("--setenv={k}={v}"));
            }
            line.push("--".into());
        }
        line.extend(argv.iter().map(|s| s.to_string()));
        line
    }
}

/// Whether `program` is an executable file in one of `path`'s directories (or, with a slash,
/// at that path).
fn on_path(program: &str, path: &std::ffi::OsStr) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    std::env::split_paths(path).any(|dir| executable(&dir.join(program)))
}

#[async_trait]
impl HostCommands for ProcessCommands {
    async fn run(&self, argv: &[&str]) -> Result<Output, CommandError> {
        let program = *argv.first().ok_or_else(|| CommandError::Spawn {
            program: String::new(),
            message: "no program given".into(),
        })?;
        let line = self.command_line(argv);
        // PATH as the program would be looked up: the one given with `with_env`, else ours
        let path = match self.env.iter().rev().find(|(k, _)| k == "PATH") {
            Some((_, v)) => v.into(),
            None => std::env::var_os("PATH").unwrap_or_default(),
        };
        if line[0] != program && !on_path(program, &path) {
            // as spawning it here would: not installed
            return Err(CommandError::Spawn {
                program: program.to_string(),
                message: "not found on PATH".into(),
            });
        }
        let out = tokio::process::Command::new(&line[0])
            .args(&line[1..])
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| CommandError::Spawn {
                program: line[0].clone(),
                message: e.to_string(),
            })?;
        Ok(Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_the_unit_podman_runs_as_a_transient_service_and_the_rest_runs_here() {
        let direct = ProcessCommands::default().with_env("A", "b");
        assert_eq!(
            direct.command_line(&["podman", "images"]),
            ["podman", "images"]
        );
        let unit = direct.outside_the_unit();
        assert_eq!(
            unit.command_line(&["podman", "images", "--format=json"]),
            [
                "systemd-run",
                "--quiet",
                "--pipe",
                "--wait",
                "--collect",
                "--service-type=exec",
                "-p",
                "EnvironmentFile=-/etc/mco/proxy.env",
                "--setenv=A=b",
                "--",
                "podman",
                "images",
                "--format=json"
            ]
        );
        assert_eq!(
            unit.command_line(&["journalctl", "-b", "-1"]),
            ["journalctl", "-b", "-1"]
        );
    }

    #[tokio::test]
    async fn a_program_to_run_outside_the_unit_that_is_not_installed_fails_to_start() {
        // a PATH with an executable "podman" and a PATH without one
        let with = tempfile::tempdir().unwrap();
        let podman = with.path().join("podman");
        std::fs::write(&podman, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&podman, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(on_path("podman", with.path().as_os_str()));
        let without = tempfile::tempdir().unwrap();
        std::fs::write(without.path().join("podman"), "not executable").unwrap();
        assert!(!on_path("podman", without.path().as_os_str()));

        let unit = ProcessCommands::default()
            .with_env("PATH", without.path().to_str().unwrap())
            .outside_the_unit();
        let e = unit.run(&["podman", "images"]).await.unwrap_err();
        assert_eq!(
            e,
            CommandError::Spawn {
                program: "podman".into(),
                message: "not found on PATH".into()
            }
        );
    }

    #[tokio::test]
    async fn real_programs_report_output_and_failure() {
        let c = ProcessCommands::default().with_env("MCO_TEST_VALUE", "set");
        assert_eq!(c.stdout(&["echo", "hi"]).await.unwrap(), "hi\n");
        let env = c.stdout(&["sh", "-c", "echo $MCO_TEST_VALUE"]).await;
        assert_eq!(env.unwrap(), "set\n");
        let e = c
            .stdout(&["sh", "-c", "echo first >&2; echo the cause >&2; exit 3"])
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "sh failed (exit status 3): the cause");
        let e = c.run(&["/nonexistent/program"]).await.unwrap_err();
        assert!(
            e.to_string().starts_with("running /nonexistent/program: "),
            "{e}"
        );
    }
}
