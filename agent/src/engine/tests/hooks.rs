//! The administrator's hooks in updates: each phase in order, the `pre-*` vetoes, failing
//! `post-*` hooks, and a hook interrupted by a restart of the agent.

use machine_config::mco::NodeState;

use super::*;
use crate::engine::Outcome;
use crate::engine::record::HookState;

const D: &str = "/etc/mco-agent/hooks.d";

/// A hook that logs `<phase> <name> <current> -> <desired>` to `/hooks.log` in the root,
/// keeps its standard input as `/stdin-<phase>.json`, then runs `tail`.
fn hook(tail: &str) -> String {
    format!(
        "#!/bin/sh\ncat > \"$MCO_AGENT_ROOT/stdin-$MCO_AGENT_PHASE.json\"\necho \"$MCO_AGENT_PHASE $MCO_AGENT_HOOK $MCO_AGENT_CURRENT_CONFIG -> $MCO_AGENT_DESIRED_CONFIG\" >> \"$MCO_AGENT_ROOT/hooks.log\"\n{tail}\n"
    )
}

/// `base` with these executable (0755) files added.
fn with_hooks(mut base: MachineConfig, hooks: &[(&str, String)]) -> MachineConfig {
    let mut value = serde_json::to_value(&base).unwrap();
    let files = value["spec"]["config"]["storage"]["files"]
        .as_array_mut()
        .unwrap();
    for (path, script) in hooks {
        files.push(json!({
            "path": path,
            "mode": 493,
            "overwrite": true,
            "contents": {"source": format!("data:,{}", utf8_percent_encode(script, NON_ALPHANUMERIC))},
        }));
    }
    base = MachineConfig::from_value(value).unwrap();
    base
}

fn log(node: &Node) -> Vec<String> {
    node.read("/hooks.log")
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A node in `rendered-a` (no hooks but `pre_apply`, a pre-apply hook of that config).
async fn node_in(pre_apply: &[(&str, String)]) -> Node {
    let node = Node::new();
    let a = with_hooks(
        mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE),
        pre_apply,
    );
    node.provision(&a).await;
    node
}

/// A reboot update (a kernel argument) delivering `hooks`.
fn reboot_update(hooks: &[(&str, String)]) -> MachineConfig {
    with_hooks(
        mc("rendered-b", &[(CRIO_POLICY, "{}\n")], &["nosmt"], IMAGE),
        hooks,
    )
}

/// A rebootless update (crio's policy: reload crio) delivering `hooks`.
fn rebootless_update(hooks: &[(&str, String)]) -> MachineConfig {
    with_hooks(
        mc("rendered-b", &[(CRIO_POLICY, "{\"b\": 1}\n")], &[], IMAGE),
        hooks,
    )
}

#[tokio::test]
async fn each_phase_runs_its_hooks_in_name_order_with_the_update() {
    let node = node_in(&[(&format!("{D}/pre-apply/10-gate"), hook(""))]).await;
    let b = reboot_update(&[
        (&format!("{D}/post-apply/20-second"), hook("")),
        (&format!("{D}/post-apply/10-first"), hook("")),
        (&format!("{D}/post-apply/3-third"), hook("")),
        (&format!("{D}/pre-reboot/10-ready"), hook("")),
        (&format!("{D}/post-boot/10-check"), hook("")),
    ]);
    let report = node.engine().update(&b, false).await;
    assert_eq!(report.outcome, Outcome::Rebooting, "{report:?}");
    let ab = "rendered-a -> rendered-b";
    assert_eq!(
        log(&node),
        [
            format!("pre-apply 10-gate {ab}"),
            format!("post-apply 10-first {ab}"),
            format!("post-apply 20-second {ab}"),
            format!("post-apply 3-third {ab}"),
            format!("pre-reboot 10-ready {ab}"),
        ]
    );
    let stdin: serde_json::Value =
        serde_json::from_str(&node.read("/stdin-pre-reboot.json").unwrap()).unwrap();
    assert_eq!(stdin["phase"], "pre-reboot");
    assert_eq!(stdin["current_config"], "rendered-a");
    assert_eq!(stdin["desired_config"], "rendered-b");
    assert_eq!(stdin["reboot"], true);
    assert_eq!(stdin["plan"]["kargs"], json!(["--append=nosmt"]));
    node.reboot(false);
    assert_eq!(node.engine().resume().await.unwrap().outcome, Outcome::Done);
    assert_eq!(
        log(&node).last().unwrap(),
        &format!("post-boot 10-check {ab}")
    );
    assert_eq!(log(&node).len(), 6);
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
}

