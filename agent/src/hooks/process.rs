//! Running one hook: its process (an executable, or `ansible-playbook` for a playbook) in a
//! process group of its own, the update's JSON on standard input, every output line to the
//! journal, killed with its whole group when it outlives the timeout. What failed is told by
//! the last lines of its output, bounded, so that the node's reason stays readable.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::Command;

use super::{Hook, HookInput, HookOptions, Kind, Placement};
use crate::rootfs::Root;

/// The program that runs a hook inside a root (coreutils' `chroot`, in `PATH`).
const CHROOT: &str = "chroot";
/// Lines of output kept for the message of a failed hook.
const TAIL_LINES: usize = 5;
/// Characters kept of one line of output in that message.
const LINE_CHARS: usize = 300;
/// How long the output of a finished hook is still read (a child it left behind may hold the
/// pipes open; its lines are not waited for beyond this).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How a hook ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookResult {
    /// It exited 0.
    pub success: bool,
    /// `exit status 3`, `killed by signal 9`, `timed out after 5s`, `could not be started: …`.
    pub status: String,
    /// The last lines of its standard error (of its standard output when it wrote nothing
    /// there; for a playbook, the failed tasks when there are any), joined with ` | `.
    pub tail: String,
}

impl HookResult {
    /// `<phase> hook <name> failed (<status>): <tail>`: the node's reason when it failed.
    pub fn message(&self, hook: &Hook) -> String {
        let mut msg = format!("{} hook {} failed ({})", hook.phase, hook.name, self.status);
        if !self.tail.is_empty() {
            msg.push_str(": ");
            msg.push_str(&self.tail);
        }
        msg
    }
}

/// Runs `hook` of `root` with `input` (playbooks in check mode when `check`), where
/// `opts.placement` says: on this machine, or inside the root. The caller leaves out hooks that
/// are not to run at all ([`Placement::Skip`]); here they are refused.
pub async fn run(
    root: &Root,
    hook: &Hook,
    input: &HookInput,
    opts: &HookOptions,
    check: bool,
) -> HookResult {
    match opts.placement {
        Placement::Host => run_file(&root.host_path(&hook.path), hook, input, opts, check).await,
        Placement::Chroot => {
            let inside = HookInput {
                root: "/".into(),
                ..input.clone()
            };
            spawn_and_wait(&hook.path, hook, &inside, opts, check, Some(root.path())).await
        }
        Placement::Skip => HookResult {
            success: false,
            status: "not run: hooks do not run for this root".into(),
            tail: String::new(),
        },
    }
}

/// Runs `hook` from the file at `path` (a host path; `mco-agent diff` checks a config's
/// playbooks from a temporary copy). The hook's working directory is the node's root.
pub async fn run_file(
    path: &Path,
    hook: &Hook,
    input: &HookInput,
    opts: &HookOptions,
    check: bool,
) -> HookResult {
    spawn_and_wait(path, hook, input, opts, check, None).await
}

