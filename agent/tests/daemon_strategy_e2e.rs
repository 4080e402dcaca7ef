//! Update strategies end to end (see `daemon_env`): `mco-agent start` against the companion's
//! config server, which also serves FleetLock (a state file) over the same TLS listener, as
//! `mco-companion serve` does by default. Another node is played by the agent's own FleetLock
//! client.

mod common;
mod daemon_env;
mod os_env;

use std::time::Duration;

use daemon_env::{Node, done_in, machine_config, secs};
use mco_agent::strategy::fleet_lock::{FleetLockClient, LockAnswer};

const BASE_FILE: &str = "/etc/nmstate/openshift/base.yaml";

fn config(base: &str, kargs: &[&str]) -> String {
    machine_config("00-base", &[(BASE_FILE, base)], kargs)
}

const FLEET_LOCK: &[(&str, &str)] = &[
    ("MCO_AGENT_STRATEGY", "fleet_lock"),
    ("MCO_AGENT_FLEET_LOCK_RETRY", "200ms"),
];

/// Another node of the pool, speaking FleetLock to the same companion.
fn other_node(node: &Node, id: &str) -> FleetLockClient {
    FleetLockClient::new(&node.url, Some(&node.ca_file), None, false, id, "worker").unwrap()
}

/// The ids holding slots of group `worker`, from the companion's state file.
fn holders(node: &Node) -> Vec<String> {
    let text = std::fs::read_to_string(&node.fleet_lock_state).unwrap_or_default();
    if text.is_empty() {
        return Vec::new();
    }
    let state: serde_json::Value = serde_json::from_str(&text).unwrap();
    state["groups"]["worker"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

async fn wait_for(what: &str, node: &Node, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + secs(30);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            node.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_lock_a_reboot_waits_for_the_slot_holds_it_across_the_reboot_and_gives_it_back() {
    let mut node = Node::new(&[("00-base.yaml", &config("base: 1\n", &[]))]).await;
    let base_name = node.rendered_name();
    node.start_agent(FLEET_LOCK);
    node.wait_status("the first application", secs(30), done_in(&base_name))
        .await;
    // node-1 reboots first
    let node_1 = other_node(&node, "node-1");
    assert_eq!(node_1.pre_reboot().await.unwrap(), LockAnswer::Ok);

    node.write_manifest("00-base.yaml", &config("base: 1\n", &["mco.e2e=1"]));
    let new_name = node.rendered_name();
    let (status, _) = node
        .wait_status("the update waiting for the slot", secs(30), |s| {
            s.strategy.as_ref().is_some_and(|st| st.waiting.is_some())
        })
        .await;
    let st = status.strategy.unwrap();
    let waiting = st.waiting.unwrap();
    assert!(
        waiting.contains(&format!(
            "the update to {new_name} waits for a FleetLock reboot slot in group worker"
        )) && waiting.contains("held by other clients")
            && !waiting.contains("node-1")
            && waiting.contains("(failed_lock_semaphore_full)"),
        "{waiting}"
    );
    assert!(!st.lock_held);
    assert_eq!(status.pending_step, None, "nothing started");
    assert_eq!(node.logind.reboots(), 0);
    assert!(node.logs().contains("waits for a FleetLock reboot slot"));

    // node-1 is back: node-0 takes the slot and reboots
    assert_eq!(node_1.steady_state().await.unwrap(), LockAnswer::Ok);
    let (status, _) = node
        .wait_status("the reboot request", secs(30), |s| {
            s.pending_step.as_deref() == Some("RebootRequested")
        })
        .await;
    assert!(status.strategy.unwrap().lock_held);
    assert_eq!(holders(&node), ["node-0"]);
    node.wait_reboot_requested(secs(10)).await;
    assert!(matches!(
        node_1.pre_reboot().await.unwrap(),
        LockAnswer::Refused { kind: Some(k), .. } if k == "failed_lock_semaphore_full"
    ));

    // the reboot; the slot is still held until the boot is verified
    node.kill_agent().await;
    assert_eq!(holders(&node), ["node-0"]);
    node.reboot();
    node.start_agent(FLEET_LOCK);
    node.wait_status("Done after the reboot", secs(30), done_in(&new_name))
        .await;
    wait_for("the slot given back", &node, || holders(&node).is_empty()).await;
    assert_eq!(node_1.pre_reboot().await.unwrap(), LockAnswer::Ok);
    assert_eq!(node.logind.reboots(), 1);
    assert!(
        !node.status().unwrap().strategy.unwrap().lock_held,
        "status still says the slot is held"
    );
    node.stop().await;
}

/// The agent crashed after it took the slot and before it recorded its update (or its record
/// was committed and it died before it gave the slot back): the next start gives it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_lock_a_slot_left_by_a_crash_is_given_back_at_start() {
    let mut node = Node::new(&[("00-base.yaml", &config("base: 1\n", &[]))]).await;
    let base_name = node.rendered_name();
    let as_node_0 = other_node(&node, "node-0");
    assert_eq!(as_node_0.pre_reboot().await.unwrap(), LockAnswer::Ok);
    assert_eq!(holders(&node), ["node-0"]);
    node.start_agent(FLEET_LOCK);
    node.wait_status("Done", secs(30), done_in(&base_name))
        .await;
    wait_for("the slot given back", &node, || holders(&node).is_empty()).await;
    assert!(node.logs().contains("FleetLock reboot slot released"));
    node.stop().await;
}

/// `periodic` with a window that is not open now: a reboot update waits and says until when;
/// a files-only update runs anyway with --rebootless-outside-windows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_a_reboot_waits_for_the_window_and_rebootless_updates_run() {
    let mut node = Node::new(&[("00-base.yaml", &config("base: 1\n", &[]))]).await;
    let base_name = node.rendered_name();
    // a one-minute window three days from now: closed for the whole test
    let day = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .weekday()
        .wrapping_add(3);
    let window = format!("{} 12:00 1m", &format!("{day:?}")[..3]);
    let periodic = [
        ("MCO_AGENT_STRATEGY", "periodic"),
        ("MCO_AGENT_REBOOTLESS_OUTSIDE_WINDOWS", "true"),
        ("MCO_AGENT_TIME_ZONE", "Europe/Berlin"),
    ];
    // (no environment variable for a repeatable option: a configuration fragment)
    let config_root = node.dir.path().join("config-root");
    let fragments = config_root.join("etc/mco-agent/config.d");
    std::fs::create_dir_all(&fragments).unwrap();
    std::fs::write(
        fragments.join("50-window.toml"),
        format!("window = [\"{window}\"]\n"),
    )
    .unwrap();
    let root = config_root.display().to_string();
    let mut env = periodic.to_vec();
    env.push(("MCO_AGENT_CONFIG_ROOT", &root));
    node.start_agent(&env);
    node.wait_status("the first application", secs(30), done_in(&base_name))
        .await;

    node.write_manifest("00-base.yaml", &config("base: 2\n", &[]));
    let files_only = node.rendered_name();
    node.wait_status("the files-only update", secs(30), done_in(&files_only))
        .await;

    node.write_manifest("00-base.yaml", &config("base: 2\n", &["mco.e2e=1"]));
    let reboot = node.rendered_name();
    let (status, _) = node
        .wait_status("the update waiting for the window", secs(30), |s| {
            s.strategy.as_ref().is_some_and(|st| st.waiting.is_some())
        })
        .await;
    let st = status.strategy.unwrap();
    let waiting = st.waiting.unwrap();
    assert!(
        waiting.starts_with(&format!(
            "the update to {reboot} waits for a maintenance window ({window} (Europe/Berlin)): the next opens "
        )),
        "{waiting}"
    );
    assert!(
        st.window
            .as_deref()
            .is_some_and(|w| w.starts_with("next window ")),
        "{:?}",
        st.window
    );
    assert_eq!(status.current.as_deref(), Some(files_only.as_str()));
    assert_eq!(status.pending_step, None);
    assert_eq!(node.logind.reboots(), 0);
    node.stop().await;
}
