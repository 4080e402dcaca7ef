//! Running `mco-agent` as a person runs it: on a terminal (a pseudo-terminal from `openpty`, its
//! stdin, stdout and stderr, `TERM=xterm`), or with its output redirected to pipes; and the
//! text of either, made comparable from run to run (temporary paths and times replaced).

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

/// What a command printed and how it ended.
#[derive(Debug)]
pub struct Printed {
    /// On a terminal: everything it showed (stdout and stderr interleaved, as the person saw
    /// them); redirected: stdout.
    pub stdout: String,
    /// Redirected: stderr (empty on a terminal, where it is in `stdout`).
    pub stderr: String,
    pub code: i32,
}

/// Runs `command` with its output redirected to pipes (stdin empty), without `NO_COLOR`, as
/// `mco-agent ... > file` does.
pub fn redirected(mut command: Command) -> Printed {
    let out = command
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .output()
        .expect("running mco-agent");
    Printed {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

/// Runs `command` on a new pseudo-terminal (its stdin, stdout and stderr), typing `input` to
/// it, and returns what the terminal showed (`\r\n` read back as `\n`).
pub fn on_terminal(mut command: Command, input: &str) -> Printed {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    // not inherited by what other threads start meanwhile: a slave held open elsewhere would
    // keep the read below from ending
    for fd in [&pty.master, &pty.slave] {
        nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .expect("FD_CLOEXEC on the pty");
    }
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the pty"));
    let mut child = command
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .env("TERM", "xterm")
        .stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave))
        .spawn()
        .expect("running mco-agent on a terminal");
    // only the child holds the terminal now (the command held copies of it for the child's
    // stdio): reading ends (EIO) when it exits
    drop(command);
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    if !input.is_empty() {
        master.write_all(input.as_bytes()).expect("typing");
    }
    let mut shown = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => shown.extend_from_slice(&buf[..n]),
            // EIO: the terminal's last holder closed it
            Err(e) if e.raw_os_error() == Some(nix::libc::EIO) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("reading the terminal: {e}"),
        }
    }
    let status = child.wait().expect("waiting for mco-agent");
    let mut stdout = String::from_utf8_lossy(&shown).replace("\r\n", "\n");
    // the typed answer is echoed by the terminal
    if !input.is_empty() {
        stdout = stdout.replacen(&input.replace("\r\n", "\n"), "", 1);
    }
    Printed {
        stdout,
        stderr: String::new(),
        code: status.code().unwrap_or(-1),
    }
}

/// `text` with ANSI escapes shown as `<ESC>[…m` (readable in a snapshot).
pub fn visible_escapes(text: &str) -> String {
    text.replace('\x1b', "<ESC>")
}

/// `text` with its colour escapes removed.
pub fn without_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find('m').map_or(after.len(), |e| e + 1);
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with what changes from run to run replaced: each `(path, name)` of `paths` by
/// `[name]`, RFC 3339 times by `[TIME]`, ages and durations by `[AGE]`, the ephemeral ports of
/// 127.0.0.1 by `[PORT]`, pids by `[PID]`, a size `(N bytes)` by `([SIZE] bytes)` and the agent's version
/// by `[VERSION]`.
pub fn normalized(text: &str, paths: &[(&str, &str)]) -> String {
    let mut text = text.to_string();
    for (path, name) in paths {
        text = text.replace(path, &format!("[{name}]"));
    }
    let time =
        regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)").unwrap();
    let text = time.replace_all(&text, "[TIME]");
    let age = regex::Regex::new(r"\b\d+(\.\d+)?(ms|s|m|h|d)( \d+(ms|s|m|h))*( ago)\b").unwrap();
    let text = age.replace_all(&text, "[AGE]$5");
    let took = regex::Regex::new(r"(took|in) \d+(\.\d+)?(ms|s)\b").unwrap();
    let text = took.replace_all(&text, "$1 [AGE]");
    // how long a drain went on: at least its timeout, more on a loaded machine (the attempt
    // under way when the timeout passes is finished)
    let drained = regex::Regex::new(
        r"(drain node \S+ after|not drained after) \d+(\.\d+)?(ms|s|m|h)( \d+(\.\d+)?(ms|s|m|h))*\b",
    )
    .unwrap();
    let text = drained.replace_all(&text, "$1 [AGE]");
    // the ports Linux hands out (32768-60999), not a fixed one such as a default
    let port = regex::Regex::new(r"\b127\.0\.0\.1:(3[2-9]\d{3}|[4-6]\d{4})\b").unwrap();
    let text = port.replace_all(&text, "127.0.0.1:[PORT]");
    let pid = regex::Regex::new(r"\bpid \d+\b").unwrap();
    let text = pid.replace_all(&text, "pid [PID]");
    let size = regex::Regex::new(r"\(\d+ bytes\)").unwrap();
    let text = size.replace_all(&text, "([SIZE] bytes)");
    text.replace(
        &format!("mco-agent {}", env!("CARGO_PKG_VERSION")),
        "mco-agent [VERSION]",
    )
}