#[tokio::test]
async fn delivering_or_changing_a_hook_alone_does_not_reboot() {
    let node = node_in(&[]).await;
    let b = with_hooks(
        mc("rendered-b", &[(CRIO_POLICY, "{}\n")], &[], IMAGE),
        &[(&format!("{D}/post-apply/10-site"), hook(""))],
    );
    let report = node.engine().update(&b, false).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    let plan = report.plan.unwrap();
    assert!(!plan.reboot && !plan.drain);
    assert_eq!(
        plan.explain(),
        ["/etc/mco-agent/hooks.d/post-apply/10-site: None (default policy /etc/mco-agent/hooks.d)"]
    );
    // The hook it delivered ran after the files were written.
    assert_eq!(log(&node), ["post-apply 10-site rendered-a -> rendered-b"]);
    assert!(node.rebooter.reasons().is_empty());
}

#[tokio::test]
async fn a_failing_pre_apply_hook_stops_the_update_before_anything_changes() {
    let veto = hook("echo 'change freeze until Monday' >&2; exit 1");
    let node = node_in(&[(&format!("{D}/pre-apply/50-freeze"), veto)]).await;
    let b = rebootless_update(&[]);
    let report = node.engine().update(&b, false).await;
    let reason = "update to rendered-b stopped: pre-apply hook 50-freeze failed (exit status 1): change freeze until Monday";
    assert_eq!(report.outcome, Outcome::Degraded(reason.to_string()));
    assert_eq!(node.read(CRIO_POLICY).as_deref(), Some("{}\n"));
    assert_eq!(node.recorded_step(), None);
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    assert_eq!(
        node.cluster.last_state(),
        Some((NodeState::Degraded, reason.to_string()))
    );
}

#[tokio::test]
async fn a_failing_pre_reboot_hook_rolls_the_update_back() {
    let node = node_in(&[]).await;
    let b = reboot_update(&[(
        &format!("{D}/pre-reboot/10-no"),
        hook("echo 'not during the batch run' >&2; exit 4"),
    )]);
    let report = node.engine().update(&b, false).await;
    let Outcome::Degraded(reason) = &report.outcome else {
        panic!("{report:?}")
    };
    assert_eq!(
        reason,
        "update to rendered-b stopped: pre-reboot hook 10-no failed (exit status 4): not during the batch run"
    );
    assert!(node.rebooter.reasons().is_empty());
    assert_eq!(node.recorded_step(), None);
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    // Rolled back: the hook (a file of the update) is gone again.
    assert!(node.read(&format!("{D}/pre-reboot/10-no")).is_none());
}

#[tokio::test]
async fn a_failing_post_apply_hook_degrades_until_a_retry_passes_and_runs_each_hook_once() {
    let node = node_in(&[]).await;
    let b = rebootless_update(&[
        (&format!("{D}/post-apply/10-ok"), hook("")),
        (
            &format!("{D}/post-apply/20-needs-flag"),
            hook("test -e \"$MCO_AGENT_ROOT/flag\" || { echo 'flag missing' >&2; exit 2; }"),
        ),
    ]);
    let report = node.engine().update(&b, false).await;
    let reason = "post-apply hook 20-needs-flag failed (exit status 2): flag missing";
    assert_eq!(report.outcome, Outcome::Degraded(reason.to_string()));
    // Applied, not committed: the update waits at its step.
    assert_eq!(node.read(CRIO_POLICY).as_deref(), Some("{\"b\": 1}\n"));
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    assert_eq!(node.recorded_step().as_deref(), Some("PostActions"));
    // A retry without the flag fails again; with it, the update completes.
    let again = node.engine().update(&b, false).await;
    assert_eq!(again.outcome, Outcome::Degraded(reason.to_string()));
    node.write("/flag", "");
    assert_eq!(node.engine().update(&b, false).await.outcome, Outcome::Done);
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
    let ab = "rendered-a -> rendered-b";
    assert_eq!(
        log(&node),
        [
            format!("post-apply 10-ok {ab}"),
            format!("post-apply 20-needs-flag {ab}"),
            format!("post-apply 20-needs-flag {ab}"),
            format!("post-apply 20-needs-flag {ab}"),
        ]
    );
}

