//! The order of the agent's writes and syncs, as the kernel sees them (`strace` of a child that
//! runs them): what a power cut leaves depends on it, and the VM power-cut scenarios found it
//! wrong once. The child (an ignored test of this binary) starts an update's bookkeeping on a
//! temp root: the backup of an original the update will replace, then the update record.
//!
//! - every contents reach the disk before any name points at them: the `O_TMPFILE` is fsync'ed
//!   before `linkat` gives it its temp name (else a cut can leave an empty file under the final
//!   name: an empty backup of the original, found by a cut right after `engine::recorded`);
//! - the backups are synced (`syncfs`) before the record that lists them is renamed into place.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use machine_config::MachineConfig;
use mco_agent::engine::backups;
use mco_agent::engine::record::{self, Step, UpdateRecord};
use mco_agent::rootfs::Root;
use serde_json::json;

const CHILD: &str = "write_order_child";
const ROOT_ENV: &str = "MCO_WRITE_ORDER_ROOT";

fn config(name: &str, files: &[&str]) -> MachineConfig {
    let files: Vec<_> = files
        .iter()
        .map(|p| json!({"path": p, "contents": {"source": "data:,managed%0A"}}))
        .collect();
    MachineConfig::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": files}}},
    }))
    .unwrap()
}

/// The child: an update from a config that manages nothing to one that manages an existing file
/// and a new one records their backups, then the update.
#[test]
#[ignore = "run under strace by writes_reach_the_disk_before_the_names_and_records_that_need_them"]
fn write_order_child() {
    let dir = std::env::var(ROOT_ENV).expect("run by the strace test");
    let root = Root::open(&dir).unwrap();
    let (current, desired) = (
        config("old", &[]),
        config("new", &["/etc/vendor.conf", "/etc/new.conf"]),
    );
    let mut rec = UpdateRecord::new(current.clone(), desired.clone(), Step::Writing, "boot");
    backups::prepare(
        &root,
        &mut rec,
        &current.ignition().unwrap(),
        &desired.ignition().unwrap(),
    )
    .unwrap();
    record::store(&root, &rec).unwrap();
}

/// One traced system call: (name, arguments, result).
fn calls(trace: &str) -> Vec<(String, String, String)> {
    trace
        .lines()
        .filter_map(|line| {
            let call = line.split_once(' ')?.1.trim_start();
            let (name, rest) = call.split_once('(')?;
            let (args, result) = rest.rsplit_once(" = ")?;
            Some((
                name.to_string(),
                args.trim_end().trim_end_matches(')').to_string(),
                result.split_whitespace().next()?.to_string(),
            ))
        })
        .collect()
}

#[test]
fn writes_reach_the_disk_before_the_names_and_records_that_need_them() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/vendor.conf"), "the original\n").unwrap();
    let trace_file = tmp.path().join("trace");
    let status = Command::new("strace")
        .args(["-f", "-qq", "-s", "256", "-o"])
        .arg(&trace_file)
        .args([
            "-e",
            "trace=openat,fsync,fdatasync,syncfs,linkat,renameat,renameat2",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", CHILD, "--ignored", "--test-threads=1"])
        .env(ROOT_ENV, &root)
        .status()
        .expect("running strace (package strace)");
    assert!(status.success(), "the traced child failed: {status}");
    let trace = std::fs::read_to_string(&trace_file).unwrap();
    let calls = calls(&trace);

    // fd -> whether the O_TMPFILE opened on it was fsync'ed since
    let mut tmpfiles: HashMap<String, bool> = HashMap::new();
    let mut named = Vec::new();
    let mut synced_after_backups = false;
    let mut record_renamed = false;
    for (name, args, result) in &calls {
        match name.as_str() {
            "openat" if args.contains("O_TMPFILE") => {
                tmpfiles.insert(result.clone(), false);
            }
            "fsync" | "fdatasync" => {
                if let Some(synced) = tmpfiles.get_mut(args.trim()) {
                    *synced = true;
                }
            }
            "linkat" if args.starts_with("AT_FDCWD, \"/proc/self/fd/") => {
                let fd = args
                    .trim_start_matches("AT_FDCWD, \"/proc/self/fd/")
                    .split('"')
                    .next()
                    .unwrap()
                    .to_string();
                let target = args.split(", ").nth(3).unwrap_or_default().to_string();
                // An empty stamp has no contents to lose; every backup copy has.
                if target.contains(".mcdorig") || target.contains("mco-agent-update.json") {
                    assert_eq!(
                        tmpfiles.get(&fd),
                        Some(&true),
                        "{target} named before its contents were fsync'ed:\n{trace}"
                    );
                }
                named.push(target);
            }
            "syncfs" => synced_after_backups = named.iter().any(|n| n.contains(".mcdorig")),
            "renameat" | "renameat2" if args.contains("mco-agent-update.json\"") => {
                assert!(
                    synced_after_backups,
                    "the record was renamed into place before the backups were synced:\n{trace}"
                );
                record_renamed = true;
            }
            _ => {}
        }
    }
    assert!(record_renamed, "no record written:\n{trace}");
    assert!(
        named.iter().any(|n| n.contains("vendor.conf.mcdorig")),
        "no backup of the original written:\n{trace}"
    );
    let backup = root.join("etc/machine-config-daemon/orig/etc/vendor.conf.mcdorig");
    assert_eq!(
        std::fs::read_to_string(Path::new(&backup)).unwrap(),
        "the original\n"
    );
}
