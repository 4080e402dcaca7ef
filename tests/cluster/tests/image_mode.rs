//! An image-mode rollout across three nodes, each with its own OS (a private bus, the rpm-ostree
//! stand-in over its own ostree sysroot): the worker pool gets a MachineOSConfig and a succeeded
//! MachineOSBuild naming a prebuilt image by digest; the companion gives the nodes
//! `desiredImage` one at a time (`maxUnavailable: 1`); each agent rebases to the image through
//! its stand-in (pulling with the kubelet's pull secret, which the registry requires), waits for
//! the (simulated) reboot, and reports `currentImage` once the boot into the image is verified.
//! Every node ends Done in the image without a second reboot, the sampler never saw more than
//! one node unavailable, each MachineConfigNode (the cluster has the `ImageModeStatusReporting`
//! gate) holds the image in `configImage` and the pull, the OS applied and the reboot as steps
//! of the update, and `kubectl get machineconfignodes` (`-o wide`) shows it.

use std::time::Instant;

use machine_config::feature_gates::IMAGE_MODE_STATUS_REPORTING;
use machine_config::mco::paths::CURRENT_IMAGE as CURRENT_IMAGE_FILE;
use mco_cluster_tests::mcn::{WIDE_CONDITION_COLUMNS, condition_status};
use mco_cluster_tests::os::KUBELET_PULL_SECRET;
use mco_cluster_tests::{Cluster, Spec, binaries, secs};

const IMAGE: &str = "registry.e2e.example/ocl/worker@sha256:\
                     7e57000000000000000000000000000000000000000000000000000000000001";

fn table(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// The cells of kubectl's table by the header's column offsets (a cell may be empty).
fn columns(text: &str) -> Vec<Vec<String>> {
    let header = text.lines().next().unwrap_or_default();
    let mut starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    starts.push(usize::MAX);
    text.lines()
        .map(|line| {
            starts
                .windows(2)
                .map(|w| {
                    let end = w[1].min(line.len());
                    line.get(w[0].min(end)..end)
                        .unwrap_or_default()
                        .trim()
                        .to_string()
                })
                .collect()
        })
        .collect()
}

fn message<'a>(mcn: &'a serde_json::Value, kind: &str) -> &'a str {
    mcn["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_mode_rollout_rebases_every_node_within_max_unavailable() -> anyhow::Result<()> {
    let started = Instant::now();
    // A cluster with the MCO's ImageModeStatusReporting feature gate: the MachineConfigNodes
    // carry the images and the pull.
    let spec = Spec {
        os: true,
        feature_gates: vec![IMAGE_MODE_STATUS_REPORTING.into()],
        ..Spec::default()
    };
    let mut cluster = Cluster::start(binaries!(), spec).await?;
    let provisioned = started.elapsed();
    let commits = cluster.prepare_image(IMAGE, "2.0")?;
    let boots_before = cluster.boots();

    let rendered = cluster.set_pool_image(IMAGE).await?;
    let took = cluster
        .wait_pool_in_image(&rendered, IMAGE, secs(120))
        .await?;
    eprintln!("image rollout over 3 nodes: {took:?} (cluster up in {provisioned:?})");
    let (_, max_seen) = cluster.check_availability()?;
    anyhow::ensure!(
        max_seen == 1,
        "a rollout that reboots each node must have made one unavailable at a time, saw {max_seen}"
    );

    for (node, commit) in &commits {
        let n = cluster.node(node);
        // One reboot, into the image's commit.
        anyhow::ensure!(
            n.boots() == boots_before[node] + 1,
            "{node}: {} boots",
            n.boots()
        );
        let deployments = n.os.as_ref().expect("an OS").deployments()?;
        anyhow::ensure!(
            &deployments[0].checksum == commit,
            "{node}: {deployments:?}"
        );
        let origin = deployments[0].origin.clone().unwrap_or_default();
        anyhow::ensure!(
            origin.contains(&format!(
                "container-image-reference=ostree-unverified-registry:{IMAGE}"
            )),
            "{node}: {origin}"
        );
        anyhow::ensure!(
            n.read(CURRENT_IMAGE_FILE).as_deref().map(str::trim) == Some(IMAGE),
            "{node}: currentimage {:?}",
            n.read(CURRENT_IMAGE_FILE)
        );
        // The pull used the kubelet's secret, through rpm-ostree's auth file.
        let auth = std::fs::read_link(n.path("/run/ostree/auth.json"))?;
        anyhow::ensure!(
            auth == std::path::Path::new("/").join(KUBELET_PULL_SECRET),
            "{node}: {auth:?}"
        );

        let mcn = cluster
            .wait_machine_config_node_updated(node, &rendered, secs(30))
            .await?;
        anyhow::ensure!(
            condition_status(&mcn, "NodeDegraded") == Some("False"),
            "{mcn:#}"
        );
        anyhow::ensure!(
            mcn["spec"]["configImage"]["desiredImage"] == IMAGE
                && mcn["status"]["configImage"]["currentImage"] == IMAGE
                && mcn["status"]["configImage"]["desiredImage"] == IMAGE,
            "{mcn:#}"
        );
        // Every step took place and is False again, saying what it was ("Action during update
        // to" the config: the status already held the image when Updated was written).
        for (kind, what) in [
            (
                "ImagePulledFromRegistry",
                format!("Successfully pulled OS image {IMAGE} from registry"),
            ),
            ("AppliedOSImage", "Applied new OS config to node.".into()),
            ("RebootedNode", "Node has rebooted".into()),
            (
                "UpdateComplete",
                "Uncordoned Node as part of completing upgrade phase".into(),
            ),
        ] {
            let m = message(&mcn, kind);
            anyhow::ensure!(
                condition_status(&mcn, kind) == Some("False")
                    && m.starts_with("Action during update to ")
                    && m.ends_with(&format!(": {what}")),
                "{node} {kind}: {m:?}\n{mcn:#}"
            );
        }
        // The gate's conditions replace AppliedFilesAndOS.
        anyhow::ensure!(
            condition_status(&mcn, "AppliedFilesAndOS").is_none(),
            "{mcn:#}"
        );
    }

    let nodes = cluster.node_names();
    let plain = cluster.kubectl(&["get", "machineconfignodes"])?;
    eprintln!("{plain}");
    let rows = table(&plain);
    anyhow::ensure!(rows.len() == nodes.len() + 1, "{plain}");
    for (row, node) in rows[1..].iter().zip(&nodes) {
        anyhow::ensure!(
            row[..5] == [node.as_str(), "worker", &rendered, &rendered, "True"],
            "{plain}"
        );
    }
    let wide = cluster.kubectl(&["get", "machineconfignodes", "-o", "wide"])?;
    eprintln!("{wide}");
    let rows = columns(&wide);
    anyhow::ensure!(rows[0][6..] == WIDE_CONDITION_COLUMNS, "{wide}");
    // With the gate there is no AppliedFilesAndOS: its column is empty.
    for row in &rows[1..] {
        anyhow::ensure!(row[4] == "True" && row[11].is_empty(), "{wide}");
        for (i, cell) in row.iter().enumerate().skip(6) {
            anyhow::ensure!(i == 11 || cell == "False", "{wide}");
        }
    }
    cluster.finish().await?;
    eprintln!("scenario: {:?}", started.elapsed());
    Ok(())
}

