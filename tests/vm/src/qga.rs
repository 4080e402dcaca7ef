//! qemu-guest-agent client: JSON commands over the virtio-serial port's host socket. The harness
//! runs guest commands with `guest-exec` (no network, no ssh keys needed).

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

/// Before a command, the agent discards any partial input it holds when it reads this byte;
/// `guest-sync-delimited` puts it before its answer, so stale output can be skipped.
const DELIMITER: u8 = 0xff;

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
    next_id: u64,
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
            next_id: std::process::id() as u64 * 1000,
        };
        agent.sync(deadline)?;
        Ok(agent)
    }

    /// Sends `guest-sync-delimited` with a fresh id until the answer to the latest one arrives.
    fn sync(&mut self, deadline: Instant) -> Result<()> {
        loop {
            self.next_id += 1;
            let id = self.next_id;
            let request = json!({"execute": "guest-sync-delimited", "arguments": {"id": id}});
            let mut bytes = vec![DELIMITER];
            bytes.extend(serde_json::to_vec(&request)?);
            bytes.push(b'\n');
            self.stream
                .write_all(&bytes)
                .context("writing to the guest agent")?;
            let round = (Instant::now() + Duration::from_secs(3)).min(deadline);
            while let Some(reply) = self.read_reply(round)? {
                if reply.get("return").and_then(Value::as_u64) == Some(id) {
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

    /// The next JSON reply, or `None` at `deadline`.
    fn read_reply(&mut self, deadline: Instant) -> Result<Option<Value>> {
        loop {
            self.pending.retain(|b| *b != DELIMITER);
            if let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let text = String::from_utf8_lossy(&line);
                if text.trim().is_empty() {
                    continue;
                }
                return serde_json::from_str(&text)
                    .map(Some)
                    .with_context(|| format!("guest agent sent non-JSON: {}", text.trim()));
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

    /// Runs one agent command and returns its `return` value.
    pub fn call(&mut self, command: &str, arguments: Value, deadline: Instant) -> Result<Value> {
        let request = json!({"execute": command, "arguments": arguments});
        let mut bytes = serde_json::to_vec(&request)?;
        bytes.push(b'\n');
        self.stream
            .write_all(&bytes)
            .context("writing to the guest agent")?;
        let reply = self
            .read_reply(deadline)?
            .with_context(|| format!("guest agent: no answer to {command} in time"))?;
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

    /// A guest agent that, like a real one starting late, first answers two stale sync requests
    /// and sends a stray delimiter, then runs exec requests: `echo` is the only program.
    fn fake_agent(listener: UnixListener) {
        let (stream, _) = listener.accept().unwrap();
        let mut out = stream.try_clone().unwrap();
        let mut input = BufReader::new(stream);
        out.write_all(b"\xff{\"return\": 1}\n\xff{\"return\": 2}\n")
            .unwrap();
        let mut line = Vec::new();
        let mut echoed = String::new();
        while input.read_until(b'\n', &mut line).unwrap() > 0 {
            let text: Vec<u8> = line.drain(..).filter(|b| *b != DELIMITER).collect();
            let req: Value = serde_json::from_slice(&text).unwrap();
            let args = &req["arguments"];
            let reply = match req["execute"].as_str().unwrap() {
                "guest-sync-delimited" => {
                    out.write_all(&[DELIMITER]).unwrap();
                    json!({"return": args["id"]})
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
                "guest-exec" => json!({"error": {"class": "GenericError", "desc": "No such file"}}),
                "guest-exec-status" => json!({"return": {
                    "exited": true, "exitcode": 0,
                    "out-data": B64.encode(format!("{echoed}\n")),
                }}),
                other => panic!("unexpected {other}"),
            };
            writeln!(out, "{reply}").unwrap();
        }
    }

    #[test]
    fn syncs_past_stale_replies_and_runs_commands() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("qga.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || fake_agent(listener));
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut agent = GuestAgent::connect(&socket, deadline).unwrap();
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
        let err = agent.exec(&["/bin/nope"], b"", deadline).unwrap_err();
        assert!(err.to_string().contains("guest-exec failed"), "{err}");
        assert!(err.to_string().contains("No such file"), "{err}");
        drop(agent);
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
