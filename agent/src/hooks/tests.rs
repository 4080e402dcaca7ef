use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

fn write(root: &Path, path: &str, text: &str, mode: u32) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn input(root: &Path, phase: Phase) -> HookInput {
    HookInput {
        phase,
        current_config: "rendered-worker-a".into(),
        desired_config: "rendered-worker-b".into(),
        root: root.to_path_buf(),
        reboot: false,
        plan: serde_json::json!({"reboot": false, "files": {"added": ["/etc/x"]}}),
    }
}

fn opts(timeout: Duration) -> HookOptions {
    HookOptions {
        timeout,
        ..HookOptions::default()
    }
}

#[test]
fn kinds_by_name_and_mode() {
    assert_eq!(kind_of("10-check", 0o755), Some(Kind::Executable));
    assert_eq!(kind_of("10-check", 0o644), None);
    assert_eq!(kind_of("20-site.yml", 0o644), Some(Kind::Playbook));
    assert_eq!(kind_of("20-site.yaml", 0o755), Some(Kind::Playbook));
    assert_eq!(kind_of(".10-check.mco-tmp-1-2", 0o755), None);
    assert_eq!(kind_of("10-check~", 0o755), None);
}

#[test]
fn hooks_are_found_in_name_order_and_others_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = "/etc/mco-agent/hooks.d/post-apply";
    write(dir.path(), &format!("{d}/20-b"), "#!/bin/sh\n", 0o755);
    write(
        dir.path(),
        &format!("{d}/10-a.yml"),
        "- hosts: all\n",
        0o644,
    );
    write(dir.path(), &format!("{d}/15-notes.txt"), "x", 0o644);
    write(dir.path(), &format!("{d}/.20-b.mco-tmp-9-1"), "x", 0o755);
    write(dir.path(), "/usr/local/bin/shared", "#!/bin/sh\n", 0o755);
    std::fs::create_dir_all(dir.path().join("etc/mco-agent/hooks.d/post-apply/30-dir")).unwrap();
    std::os::unix::fs::symlink(
        "/usr/local/bin/shared",
        dir.path().join("etc/mco-agent/hooks.d/post-apply/25-link"),
    )
    .unwrap();
    let root = Root::open(dir.path()).unwrap();
    let found = discover(&root, Phase::PostApply).unwrap();
    let names: Vec<(&str, Kind)> = found.iter().map(|h| (h.name.as_str(), h.kind)).collect();
    assert_eq!(
        names,
        [
            ("10-a.yml", Kind::Playbook),
            ("20-b", Kind::Executable),
            ("25-link", Kind::Executable)
        ]
    );
    assert_eq!(found[1].path, Path::new(d).join("20-b"));
    assert!(discover(&root, Phase::PreApply).unwrap().is_empty());
}

#[tokio::test]
async fn a_hook_gets_the_update_on_stdin_and_in_its_environment() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("seen");
    write(
        dir.path(),
        "/etc/mco-agent/hooks.d/pre-apply/10-record",
        &format!(
            "#!/bin/sh\ncat > {out}.json\nenv | grep ^MCO_AGENT_ | sort > {out}.env\necho to the journal\n",
            out = out.display()
        ),
        0o755,
    );
    let root = Root::open(dir.path()).unwrap();
    let hook = discover(&root, Phase::PreApply).unwrap().remove(0);
    let result = run(
        &root,
        &hook,
        &input(dir.path(), Phase::PreApply),
        &opts(Duration::from_secs(10)),
        false,
    )
    .await;
    assert!(result.success, "{result:?}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(json["phase"], "pre-apply");
    assert_eq!(json["current_config"], "rendered-worker-a");
    assert_eq!(json["desired_config"], "rendered-worker-b");
    assert_eq!(json["plan"]["files"]["added"][0], "/etc/x");
    let env = std::fs::read_to_string(out.with_extension("env")).unwrap();
    for line in [
        "MCO_AGENT_CURRENT_CONFIG=rendered-worker-a",
        "MCO_AGENT_DESIRED_CONFIG=rendered-worker-b",
        "MCO_AGENT_HOOK=10-record",
        "MCO_AGENT_PHASE=pre-apply",
        "MCO_AGENT_REBOOT=false",
        &format!("MCO_AGENT_ROOT={}", dir.path().display()),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} not in\n{env}");
    }
}

#[tokio::test]
async fn a_failing_hook_says_why_with_the_last_lines_of_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(1000);
    write(
        dir.path(),
        "/etc/mco-agent/hooks.d/pre-reboot/50-veto",
        &format!(
            "#!/bin/sh\necho ignored on stdout\nfor i in 1 2 3 4 5 6 7; do echo \"line $i\" >&2; done\necho {long} >&2\nexit 3\n"
        ),
        0o755,
    );
    let root = Root::open(dir.path()).unwrap();
    let hook = discover(&root, Phase::PreReboot).unwrap().remove(0);
    let result = run(
        &root,
        &hook,
        &input(dir.path(), Phase::PreReboot),
        &opts(Duration::from_secs(10)),
        false,
    )
    .await;
    assert!(!result.success);
    let msg = result.message(&hook);
    let want = format!(
        "pre-reboot hook 50-veto failed (exit status 3): line 4 | line 5 | line 6 | line 7 | {}…",
        "x".repeat(300)
    );
    assert_eq!(msg, want);
}

#[tokio::test]
async fn a_hook_that_outlives_its_timeout_is_killed_with_what_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    write(
        dir.path(),
        "/etc/mco-agent/hooks.d/post-boot/10-hang",
        &format!(
            "#!/bin/sh\necho waiting >&2\nsleep 300 &\necho $! > {}\nwait\n",
            pidfile.display()
        ),
        0o755,
    );
    let root = Root::open(dir.path()).unwrap();
    let hook = discover(&root, Phase::PostBoot).unwrap().remove(0);
    let started = Instant::now();
    let result = run(
        &root,
        &hook,
        &input(dir.path(), Phase::PostBoot),
        &opts(Duration::from_millis(500)),
        false,
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        result.message(&hook),
        "post-boot hook 10-hang failed (timed out after 500ms, killed): waiting"
    );
    let child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The background `sleep` went with the group (a zombie until reaped by init at most).
    let gone = (0..50).any(|_| {
        let state = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let done = state.is_empty() || state.split_whitespace().nth(2) == Some("Z");
        if !done {
            std::thread::sleep(Duration::from_millis(20));
        }
        done
    });
    assert!(gone, "the hook's child {child} survived the timeout");
}

#[tokio::test]
async fn a_missing_ansible_playbook_is_a_failure_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "/etc/mco-agent/hooks.d/post-apply/10-site.yml",
        "- hosts: all\n  tasks: []\n",
        0o644,
    );
    let root = Root::open(dir.path()).unwrap();
    let hook = discover(&root, Phase::PostApply).unwrap().remove(0);
    let opts = HookOptions {
        timeout: Duration::from_secs(5),
        ansible_playbook: "/nonexistent/ansible-playbook".into(),
        ..HookOptions::default()
    };
    let result = run(
        &root,
        &hook,
        &input(dir.path(), Phase::PostApply),
        &opts,
        false,
    )
    .await;
    assert!(!result.success);
    assert!(
        result.message(&hook).starts_with(
            "post-apply hook 10-site.yml failed (could not be started: /nonexistent/ansible-playbook: "
        ),
        "{}",
        result.message(&hook)
    );
}
