//! The administrator's hooks through the real binary: a real Ansible playbook (`ansible-core`,
//! installed by `tests/setup.sh` into `target/ansible`) changing a node's root and idempotent
//! on the next update, `diff` listing hooks and checking playbooks (`--check`), the hook
//! timeout, and an agent killed while a hook runs (the hook kills it), which does not run the
//! hook twice when it starts again.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{agent, seed_root, text};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::json;

const HOOKS: &str = "/etc/mco-agent/hooks.d";

/// `ansible-playbook` from `tests/setup.sh` (or `$MCO_TEST_ANSIBLE_PLAYBOOK`). Missing, the
/// test fails saying so: it is never skipped.
fn ansible_playbook() -> PathBuf {
    let path = std::env::var_os("MCO_TEST_ANSIBLE_PLAYBOOK")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ansible/bin/ansible-playbook")
        });
    assert!(
        path.exists(),
        "{} is missing: these tests run the real ansible-core; tests/setup.sh installs it (python3 -m venv target/ansible && target/ansible/bin/pip install ansible-core)",
        path.display()
    );
    path
}

/// A MachineConfig named `name` with these files (path, contents, mode), written beside the
/// root; returns its path.
fn config(dir: &Path, name: &str, files: &[(&str, &str, u32)]) -> String {
    let files: Vec<_> = files
        .iter()
        .map(|(path, contents, mode)| {
            json!({
                "path": path, "mode": mode, "overwrite": true,
                "contents": {"source": format!("data:,{}", utf8_percent_encode(contents, NON_ALPHANUMERIC))},
            })
        })
        .collect();
    let mc = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": files}}},
    });
    let path = dir.join(format!("{name}.json"));
    fs::write(&path, mc.to_string()).unwrap();
    path.display().to_string()
}

/// A temp dir with a seeded root at `root/`.
fn node() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    seed_root(&root);
    (dir, root)
}

/// `once-from` on `root` with its hooks run on this machine (`--alternate-root-hooks host`:
/// these tests play a node whose root is mounted elsewhere, and use the test's Ansible).
fn once_from(root: &Path, config: &str, extra: &[&str]) -> Output {
    once_from_with(
        root,
        config,
        &[&["--alternate-root-hooks", "host"], extra].concat(),
    )
}

fn once_from_with(root: &Path, config: &str, extra: &[&str]) -> Output {
    agent()
        .args(["once-from", config, "--root"])
        .arg(root)
        .args(extra)
        .env("RUST_LOG", "info")
        .output()
        .unwrap()
}

/// A playbook that writes into the node's root: a file and a line in another.
const SITE_PLAYBOOK: &str = r#"- hosts: localhost
  gather_facts: false
  vars:
    site: lab-1
  tasks:
    - name: site banner
      ansible.builtin.copy:
        dest: "{{ mco_agent_root }}/etc/site-banner"
        content: "site {{ site }}\n"
        mode: "0644"
    - name: role line
      ansible.builtin.lineinfile:
        path: "{{ mco_agent_root }}/etc/site.conf"
        line: "role=worker"
        create: true
        mode: "0644"
"#;

/// A file whose change needs nothing under the default policies.
const PLAIN: &str = "/etc/nmstate/openshift/site.yml";

