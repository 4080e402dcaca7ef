//! The hostile and broken inputs under `tests/corpus/hostile/`: for each, `once-from` must fail
//! with exactly the error line in the `.err` file beside it, print nothing on stdout, and leave
//! the root byte-for-byte unchanged (every path, mode, owner, content and link target).
//!
//! An input is a config (`.json`, `.yaml`) or a `.url` file holding the source to pass instead
//! (a URL). A `.layout` file beside it adds to the seeded root what the attack needs (a user's
//! symlink, a unit file), one entry per line (`#` starts a comment):
//! - `dir PATH MODE UID:GID`
//! - `symlink PATH TARGET UID:GID` (the link's own owner)
//! - `file PATH MODE UID:GID TEXT` (the rest of the line; `\n` is a newline)

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::{agent, data_dir, seed_root, snapshot, text};

/// A system bus that is not there.
const NO_BUS: &str = "unix:path=/nonexistent/mco-test-no-bus";

fn inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(data_dir().join("corpus/hostile"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "json" || e == "yaml" || e == "url")
        })
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
        lay_out(root, &input.with_extension("layout"));
        let before = snapshot(root);

        let rel = input.strip_prefix(&corpus).unwrap();
        let source = if input.extension().is_some_and(|e| e == "url") {
            PathBuf::from(fs::read_to_string(input).unwrap().trim())
        } else {
            rel.to_path_buf()
        };
        let out = agent()
            .current_dir(&corpus)
            .env_remove("RUST_LOG")
            // No rpm-ostree: the OS refusal names the bus it could not reach.
            .env("DBUS_SYSTEM_BUS_ADDRESS", NO_BUS)
            .arg("once-from")
            .arg(&source)
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

/// Adds the entries of the `.layout` file at `path` (if there is one) to `root`.
fn lay_out(root: &Path, path: &Path) {
    let Ok(text) = fs::read_to_string(path) else {
        return;
    };
    let owner = |s: &str| -> (u32, u32) {
        let (u, g) = s.split_once(':').expect("UID:GID");
        (u.parse().unwrap(), g.parse().unwrap())
    };
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.splitn(5, ' ').collect();
        let at = root.join(fields[1].trim_start_matches('/'));
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        let (uid, gid) = match fields[0] {
            "dir" => {
                fs::create_dir_all(&at).unwrap();
                let mode = u32::from_str_radix(fields[2], 8).unwrap();
                fs::set_permissions(&at, fs::Permissions::from_mode(mode)).unwrap();
                owner(fields[3])
            }
            "symlink" => {
                std::os::unix::fs::symlink(fields[2], &at).unwrap();
                owner(fields[3])
            }
            "file" => {
                fs::write(&at, fields[4].replace("\\n", "\n")).unwrap();
                let mode = u32::from_str_radix(fields[2], 8).unwrap();
                fs::set_permissions(&at, fs::Permissions::from_mode(mode)).unwrap();
                owner(fields[3])
            }
            other => panic!("{}: unknown layout entry {other:?}", path.display()),
        };
        std::os::unix::fs::lchown(&at, Some(uid), Some(gid)).unwrap();
    }
}