/// The rpm-ostree transactions of `method` the node's stand-in has started so far.
fn transactions(log: &str, method: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("new transaction") && l.contains(method))
        .count()
}

/// The MCD's `applyLayeredOSChanges` layers nothing on a built image: a pool with an extension
/// and the realtime kernel (layered on each node's deployment by `UpdateDeployment`) that moves
/// to a built image only rebases; no package is installed and no override made on top of the
/// image, which carries them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_extensions_and_a_realtime_kernel_moves_to_a_built_image_without_layering()
-> anyhow::Result<()> {
    let spec = Spec {
        nodes: 1,
        os: true,
        ..Spec::default()
    };
    let mut cluster = Cluster::start(binaries!(), spec).await?;
    let before = cluster.pool().await?.spec.configuration.name;
    cluster
        .apply_machine_config(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "50-worker-rt-usbguard",
                "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"kernelType": "realtime", "extensions": ["usbguard"]},
        }))
        .await?;
    let layered = cluster.wait_rendered(&before, secs(30)).await?;
    cluster
        .wait_pool_done_rebooting(&layered, secs(120))
        .await?;
    let node = cluster.node_names()[0].clone();
    let os = |c: &mut Cluster| -> anyhow::Result<(String, String)> {
        let os = c.node(&node).os.as_ref().expect("an OS");
        let origin = os.deployments()?[0].origin.clone().unwrap_or_default();
        Ok((os.logs(), origin))
    };
    // The realtime kernel and the extension are layered on the node's deployment.
    let (log, origin) = os(&mut cluster)?;
    let layerings = transactions(&log, "UpdateDeployment");
    anyhow::ensure!(
        layerings == 2 && origin.contains("usbguard") && origin.contains("kernel-rt-core"),
        "expected the kernel switch and the extension as two transactions: {layerings}\n{origin}"
    );

    let commits = cluster.prepare_image(IMAGE, "2.0")?;
    let rendered = cluster.set_pool_image(IMAGE).await?;
    anyhow::ensure!(rendered == layered, "{rendered} != {layered}");
    cluster
        .wait_pool_in_image(&rendered, IMAGE, secs(120))
        .await?;
    let (log, _) = os(&mut cluster)?;
    let deployments = cluster
        .node(&node)
        .os
        .as_ref()
        .expect("an OS")
        .deployments()?;
    anyhow::ensure!(
        deployments[0].checksum == commits[0].1,
        "the node boots the image's commit: {deployments:?}"
    );
    anyhow::ensure!(
        transactions(&log, "Rebase") == 1,
        "one rebase to the image:\n{log}"
    );
    anyhow::ensure!(
        transactions(&log, "UpdateDeployment") == layerings,
        "no package installed or overridden on top of the built image:\n{log}"
    );
    cluster.finish().await?;
    Ok(())
}