/// Runs the hook at `path`; inside `chroot` when given (`path` is then the hook's path inside
/// it, and the working directory its `/`), else with `input.root` as working directory.
async fn spawn_and_wait(
    path: &Path,
    hook: &Hook,
    input: &HookInput,
    opts: &HookOptions,
    check: bool,
    chroot: Option<&Path>,
) -> HookResult {
    let path = path.to_path_buf();
    // The program and its arguments; inside a root they are run by chroot(8), which enters
    // the root and its `/` before it executes them (found there, with the root's libraries).
    let (program, args): (PathBuf, Vec<OsString>) = match hook.kind {
        Kind::Executable => (path.clone(), Vec::new()),
        Kind::Playbook => {
            let mut args: Vec<OsString> = ["--connection", "local", "--inventory", "localhost,"]
                .into_iter()
                .map(OsString::from)
                .collect();
            args.push("--extra-vars".into());
            args.push(input.extra_vars(hook).to_string().into());
            if check {
                args.extend(["--check".into(), "--diff".into()]);
            }
            args.push(path.clone().into_os_string());
            (opts.ansible_playbook.clone(), args)
        }
    };
    let mut cmd = match chroot {
        Some(dir) => {
            let mut cmd = Command::new(CHROOT);
            cmd.arg(dir).arg(&program).args(&args);
            cmd
        }
        None => {
            let mut cmd = Command::new(&program);
            cmd.args(&args).current_dir(&input.root);
            cmd
        }
    };
    if hook.kind == Kind::Playbook {
        // Plain lines in the journal (a task's result on one line, which the message of a
        // failed playbook quotes), and no nagging about the implicit localhost.
        cmd.env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_CALLBACK_FORMAT_PRETTY", "false")
            .env("ANSIBLE_LOCALHOST_WARNING", "false")
            .env("ANSIBLE_INVENTORY_UNPARSED_WARNING", "false");
    }
    cmd.envs(input.env(hook))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a timeout kills what it started too.
        .process_group(0)
        .kill_on_drop(true);
    tracing::info!(phase = %hook.phase, hook = hook.name, kind = ?hook.kind, check, chroot = ?chroot, "running hook {}", path.display());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let what = match (chroot, hook.kind) {
                (Some(_), _) => CHROOT.to_string(),
                (None, Kind::Executable) => path.display().to_string(),
                (None, Kind::Playbook) => opts.ansible_playbook.display().to_string(),
            };
            return HookResult {
                success: false,
                status: format!("could not be started: {what}: {e}"),
                tail: String::new(),
            };
        }
    };
    let stdin_json = serde_json::to_vec(input).unwrap_or_default();
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            // A hook that does not read its input closes the pipe: not an error.
            let _ = stdin.write_all(&stdin_json).await;
            let _ = stdin.shutdown().await;
        });
    }
    let stdout = Arc::new(Mutex::new(VecDeque::new()));
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    let readers = [
        child
            .stdout
            .take()
            .map(|s| tokio::spawn(log_lines(s, hook.clone(), "stdout", stdout.clone()))),
        child
            .stderr
            .take()
            .map(|s| tokio::spawn(log_lines(s, hook.clone(), "stderr", stderr.clone()))),
    ];
    let pid = child.id();
    let (success, status) = match tokio::time::timeout(opts.timeout, child.wait()).await {
        Ok(Ok(st)) => (st.success(), describe_exit(st)),
        Ok(Err(e)) => (false, format!("waiting for it failed: {e}")),
        Err(_) => {
            kill_group(pid);
            let _ = child.wait().await;
            (
                false,
                format!(
                    "timed out after {}, killed",
                    humantime::format_duration(opts.timeout)
                ),
            )
        }
    };
    for reader in readers.into_iter().flatten() {
        let _ = tokio::time::timeout(DRAIN_GRACE, reader).await;
    }
    let tail = tail_of(
        hook.kind,
        &stdout.lock().map(|l| l.clone()).unwrap_or_default(),
        &stderr.lock().map(|l| l.clone()).unwrap_or_default(),
    );
    let result = HookResult {
        success,
        status,
        tail,
    };
    if success {
        tracing::info!(phase = %hook.phase, hook = hook.name, "hook succeeded");
    } else {
        tracing::warn!(phase = %hook.phase, hook = hook.name, status = result.status, "hook failed");
    }
    result
}

/// Logs every line of `stream` and keeps the last ones (playbooks: every failed task too).
async fn log_lines(
    stream: impl AsyncRead + Unpin,
    hook: Hook,
    which: &'static str,
    kept: Arc<Mutex<VecDeque<String>>>,
) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(phase = %hook.phase, hook = hook.name, stream = which, "{line}");
        if line.trim().is_empty() {
            continue;
        }
        if let Ok(mut kept) = kept.lock() {
            kept.push_back(cut(&line));
            // Far more than TAIL_LINES: the failed tasks of a playbook are picked from them.
            if kept.len() > 200 {
                kept.pop_front();
            }
        }
    }
}

/// The message part of a failed hook's output (see [`HookResult::tail`]).
fn tail_of(kind: Kind, stdout: &VecDeque<String>, stderr: &VecDeque<String>) -> String {
    let failed_tasks: Vec<&String> = match kind {
        Kind::Playbook => stdout
            .iter()
            .filter(|l| l.starts_with("fatal:") || l.starts_with("failed:"))
            .collect(),
        Kind::Executable => Vec::new(),
    };
    let lines: Vec<&String> = if !failed_tasks.is_empty() {
        failed_tasks
    } else if !stderr.is_empty() {
        stderr.iter().collect()
    } else {
        stdout.iter().collect()
    };
    let start = lines.len().saturating_sub(TAIL_LINES);
    lines[start..]
        .iter()
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// A line cut to [`LINE_CHARS`] characters (never inside one).
fn cut(line: &str) -> String {
    match line.char_indices().nth(LINE_CHARS) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

fn describe_exit(st: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => st.to_string(),
    }
}

/// Kills the process group `pid` leads (the hook and what it started).
fn kill_group(pid: Option<u32>) {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    if let Err(e) = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    ) {
        tracing::warn!(pid, error = %e, "killing the hook's process group");
    }
}
