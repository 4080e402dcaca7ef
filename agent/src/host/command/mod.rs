//! Programs the agent runs on the host where no D-Bus interface exists: `podman` (is an image
//! in local container storage, where does that storage live), `mokutil` (is Secure Boot on),
//! `systemd-run ... podman run ... bootupctl update` and `journalctl` (the previous boot's
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
}

impl ProcessCommands {
    /// Every program also gets `key=value` (a test's `CONTAINERS_STORAGE_CONF`).
    pub fn with_env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

#[async_trait]
impl HostCommands for ProcessCommands {
    async fn run(&self, argv: &[&str]) -> Result<Output, CommandError> {
        let (program, args) = argv.split_first().ok_or_else(|| CommandError::Spawn {
            program: String::new(),
            message: "no program given".into(),
        })?;
        let out = tokio::process::Command::new(program)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| CommandError::Spawn {
                program: program.to_string(),
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