#[test]
fn a_real_playbook_changes_the_node_then_is_idempotent_on_the_next_update() {
    let playbook = ansible_playbook();
    let playbook = playbook.to_str().unwrap();
    let (dir, root) = node();
    let hook = format!("{HOOKS}/post-apply/10-site.yml");
    let v1 = config(
        dir.path(),
        "rendered-1",
        &[(&hook, SITE_PLAYBOOK, 0o644), (PLAIN, "v: 1\n", 0o644)],
    );
    let out = once_from(&root, &v1, &["--ansible-playbook", playbook]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(
        fs::read_to_string(root.join("etc/site-banner")).unwrap(),
        "site lab-1\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("etc/site.conf")).unwrap(),
        "role=worker\n"
    );
    assert!(
        stderr.contains("ok=2") && stderr.contains("changed=2"),
        "{stderr}"
    );
    // The next update (another file changes, the playbook does not) runs it again: nothing
    // left to change.
    let v2 = config(
        dir.path(),
        "rendered-2",
        &[(&hook, SITE_PLAYBOOK, 0o644), (PLAIN, "v: 2\n", 0o644)],
    );
    let out = once_from(&root, &v2, &["--ansible-playbook", playbook]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("ok=2") && stderr.contains("changed=0"),
        "{stderr}"
    );
    assert!(
        fs::read_to_string(root.join("etc/machine-config-daemon/currentconfig"))
            .unwrap()
            .contains("rendered-2")
    );
}

#[test]
fn diff_lists_the_hooks_and_checks_playbooks_without_changing_anything() {
    let playbook = ansible_playbook();
    let playbook = playbook.to_str().unwrap();
    let (dir, root) = node();
    let gate = format!("{HOOKS}/pre-apply/10-gate");
    let site = format!("{HOOKS}/post-apply/10-site.yml");
    let bad = format!("{HOOKS}/post-apply/20-bad.yaml");
    let old = config(dir.path(), "rendered-1", &[(&gate, "#!/bin/sh\n", 0o755)]);
    let new = config(
        dir.path(),
        "rendered-2",
        &[(&gate, "#!/bin/sh\n", 0o755), (&site, SITE_PLAYBOOK, 0o644)],
    );
    let out = agent().args(["diff", &old, &new]).output().unwrap();
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("reboot: no\n"), "{stdout}");
    assert!(
        stdout.ends_with(&format!(
            "hook pre-apply: {gate} (executable, old config)\nhook post-apply: {site} (playbook, new config)\n"
        )),
        "{stdout}"
    );
    let root_arg = root.to_str().unwrap();
    let check = [
        "--check-playbooks",
        "--root",
        root_arg,
        "--ansible-playbook",
        playbook,
    ];
    let out = agent()
        .args(["diff", &old, &new])
        .args(check)
        .output()
        .unwrap();
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!(
            "hook post-apply: {site} (playbook, new config): check ok\n"
        )),
        "{stdout}"
    );
    assert!(!root.join("etc/site-banner").exists(), "check mode wrote");
    // A playbook whose check fails: exit 1, with Ansible's failed task as the reason.
    let failing = "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.assert:\n        that: [\"mco_agent_phase == 'pre-reboot'\"]\n        fail_msg: wrong phase\n";
    let new = config(
        dir.path(),
        "rendered-3",
        &[(&site, SITE_PLAYBOOK, 0o644), (&bad, failing, 0o644)],
    );
    let out = agent()
        .args(["diff", &old, &new, "-o", "json"])
        .args(check)
        .output()
        .unwrap();
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let hooks = v["hooks"].as_array().unwrap();
    let names: Vec<&str> = hooks.iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["10-gate", "10-site.yml", "20-bad.yaml"], "{v}");
    // Executables are not run by the check.
    assert!(hooks[0].get("check").is_none(), "{v}");
    assert_eq!(hooks[1]["check"], "ok");
    let why = hooks[2]["check"].as_str().unwrap();
    assert!(
        why.starts_with(
            "post-apply hook 20-bad.yaml failed (exit status 2): fatal: [localhost]: FAILED!"
        ) && why.contains("wrong phase"),
        "{why}"
    );
}

#[test]
fn a_hook_past_its_timeout_is_killed_and_fails_the_update() {
    let (dir, root) = node();
    let hook = format!("{HOOKS}/post-apply/10-slow");
    let v1 = config(
        dir.path(),
        "rendered-1",
        &[(&hook, "#!/bin/sh\necho starting >&2\nsleep 60\n", 0o755)],
    );
    let started = std::time::Instant::now();
    let out = once_from(&root, &v1, &["--hook-timeout", "1s"]);
    let (stdout, stderr, code) = text(&out);
    assert!(started.elapsed().as_secs() < 30);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("post-apply hook 10-slow failed (timed out after 1s, killed): starting"),
        "{stderr}"
    );
    assert!(
        !root
            .join("etc/machine-config-daemon/currentconfig")
            .exists()
    );
}

