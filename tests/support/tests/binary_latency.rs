//! `mco-test-apiserver --latency D --write-latency W`: every request waits D before it is
//! served, every write D + W, so a client sees the server as one across a slow link (the
//! benchmarks' remote API server). Only lower bounds are checked: a delay is a sleep, and a
//! loaded machine makes requests slower, never faster.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `curl` of `path` with `method` (and `body` as a merge patch); how long it took.
fn timed(url: &str, method: &str, path: &str, body: Option<&str>) -> Duration {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", method]);
    if let Some(body) = body {
        cmd.args([
            "-H",
            "Content-Type: application/merge-patch+json",
            "-d",
            body,
        ]);
    }
    cmd.arg(format!("{url}{path}"));
    let start = Instant::now();
    let out = cmd.output().expect("running curl");
    let took = start.elapsed();
    let code = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && code.starts_with('2'),
        "{method} {path}: HTTP {code} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

#[test]
fn latency_options_delay_every_request_and_writes_more() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed.json");
    std::fs::write(
        &seed,
        serde_json::to_string(&mco_test_support::apiserver::fixtures::node("slow")).unwrap(),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_mco-test-apiserver"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http",
            "--anonymous-auth",
            "true",
        ])
        .args(["--latency", "40ms", "--write-latency", "80ms", "--seed"])
        .arg(&seed)
        .arg("--kubeconfig-out")
        .arg(dir.path().join("admin.kubeconfig"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let mut url = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim();
    let read = timed(url, "GET", "/api/v1/nodes/slow", None);
    assert!(read >= Duration::from_millis(40), "a read took {read:?}");
    let write = timed(
        url,
        "PATCH",
        "/api/v1/nodes/slow",
        Some(r#"{"metadata":{"annotations":{"a":"b"}}}"#),
    );
    assert!(
        write >= Duration::from_millis(120),
        "a write took {write:?}, not the latency and the write latency"
    );
}
