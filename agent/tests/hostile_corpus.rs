//! The hostile and broken inputs under `tests/corpus/hostile/`: for each, `once-from` must fail
//! with exactly the error line in the `.err` file beside it, print nothing on stdout, and leave
//! the root byte-for-byte unchanged (every path, mode, owner, content and link target).

mod common;

use std::fs;
use std::path::PathBuf;

use common::{agent, data_dir, seed_root, snapshot, text};

/// A system bus that is not there.
const NO_BUS: &str = "unix:path=/nonexistent/mco-test-no-bus";

fn inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(data_dir().join("corpus/hostile"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "yaml"))
        .collect();
    v.sort();
    v
}

#[test]
fn hostile_inputs_fail_cleanly_and_change_nothing() {
    let inputs = inputs();
    assert!(inputs.len() >= 30, "only {} hostile inputs", inputs.len());
    let corpus = data_dir().join("corpus");
    let mut failures = Vec::new();
    for input in &inputs {
        let expected_path = input.with_extension("err");
        let expected = fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        seed_root(root);
        // Something for a stray write to clobber: an admin's file and a unit.
        fs::write(root.join("etc/motd"), "keep me\n").unwrap();
        fs::create_dir_all(root.join("etc/systemd/system")).unwrap();
        fs::write(
            root.join("etc/systemd/system/local.service"),
            "[Service]\nExecStart=/bin/true\n",
        )
        .unwrap();
        let before = snapshot(root);

        let rel = input.strip_prefix(&corpus).unwrap();
        let out = agent()
            .current_dir(&corpus)
            .env_remove("RUST_LOG")
            // No rpm-ostree: the OS refusal names the bus it could not reach.
            .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
            .arg("once-from")
            .arg(rel)
            .arg("--root")
            .arg(root)
            .output()
            .unwrap();
        let (stdout, stderr, code) = text(&out);
        let name = rel.display();
        if code == 0 || !stdout.is_empty() || stderr != expected {
            failures.push(format!(
                "{name}: exit {code}\n  stdout: {stdout:?}\n  stderr:   {stderr:?}\n  expected: {expected:?}"
            ));
        }
        if snapshot(root) != before {
            failures.push(format!("{name}: the root changed"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