#[test]
fn an_agent_killed_while_a_hook_runs_does_not_run_it_twice() {
    let (dir, root) = node();
    let hook = format!("{HOOKS}/post-apply/10-kills-the-agent");
    // The hook's parent is the agent: it is killed (SIGKILL) in the middle of the hook.
    let script = "#!/bin/sh\necho run >> \"$MCO_AGENT_ROOT/runs\"\nkill -9 $PPID\nsleep 1\n";
    let v1 = config(
        dir.path(),
        "rendered-1",
        &[(&hook, script, 0o755), (PLAIN, "v: 1\n", 0o644)],
    );
    let out = once_from(&root, &v1, &[]);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "{}", text(&out).1);
    assert!(
        root.join("etc/machine-config-daemon/mco-agent-update.json")
            .exists()
    );
    let out = once_from(&root, &v1, &[]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("hook was interrupted (the agent stopped while it ran)"),
        "{stderr}"
    );
    assert_eq!(fs::read_to_string(root.join("runs")).unwrap(), "run\n");
    assert!(
        fs::read_to_string(root.join("etc/machine-config-daemon/currentconfig"))
            .unwrap()
            .contains("rendered-1")
    );
    assert!(
        !root
            .join("etc/machine-config-daemon/mco-agent-update.json")
            .exists()
    );
}

/// A hook that tells where it ran: its root, its working directory, and a mark at an absolute
/// path that, run on this machine, would land outside the node's root.
fn where_am_i(mark: &Path) -> String {
    format!(
        "#!/bin/sh\necho \"root=$MCO_AGENT_ROOT pwd=$(pwd)\" > /hook-ran\necho ran > {}\n",
        mark.display()
    )
}

/// A config applied to an alternate root runs none of its hooks unless asked: on this machine
/// a hook would act on the machine applying the config, as root.
#[test]
fn an_alternate_root_runs_no_hook_unless_asked() {
    let (dir, root) = node();
    let mark = dir.path().join("outside-the-root");
    let hook = format!("{HOOKS}/post-apply/10-where");
    let v1 = config(
        dir.path(),
        "rendered-1",
        &[(&hook, &where_am_i(&mark), 0o755), (PLAIN, "v: 1\n", 0o644)],
    );
    let out = once_from_with(&root, &v1, &[]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(!mark.exists(), "the hook ran on this machine");
    assert!(!root.join("hook-ran").exists(), "the hook ran");
    assert!(
        stderr.contains("not running the post-apply hooks of the alternate root")
            && stderr.contains("10-where"),
        "{stderr}"
    );
    assert_eq!(
        fs::read_to_string(root.join(PLAIN.trim_start_matches('/'))).unwrap(),
        "v: 1\n",
        "the update itself is applied"
    );
}

/// Copies `program` and the libraries `ldd` names for it into `root`, at the same paths.
fn copy_with_libraries(program: &str, root: &Path) {
    let ldd = std::process::Command::new("ldd")
        .arg(program)
        .output()
        .expect("ldd (libc-bin) runs");
    let mut files = vec![PathBuf::from(program)];
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        if let Some(path) = line.split_whitespace().find(|w| w.starts_with('/')) {
            files.push(PathBuf::from(path));
        }
    }
    for file in files {
        let to = root.join(file.strip_prefix("/").unwrap());
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(&file, &to).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
}

/// `--alternate-root-hooks chroot`: each hook runs inside the root, with the root's own shell;
/// what it writes at an absolute path lands in the root.
#[test]
fn hooks_run_inside_the_root_when_asked() {
    let (dir, root) = node();
    copy_with_libraries("/bin/sh", &root);
    let mark = dir.path().join("outside-the-root");
    // The mark's directory exists inside the root too, so the hook can write there.
    fs::create_dir_all(root.join(dir.path().strip_prefix("/").unwrap())).unwrap();
    let hook = format!("{HOOKS}/post-apply/10-where");
    let v1 = config(
        dir.path(),
        "rendered-1",
        &[(&hook, &where_am_i(&mark), 0o755), (PLAIN, "v: 1\n", 0o644)],
    );
    let out = once_from_with(&root, &v1, &["--alternate-root-hooks", "chroot"]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(
        fs::read_to_string(root.join("hook-ran")).unwrap(),
        "root=/ pwd=/\n"
    );
    assert!(!mark.exists(), "the hook wrote on this machine");
    assert!(
        root.join(mark.strip_prefix("/").unwrap()).exists(),
        "the hook's absolute path is inside the root"
    );
}