#[tokio::test]
async fn a_failing_post_boot_hook_leaves_the_update_uncommitted_and_degraded() {
    let node = node_in(&[]).await;
    let b = reboot_update(&[(
        &format!("{D}/post-boot/10-health"),
        hook("test -e \"$MCO_AGENT_ROOT/flag\" || { echo 'app not healthy' >&2; exit 1; }"),
    )]);
    assert_eq!(
        node.engine().update(&b, false).await.outcome,
        Outcome::Rebooting
    );
    node.reboot(false);
    let report = node.engine().resume().await.unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Degraded(
            "post-boot hook 10-health failed (exit status 1): app not healthy".into()
        )
    );
    assert_eq!(node.recorded_step().as_deref(), Some("NotTaken"));
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    node.write("/flag", "");
    assert_eq!(node.engine().resume().await.unwrap().outcome, Outcome::Done);
    assert_eq!(node.current().as_deref(), Some("rendered-b"));
    assert_eq!(node.rebooter.reasons().len(), 1);
}

/// Marks `hook` of the recorded update as started, as a kill of the agent while it ran leaves
/// the record.
fn interrupted(node: &Node, phase: &str, hook: &str) {
    let root = Root::open(node.path()).unwrap();
    let mut rec = crate::engine::record::load(&root).unwrap().unwrap();
    rec.hooks.retain(|m| !(m.phase == phase && m.name == hook));
    rec.hooks.push(crate::engine::record::HookMark {
        phase: phase.into(),
        name: hook.into(),
        state: HookState::Started,
    });
    crate::engine::record::store(&root, &rec).unwrap();
}

#[tokio::test]
async fn a_post_hook_interrupted_by_a_restart_is_not_run_twice() {
    let node = node_in(&[]).await;
    let b = rebootless_update(&[
        (&format!("{D}/post-apply/10-once"), hook("")),
        (
            &format!("{D}/post-apply/20-fails-first"),
            hook("test -e \"$MCO_AGENT_ROOT/flag\" || exit 1"),
        ),
    ]);
    // The update waits at PostActions; then, as if the agent had been killed while
    // 20-fails-first ran, the record says it started.
    let report = node.engine().update(&b, false).await;
    assert!(matches!(report.outcome, Outcome::Degraded(_)), "{report:?}");
    interrupted(&node, "post-apply", "20-fails-first");
    let report = node.engine().resume().await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:?}");
    assert_eq!(
        log(&node),
        [
            "post-apply 10-once rendered-a -> rendered-b",
            "post-apply 20-fails-first rendered-a -> rendered-b",
        ]
    );
}

#[tokio::test]
async fn a_pre_reboot_hook_interrupted_by_a_restart_stops_the_update() {
    let node = node_in(&[]).await;
    let b = reboot_update(&[(&format!("{D}/pre-reboot/10-gate"), hook(""))]);
    // Without a rebooter the update waits at RebootRequested (no pre-reboot hook ran); then,
    // as if the agent had been killed while the hook ran, the record says it started.
    let no_reboot = Seams {
        rebooter: None,
        no_reboot: "test".into(),
        ..node.seams()
    };
    let report = node.engine_with(no_reboot).update(&b, false).await;
    assert_eq!(report.outcome, Outcome::NeedsReboot, "{report:?}");
    assert_eq!(node.recorded_step().as_deref(), Some("RebootRequested"));
    interrupted(&node, "pre-reboot", "10-gate");
    let report = node.engine().resume().await.unwrap();
    assert_eq!(
        report.outcome,
        Outcome::Degraded(
            "update to rendered-b stopped: pre-reboot hook 10-gate was interrupted (the agent stopped while it ran) and is not run twice".into()
        )
    );
    assert!(node.rebooter.reasons().is_empty());
    assert_eq!(node.recorded_step(), None);
    assert_eq!(node.current().as_deref(), Some("rendered-a"));
    assert!(!log(&node).iter().any(|l| l.starts_with("pre-reboot")));
}
