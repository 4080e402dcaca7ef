//! Helpers shared by the integration tests: running the built binary, seeding roots, and
//! snapshotting a whole tree to prove it did (or did not) change.

#![allow(dead_code)]

pub mod terminal;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `mco-agent` binary cargo built for these tests.
pub fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mco-agent"))
}

/// The `mco-sysroot-status` helper next to the `mco-agent` binary (where `mco-agent status`
/// looks for it), built by a workspace build (`cargo nextest run --workspace` does).
pub fn sysroot_reader_bin() -> PathBuf {
    let agent = Path::new(env!("CARGO_BIN_EXE_mco-agent"));
    let helper = agent.with_file_name("mco-sysroot-status");
    assert!(
        helper.is_file(),
        "{} is missing: build it with `cargo build -p mco-sysroot-status` (a workspace build does)",
        helper.display()
    );
    helper
}

/// Runs `mco-agent ARGS...`.
pub fn run(args: &[&str]) -> Output {
    agent()
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run mco-agent")
}

/// stdout, stderr and exit code of `out`.
pub fn text(out: &Output) -> (String, String, i32) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Directory of the test data checked into the repository.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The workspace's `examples/` directory.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// A root with the user database a CoreOS node has before its config is applied: root and core
/// (1000:1000), group wheel, and shadow entries with `*` hashes.
pub fn seed_root(dir: &Path) {
    fs::create_dir_all(dir.join("etc")).unwrap();
    fs::create_dir_all(dir.join("home/core")).unwrap();
    fs::set_permissions(dir.join("home/core"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(dir.join("home/core"), Some(1000), Some(1000)).unwrap();
    fs::write(
        dir.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n",
    )
    .unwrap();
    fs::write(
        dir.join("etc/group"),
        "root:x:0:\nwheel:x:10:core\nusers:x:100:\ncore:x:1000:\n",
    )
    .unwrap();
    fs::write(
        dir.join("etc/shadow"),
        "root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n",
    )
    .unwrap();
    fs::write(
        dir.join("etc/gshadow"),
        "root:*::\nwheel:*::core\nusers:*::\ncore:!::\n",
    )
    .unwrap();
    fs::set_permissions(dir.join("etc/shadow"), fs::Permissions::from_mode(0o640)).unwrap();
}

/// Everything under `dir`: path → type/mode, owner, and contents or link target. Two equal
/// snapshots mean a byte-for-byte equal tree (ownership and modes included).
pub fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            let head = format!("{:o} {}:{}", m.mode(), m.uid(), m.gid());
            let v = if m.file_type().is_symlink() {
                format!("{head} -> {}", fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                walk(base, &p, out);
                head
            } else {
                format!("{head} {}", hex_sha256(&fs::read(&p).unwrap()))
            };
            out.insert(rel, v);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
