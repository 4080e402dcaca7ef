//! The agent's API cost per update, counted from outside: every request the API test server
//! served under the node's kubelet identity while one files-only rebootless update ran, by verb
//! and resource. The count is a constant of the update, the same whatever the number of files
//! it writes (docs/benchmarks.md "API requests per update"), and within the budget of 12
//! requests (watches apart: one on the Node and one on `MachineConfiguration/cluster`, opened at
//! start and kept).

mod common;
mod daemon_env;
mod os_env;

use std::collections::BTreeMap;
use std::time::Duration;

use daemon_env::requests::{settled, tally};
use daemon_env::{NODE, Node, machine_config, secs};

/// The budget: requests per files-only rebootless update, watches apart.
const BUDGET: usize = 12;

const POLICY: &str = "/etc/containers/policy.json";

/// A config of `files` files under `/etc/nmstate/openshift/` (no action: the default policy of
/// that directory is None), version `version` of each, and the crio policy.
fn config(version: u32, files: usize) -> String {
    let names: Vec<String> = (0..files)
        .map(|i| format!("/etc/nmstate/openshift/f{i}.yaml"))
        .collect();
    let contents = format!("version: {version}\n");
    let mut list: Vec<(&str, &str)> = names
        .iter()
        .map(|n| (n.as_str(), contents.as_str()))
        .collect();
    list.push((POLICY, "{}\n"));
    machine_config("00-base", &list, &[])
}

/// One files-only update to a config of `files` files: the agent's requests, by kind (and in
/// order, printed, for whoever reads a failure).
async fn update_cost(node: &Node, version: u32, files: usize) -> BTreeMap<String, usize> {
    node.write_manifest("00-base.yaml", &config(version, files));
    let name = node.rendered_name();
    node.wait_served(&name).await;
    let before = settled(node, Duration::from_millis(500)).await;
    node.set_desired(&name);
    node.wait_annotations("the update", secs(30), "Done", Some(&name))
        .await;
    settled(node, Duration::from_millis(500)).await;
    let requests = node.api().requests();
    let mine = &requests[before..];
    for r in mine
        .iter()
        .filter(|r| r.user == format!("system:node:{NODE}"))
    {
        eprintln!("  {} {} {}", r.method, r.path, r.query);
    }
    tally(mine)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_files_only_update_costs_a_constant_within_the_budget() {
    let mut node = Node::new(&[("00-base.yaml", &config(1, 1))])
        .await
        .with_cluster();
    let base = node.rendered_name();
    node.start_agent(&[]);
    node.set_desired(&base);
    node.wait_annotations("the first application", secs(30), "Done", Some(&base))
        .await;

    let small = update_cost(&node, 2, 1).await;
    let large = update_cost(&node, 3, 40).await;
    let total = |t: &BTreeMap<String, usize>| t.values().sum::<usize>();
    eprintln!("1 file: {} requests {small:?}", total(&small));
    eprintln!("40 files: {} requests {large:?}", total(&large));
    if total(&small) > BUDGET || small != large {
        eprintln!("{}", node.logs());
    }
    assert_eq!(small, large, "the cost grew with the number of files");
    assert!(
        total(&small) <= BUDGET,
        "{} requests per update, over the budget of {BUDGET}: {small:?}",
        total(&small)
    );
    node.stop().await;
}
