//! qemu-guest-agent client: JSON commands over the virtio-serial port's host socket. The harness
//! runs guest commands with `guest-exec` (no network, no ssh keys needed).

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

/// Before a command, the agent discards any partial input it holds when it reads this byte;
/// `guest-sync-delimited` puts it before its answer, so stale output can be skipped.
const DELIMITER: u8 = 0xff;

/// Request ids, unique within this process. qemu's chardev hands the guest agent's port to one
/// connection at a time, and a request written on an earlier connection (an attempt given up while
/// the guest was still booting) is answered on the next one: a fresh id for every request, on
/// every connection, keeps such late answers from being taken for the current one.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// What a guest command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl ExecOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// A synchronised connection to the guest agent.
pub struct GuestAgent {
    stream: UnixStream,
    pending: Vec<u8>,
}

impl GuestAgent {
    /// Connects to `socket` and waits until the guest agent answers, until `deadline`. The guest
    /// may still be booting: what was sent before the agent started is answered late and skipped.
    pub fn connect(socket: &Path, deadline: Instant) -> Result<Self> {
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e).context(format!("connecting to {}", socket.display())),
            }
        };
        let mut agent = GuestAgent {
            stream,
            pending: Vec::new(),
        };
        agent.sync(deadline)?;
        Ok(agent)
    }

    /// Sends `guest-sync-delimited` with a fresh id until the answer to the latest one arrives.
    /// The agent answers the delimiter byte itself with a "stray" parse error; that answer, like
    /// every other one not carrying the id being waited for, is skipped.
    fn sync(&mut self, deadline: Instant) -> Result<()> {
        loop {
            let id = next_id();
            let request = json!({"execute": "guest-sync-delimited", "arguments": {"id": id}});
            let mut bytes = vec![DELIMITER];
            bytes.extend(serde_json::to_vec(&request)?);
            bytes.push(b'\n');
            self.stream
                .write_all(&bytes)
                .context("writing to the guest agent")?;
            let round = (Instant::now() + Duration::from_secs(3)).min(deadline);
            // Before the agent is in step, anything may arrive, even a line cut short.
            while let Some(line) = self.read_line(round)? {
                let reply: Option<Value> = serde_json::from_slice(&line).ok();
                if reply.and_then(|r| r.get("return").and_then(Value::as_u64)) == Some(id) {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                bail!(
                    "the guest agent did not answer in time (guest not booted, or qemu-guest-agent not running)"
                );
            }
        }
    }

    /// The next line, or `None` at `deadline`. A delimiter byte starts a new line: whatever came
    /// before it on the same line is the rest of an answer cut short (written while qemu switched
    /// connections) and is dropped.
    fn read_line(&mut self, deadline: Instant) -> Result<Option<Vec<u8>>> {
        loop {
            let delimiter = self.pending.iter().position(|b| *b == DELIMITER);
            let newline = self.pending.iter().position(|b| *b == b'\n');
            match (delimiter, newline) {
                (Some(d), n) if n.is_none_or(|n| d < n) => {
                    self.pending.drain(..=d);
                    continue;
                }
                (_, Some(n)) => {
                    let line: Vec<u8> = self.pending.drain(..=n).collect();
                    if !line.trim_ascii().is_empty() {
                        return Ok(Some(line));
                    }
                    continue;
                }
                _ => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.stream.set_read_timeout(Some(left))?;
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => bail!("the guest agent socket closed (qemu exited)"),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(None);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    bail!(
                        "the guest agent connection was reset (the guest rebooted or powered off, or qemu exited)"
                    )
                }
                Err(e) => return Err(e).context("reading from the guest agent"),
            }
        }
    }

    /// Runs one agent command and returns its `return` value. The request carries an `id`, which
    /// the agent copies into its answer (an error too); answers without it are late ones (to an
    /// earlier connection's requests, or parse errors for delimiter bytes) and are skipped.
    pub fn call(&mut self, command: &str, arguments: Value, deadline: Instant) -> Result<Value> {
        let id = next_id();
        let request = json!({"execute": command, "arguments": arguments, "id": id});
        let mut bytes = serde_json::to_vec(&request)?;
        bytes.push(b'\n');
        self.stream
            .write_all(&bytes)
            .context("writing to the guest agent")?;
        let reply = loop {
            let line = self
                .read_line(deadline)?
                .with_context(|| format!("guest agent: no answer to {command} in time"))?;
            let reply: Value = serde_json::from_slice(&line).with_context(|| {
                format!(
                    "guest agent sent non-JSON: {}",
                    String::from_utf8_lossy(&line).trim()
                )
            })?;
            if reply.get("id").and_then(Value::as_u64) == Some(id) {
                break reply;
            }
        };
        if let Some(error) = reply.get("error") {
            bail!("guest agent: {command} failed: {error}");
        }
        reply
            .get("return")
            .cloned()
            .with_context(|| format!("guest agent: answer to {command} without 'return': {reply}"))
    }

    /// Runs `argv` in the guest with `stdin` as its input and waits for it, until `deadline`.
    pub fn exec(&mut self, argv: &[&str], stdin: &[u8], deadline: Instant) -> Result<ExecOutput> {
        let (path, args) = argv.split_first().context("empty command")?;
        let mut arguments = json!({"path": path, "arg": args, "capture-output": true});
        if !stdin.is_empty() {
            arguments["input-data"] = Value::String(B64.encode(stdin));
        }
        let started = self.call("guest-exec", arguments, deadline)?;
        let pid = started
            .get("pid")
            .and_then(Value::as_i64)
            .with_context(|| format!("guest-exec answered without pid: {started}"))?;
        let mut pause = Duration::from_millis(50);
        loop {
            let status = self.call("guest-exec-status", json!({"pid": pid}), deadline)?;
            if status.get("exited").and_then(Value::as_bool) == Some(true) {
                return exec_output(&status);
            }
            if Instant::now() + pause >= deadline {
                bail!("guest command {argv:?} still running at the VM's deadline");
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }
}

fn exec_output(status: &Value) -> Result<ExecOutput> {
    let text = |key: &str| -> Result<String> {
        match status.get(key).and_then(Value::as_str) {
            Some(b64) => Ok(String::from_utf8_lossy(&B64.decode(b64)?).into_owned()),
            None => Ok(String::new()),
        }
    };
    let int = |key: &str| status.get(key).and_then(Value::as_i64).map(|v| v as i32);
    Ok(ExecOutput {
        code: int("exitcode"),
        signal: int("signal"),
        stdout: text("out-data")?,
        stderr: text("err-data")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;

    const STRAY: &str =
        r#"{"error": {"class": "GenericError", "desc": "JSON parse error, stray '\uFFFD'"}}"#;

    /// A guest agent serving `connections` connections one after another, as qemu's chardev does,
    /// with the late output a booting guest produces: the first connection starts with an answer
    /// cut short, each later one with the answers to the previous connection's sync requests; and
    /// the parse error qemu-ga (7.2) sends for a delimiter byte comes after the sync answer instead
    /// of before it. Answers echo the request's `id`; `echo` is the only program.
    fn fake_agent(listener: UnixListener, connections: usize) {
        let mut late: Vec<u8> = br#"{"id": 1, "return": {"pi"#.to_vec();
        for _ in 0..connections {
            let (stream, _) = listener.accept().unwrap();
            let mut out = stream.try_clone().unwrap();
            let mut input = BufReader::new(stream);
            out.write_all(&std::mem::take(&mut late)).unwrap();
            let mut line = Vec::new();
            let mut echoed = String::new();
            while input.read_until(b'\n', &mut line).unwrap() > 0 {
                let delimited = line.first() == Some(&DELIMITER);
                let text: Vec<u8> = line.drain(..).filter(|b| *b != DELIMITER).collect();
                let req: Value = serde_json::from_slice(&text).unwrap();
                let args = &req["arguments"];
                let mut reply = match req["execute"].as_str().unwrap() {
                    "guest-sync-delimited" => {
                        let mut answer = vec![DELIMITER];
                        answer.extend(format!("{{\"return\": {}}}\n", args["id"]).bytes());
                        late.extend_from_slice(&answer);
                        out.write_all(&answer).unwrap();
                        if delimited {
                            writeln!(out, "{STRAY}").unwrap();
                        }
                        continue;
                    }
                    "guest-exec" if args["path"] == "/bin/echo" => {
                        let words: Vec<&str> = args["arg"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|a| a.as_str().unwrap())
                            .collect();
                        echoed = words.join(" ");
                        json!({"return": {"pid": 42}})
                    }
                    "guest-exec" => {
                        json!({"error": {"class": "GenericError", "desc": "No such file"}})
                    }
                    "guest-exec-status" => json!({"return": {
                        "exited": true, "exitcode": 0,
                        "out-data": B64.encode(format!("{echoed}\n")),
                    }}),
                    other => panic!("unexpected {other}"),
                };
                reply["id"] = req["id"].clone();
                writeln!(out, "{reply}").unwrap();
            }
        }
    }

    fn echo_hello(agent: &mut GuestAgent, deadline: Instant) {
        let out = agent
            .exec(&["/bin/echo", "hello", "guest"], b"", deadline)
            .unwrap();
        assert_eq!(
            out,
            ExecOutput {
                code: Some(0),
                signal: None,
                stdout: "hello guest\n".into(),
                stderr: String::new()
            }
        );
    }

    #[test]
    fn syncs_past_late_answers_and_runs_commands() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("qga.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || fake_agent(listener, 1));
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut agent = GuestAgent::connect(&socket, deadline).unwrap();
        echo_hello(&mut agent, deadline);
        let err = agent.exec(&["/bin/nope"], b"", deadline).unwrap_err();
        assert!(err.to_string().contains("guest-exec failed"), "{err}");
        assert!(err.to_string().contains("No such file"), "{err}");
        drop(agent);
        server.join().unwrap();
    }

    /// The harness reconnects while a guest boots; the answers to an earlier connection's requests
    /// then arrive on the next one, and must be taken neither for its sync nor for its commands.
    #[test]
    fn a_new_connection_skips_answers_meant_for_the_previous_one() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("qga.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || fake_agent(listener, 2));
        let deadline = Instant::now() + Duration::from_secs(10);
        for _ in 0..2 {
            let mut agent = GuestAgent::connect(&socket, deadline).unwrap();
            echo_hello(&mut agent, deadline);
        }
        server.join().unwrap();
    }

    #[test]
    fn an_agent_that_never_answers_times_out_with_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("qga.sock");
        let _listener = UnixListener::bind(&socket).unwrap();
        let started = Instant::now();
        let err = GuestAgent::connect(&socket, started + Duration::from_millis(500))
            .err()
            .unwrap();
        assert!(err.to_string().contains("did not answer in time"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
