//! `mco-agent once-from` on temp roots with the examples: first application, re-apply, a second
//! config applying the diff, removal (restored from orig, deleted without one), refusals that
//! leave the root unchanged.

mod common;

use std::fs;
use std::path::Path;

use common::{examples_dir, run, seed_root, snapshot, text};

fn example(name: &str) -> String {
    examples_dir().join(name).display().to_string()
}

/// A temp dir holding the node's root at `root/` (and room for config files beside it).
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("root")
    }
}

fn node() -> (Node, String) {
    let dir = tempfile::tempdir().unwrap();
    let node = Node { dir };
    fs::create_dir(node.path()).unwrap();
    seed_root(&node.path());
    fs::write(
        node.path().join("etc/chrony.conf"),
        "pool 2.fedora.pool.ntp.org iburst\n",
    )
    .unwrap();
    let root = node.path().display().to_string();
    (node, root)
}

fn once_from(file: &str, root: &str, extra: &[&str]) -> (String, String, i32) {
    let mut args = vec!["once-from", file, "--root", root];
    args.extend_from_slice(extra);
    text(&run(&args))
}

fn validate(file: &str, root: &str) -> i32 {
    text(&run(&["validate", "--config", file, "--root", root])).2
}

#[test]
fn first_application_reapply_and_second_config() {
    let (dir, root) = node();
    let base = example("00-worker-base.yaml");
    let (stdout, stderr, code) = once_from(&base, &root, &["--skip-os", "--skip-reboot"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "applied 00-worker-base to {root} (first application)\n"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "left out (--skip-os): kernel arguments: +systemd.unified_cgroup_hierarchy=1\n"
        )
    );
    assert!(
        stdout.contains("reboot needed: not rebooting (--skip-reboot)\n"),
        "{stdout}"
    );
    assert_eq!(validate(&base, &root), 0);
    let r = &dir.path();
    assert_eq!(
        fs::read_link(r.join("etc/systemd/system/multi-user.target.wants/node-report.service"))
            .unwrap(),
        Path::new("/etc/systemd/system/node-report.service")
    );
    let current: serde_json::Value = serde_json::from_slice(
        &fs::read(r.join("etc/machine-config-daemon/currentconfig")).unwrap(),
    )
    .unwrap();
    assert_eq!(current["metadata"]["name"], "00-worker-base");
    // The OS parts were left out, so the record keeps the root's (empty) OS fields.
    assert!(
        current["spec"].get("osImageURL").is_none_or(|v| v == ""),
        "{current}"
    );

    // Re-applying changes nothing on disk.
    let before = snapshot(r);
    let (stdout, _, code) = once_from(&base, &root, &["--skip-os", "--skip-reboot"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("files: 0 written, 5 unchanged, 0 restored, 0 removed\n"),
        "{stdout}"
    );
    assert_eq!(snapshot(r), before);

    // The files-only change: applied without a reboot; the base no longer validates.
    let files_only = example("01-worker-files-only.yaml");
    let (stdout, _, code) = once_from(&files_only, &root, &["--skip-os", "--skip-reboot"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("applied 01-worker-files-only to ")
            && stdout.contains("(was 00-worker-base)")
    );
    assert!(
        stdout.contains(
            "post-update actions: Reload crio.service, Special\n  \
             /etc/containers/policy.json: Reload crio.service (default policy)\n  \
             /etc/containers/registries.conf: Special (default policy)\n  \
             SSH keys: None (default policy)\nno reboot needed\n"
        ),
        "{stdout}"
    );
    assert_eq!(validate(&files_only, &root), 0);
    assert_eq!(validate(&base, &root), 1);
    assert_eq!(
        fs::read_to_string(r.join("home/core/.ssh/authorized_keys.d/ignition"))
            .unwrap()
            .lines()
            .count(),
        2
    );
}

#[test]
fn dropping_files_and_units_restores_or_deletes_them() {
    let (dir, root) = node();
    let r = &dir.path();
    let base = example("00-worker-base.yaml");
    assert_eq!(once_from(&base, &root, &["--skip-os"]).2, 0);
    // The base config without chrony.conf, the sysctl file and node-report.service.
    let mut config = machine_config::document::parse_value(&fs::read(&base).unwrap()).unwrap();
    let spec = &mut config["spec"]["config"];
    spec["storage"]["files"]
        .as_array_mut()
        .unwrap()
        .retain(|f| {
            !["/etc/chrony.conf", "/etc/sysctl.d/99-worker.conf"]
                .contains(&f["path"].as_str().unwrap())
        });
    spec["systemd"]["units"]
        .as_array_mut()
        .unwrap()
        .retain(|u| u["name"] != "node-report.service");
    config["metadata"]["name"] = "04-worker-smaller".into();
    let smaller = dir.dir.path().join("smaller.json");
    fs::write(&smaller, serde_json::to_vec(&config).unwrap()).unwrap();

    let (stdout, stderr, code) = once_from(&smaller.display().to_string(), &root, &["--skip-os"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("files: 0 written, 3 unchanged, 1 restored, 1 removed\nunits: 1 unit files changed, 1 units removed"), "{stdout}");
    assert_eq!(
        fs::read_to_string(r.join("etc/chrony.conf")).unwrap(),
        "pool 2.fedora.pool.ntp.org iburst\n"
    );
    assert!(!r.join("etc/sysctl.d/99-worker.conf").exists());
    assert!(!r.join("etc/systemd/system/node-report.service").exists());
    assert!(
        fs::symlink_metadata(
            r.join("etc/systemd/system/multi-user.target.wants/node-report.service")
        )
        .is_err()
    );
    assert!(
        !r.join("etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig")
            .exists()
    );
    assert_eq!(validate(&smaller.display().to_string(), &root), 0);
}

#[test]
fn os_changes_are_refused_without_skip_os() {
    let (dir, root) = node();
    let before = snapshot(&dir.path());
    let (stdout, stderr, code) =
        once_from(&example("00-worker-base.yaml"), &root, &["--skip-reboot"]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains("config 00-worker-base changes the OS (osImageURL \"\" -> \"quay.io/"),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("nothing was changed. Rerun with --skip-os to apply everything else\n"),
        "{stderr}"
    );
    assert_eq!(snapshot(&dir.path()), before);
}

#[test]
fn unreconcilable_change_exits_2_and_changes_nothing() {
    let (dir, root) = node();
    assert_eq!(
        once_from(&example("00-worker-base.yaml"), &root, &["--skip-os"]).2,
        0
    );
    let before = snapshot(&dir.path());
    let bad = dir.dir.path().join("groups.ign");
    fs::write(
        &bad,
        r#"{"ignition":{"version":"3.2.0"},"passwd":{"groups":[{"name":"admins"}]}}"#,
    )
    .unwrap();
    let (stdout, stderr, code) = once_from(&bad.display().to_string(), &root, &[]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    // the short version: the section and what in it (the MCD's words are the reason
    // annotation's and diff -o json's)
    assert_eq!(
        stderr,
        "error: unreconcilable: passwd.groups cannot change on a running node\n  added admins\n"
    );
    assert_eq!(snapshot(&dir.path()), before);
}

#[test]
fn bare_ignition_config_is_recorded_as_a_machineconfig() {
    let (dir, root) = node();
    let ign = common::data_dir().join("oracle/12-everything.ign");
    let (stdout, stderr, code) = once_from(&ign.display().to_string(), &root, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let current: serde_json::Value = serde_json::from_slice(
        &fs::read(dir.path().join("etc/machine-config-daemon/currentconfig")).unwrap(),
    )
    .unwrap();
    assert_eq!(current["kind"], "MachineConfig");
    assert_eq!(current["metadata"]["name"], "12-everything");
    assert_eq!(current["spec"]["config"]["ignition"]["version"], "3.3.0");
}

/// `--policy FILE`: the file's policies are merged over the default table and the output names
/// the entry behind each action; a policy file that cannot be read changes nothing.
#[test]
fn a_policy_file_decides_the_post_update_actions() {
    let (dir, root) = node();
    let (_, stderr, code) = once_from(
        &example("00-worker-base.yaml"),
        &root,
        &["--skip-os", "--skip-reboot"],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = dir.dir.path();
    let files_only = example("01-worker-files-only.yaml");

    let missing = r.join("missing-policy.yaml");
    let before = snapshot(r);
    let (stdout, stderr, code) = once_from(
        &files_only,
        &root,
        &[
            "--skip-os",
            "--skip-reboot",
            "--policy",
            &missing.display().to_string(),
        ],
    );
    // invalid input (docs/agent.md, "Exit codes")
    assert_eq!((code, stdout.as_str()), (65, ""));
    assert!(
        stderr.contains(&format!("reading {}", missing.display())),
        "{stderr}"
    );
    assert_eq!(snapshot(r), before, "nothing changed");

    let policy = r.join("policy.yaml");
    fs::write(&policy, "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec:\n  nodeDisruptionPolicy:\n    files:\n    - path: /etc/containers/policy.json\n      actions:\n      - type: Restart\n        restart: {serviceName: crio.service}\n").unwrap();
    let (stdout, stderr, code) = once_from(
        &files_only,
        &root,
        &[
            "--skip-os",
            "--skip-reboot",
            "--policy",
            &policy.display().to_string(),
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "post-update actions: Restart crio.service, Special\n  \
             /etc/containers/policy.json: Restart crio.service (cluster policy /etc/containers/policy.json)\n  \
             /etc/containers/registries.conf: Special (default policy)\n  \
             SSH keys: None (default policy)\nno reboot needed\n"
        ),
        "{stdout}"
    );
}
