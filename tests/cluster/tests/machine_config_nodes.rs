//! `kubectl get machineconfignodes` follows a node through an update: a config that drains and
//! reboots every node is rolled out, then each node's MachineConfigNode says Updated in it,
//! every step of the update back to False naming what it was during the update (as the MCO
//! leaves them), and `kubectl get machineconfignodes` (`-o wide`) prints it so; the companion's
//! journal followed each node through it, from the MachineConfigNodes.

use mco_cluster_tests::mcn::{WIDE_CONDITION_COLUMNS, condition_status};
use mco_cluster_tests::{Cluster, Spec, binaries, secs};
use serde_json::Value;

const REBOOT_FILE: &str = "/etc/mco-e2e/reboot.conf";

fn message<'a>(mcn: &'a Value, kind: &str) -> &'a str {
    mcn["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_config_nodes_follow_a_rollout_with_a_drain_and_a_reboot() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(binaries!(), Spec::default()).await?;
    let next = cluster
        .apply_files_config("50-e2e-reboot", &[(REBOOT_FILE, "reboot: 1\n")])
        .await?;
    cluster.wait_pool_done_rebooting(&next, secs(120)).await?;
    for node in cluster.node_names() {
        let mcn = cluster
            .wait_machine_config_node_updated(&node, &next, secs(30))
            .await?;
        anyhow::ensure!(mcn["spec"]["pool"]["name"] == "worker", "{mcn:#}");
        anyhow::ensure!(
            mcn["spec"]["configVersion"]["desired"] == next.as_str(),
            "{mcn:#}"
        );
        anyhow::ensure!(
            mcn["status"]["configVersion"]["desired"] == next.as_str(),
            "{mcn:#}"
        );
        let owner = &mcn["metadata"]["ownerReferences"][0];
        anyhow::ensure!(
            owner["kind"] == "Node" && owner["name"] == node.as_str(),
            "{mcn:#}"
        );
        anyhow::ensure!(message(&mcn, "Updated") == format!("Node {node} Updated"));
        // Every step of the update took place, and is False again now that it is over.
        let during = |m: &str| format!("Action during update to {next}: {m}");
        for (kind, what) in [
            (
                "UpdatePrepared",
                "Update Compatible. Post Cfg Actions: [] Drain Required: true",
            ),
            (
                "UpdateExecuted",
                "Updated the Files and OS on disk as a part of the in progress phase",
            ),
            (
                "Cordoned",
                "Cordoned node. The node is reporting Unschedulable = true",
            ),
            ("RebootedNode", "Node has rebooted"),
            (
                "UpdateComplete",
                "Uncordoned Node as part of completing upgrade phase",
            ),
            (
                "Uncordoned",
                "UnCordoned node. The node is reporting Unschedulable = false",
            ),
        ] {
            anyhow::ensure!(
                condition_status(&mcn, kind) == Some("False")
                    && message(&mcn, kind) == during(what),
                "{node} {kind}: {:?} {:?}\n{mcn:#}",
                condition_status(&mcn, kind),
                message(&mcn, kind)
            );
        }
        anyhow::ensure!(condition_status(&mcn, "NodeDegraded") == Some("False"));
    }

    // the controller's journal, node by node (companion/src/cluster/progress.rs): the
    // controller logs a node's arrival when its watch sees it, which may come after the
    // MachineConfigNodes read above
    let arrivals: Vec<String> = cluster
        .node_names()
        .iter()
        .map(|node| format!("node {node} (pool worker) updated to {next}"))
        .collect();
    let deadline = std::time::Instant::now() + secs(30);
    let journal = loop {
        let journal = cluster.companion.logs();
        if arrivals.iter().all(|a| journal.contains(a.as_str()))
            || std::time::Instant::now() >= deadline
        {
            break journal;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    for node in cluster.node_names() {
        let steps = format!("node {node} (pool worker) updating to {next}: ");
        for step in ["UpdatePrepared True", "Drained", "RebootedNode"] {
            anyhow::ensure!(
                journal.contains(&format!("{steps}{step}")),
                "the companion's journal lacks {steps}{step}:\n{journal}"
            );
        }
        let arrived = format!("node {node} (pool worker) updated to {next}");
        anyhow::ensure!(journal.contains(&arrived), "no {arrived:?}:\n{journal}");
    }

    let table = cluster.kubectl(&["get", "machineconfignodes"])?;
    eprintln!("{table}");
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    anyhow::ensure!(
        lines[0]
            == [
                "NAME",
                "POOLNAME",
                "DESIREDCONFIG",
                "CURRENTCONFIG",
                "UPDATED",
                "AGE"
            ],
        "{table}"
    );
    let nodes = cluster.node_names();
    anyhow::ensure!(lines.len() == nodes.len() + 1, "{table}");
    for (row, node) in lines[1..].iter().zip(&nodes) {
        anyhow::ensure!(
            row[..5] == [node.as_str(), "worker", &next, &next, "True"],
            "{table}"
        );
    }
    let wide = cluster.kubectl(&["get", "machineconfignodes", "-o", "wide"])?;
    eprintln!("{wide}");
    let lines: Vec<Vec<&str>> = wide
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    anyhow::ensure!(lines[0][6..] == WIDE_CONDITION_COLUMNS, "{wide}");
    for row in &lines[1..] {
        anyhow::ensure!(
            row[4] == "True" && row[6..].iter().all(|c| *c == "False"),
            "{wide}"
        );
    }
    cluster.finish().await
}
