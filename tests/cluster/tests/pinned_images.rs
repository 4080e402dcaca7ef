//! A PinnedImageSet reaches every node of the pool: the companion lists it in the pool's
//! `spec.pinnedImageSets` (its labels match the pool's `machineConfigSelector`), each agent
//! (`--cri-socket`) pulls its image through its own node's REAL containerd (one per node, as
//! each node has its runtime) from a REAL registry (`docker-registry` on loopback, TLS and
//! htpasswd; the credentials from the node's `/var/lib/kubelet/config.json`; the manifest read
//! by the real `skopeo`), pins it in CRI-O's drop-in on its root, and says so in its
//! MachineConfigNode; all under the shipped RBAC. Standing in: the API server (the test
//! server).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use machine_config::PinnedImageSet;
use machine_config::mco::pinned_images::{CRIO_DROP_IN, KUBELET_AUTH_FILE};
use mco_agent::host::cri::{CriClient, ImageService};
use mco_cluster_tests::mcn::condition_status;
use mco_cluster_tests::{Cluster, NODE_NAME, Spec, binaries, secs};
use mco_test_support::containerd::{Options, TestContainerd};
use mco_test_support::registry::{PASSWORD, TestImage, TestRegistry, USER};
use serde_json::{Value, json};

/// Waits until `node`'s MachineConfigNode says its pinned image sets are complete in
/// generation 1 of set `set`.
async fn wait_pinned(cluster: &Cluster, node: &str, set: &str, timeout: Duration) -> Result<Value> {
    let started = Instant::now();
    loop {
        let mcn = cluster.machine_config_node(node).await?;
        if let Some(mcn) = &mcn {
            let entry = &mcn["status"]["pinnedImageSets"][0];
            if condition_status(mcn, "PinnedImageSetsProgressing") == Some("False")
                && entry["name"] == set
                && entry["currentGeneration"] == 1
            {
                return Ok(mcn.clone());
            }
        }
        if started.elapsed() > timeout {
            bail!("{node}'s pinned image sets are not complete after {timeout:?}: {mcn:#?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_image_set_is_pulled_through_containerd_on_every_node() -> Result<()> {
    let registry = TestRegistry::start()?;
    let image = registry.push(
        &TestImage::with_file("pinned", 64 * 1024, b'p'),
        "e2e/pinned",
        "v1",
    )?;
    // Each node's runtime, its socket at `sockets/<node>.sock` (a link to the socket).
    let spec = Spec::default();
    let sockets = tempfile::tempdir()?;
    let mut runtimes = Vec::new();
    for i in 0..spec.nodes {
        let node = format!("worker-{i}");
        let containerd = TestContainerd::start(&Options {
            registries: vec![(registry.host.clone(), registry.ca_pem().to_string())],
            disk_bytes: None,
        })?;
        std::os::unix::fs::symlink(
            containerd.socket(),
            sockets.path().join(format!("{node}.sock")),
        )?;
        runtimes.push((node, containerd));
    }
    let spec = Spec {
        agent_args: vec![
            "--cri-socket".into(),
            sockets
                .path()
                .join(format!("{NODE_NAME}.sock"))
                .display()
                .to_string(),
        ],
        ..spec
    };
    let mut cluster = Cluster::start(binaries!(), spec).await?;
    let mut names = cluster.node_names();
    names.sort();
    ensure!(
        names == runtimes.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        "the cluster's nodes are {names:?}, the runtimes were started for worker-0.."
    );
    let logs = || {
        runtimes
            .iter()
            .map(|(n, c)| format!("--- containerd of {n} ---\n{}", c.log()))
            .collect::<String>()
    };

    // What a node has before its pool pins anything: the kubelet's pull secret, the registry's
    // CA, and its allocatable storage reported by its kubelet.
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    for name in cluster.node_names() {
        let root = cluster.node(&name).root.clone();
        registry.write_ca_to(&root.join("etc/docker/certs.d"))?;
        let secret = root.join(KUBELET_AUTH_FILE.trim_start_matches('/'));
        std::fs::create_dir_all(secret.parent().context("kubelet dir")?)?;
        std::fs::write(&secret, registry.pull_secret(USER, PASSWORD))?;
        let status = json!({"status": {
            "allocatable": {"ephemeral-storage": "100Gi"},
            "conditions": [{"type": "Ready", "status": "True"},
                           {"type": "DiskPressure", "status": "False"}],
        }});
        nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
    }

    let set: PinnedImageSet = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "PinnedImageSet",
        "metadata": {"name": "e2e-images", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"pinnedImages": [{"name": image}]},
    }))?;
    Api::<PinnedImageSet>::all(cluster.client.clone())
        .create(&PostParams::default(), &set)
        .await?;

    for name in cluster.node_names() {
        let mcn = wait_pinned(&cluster, &name, "e2e-images", secs(120))
            .await
            .with_context(logs)?;
        ensure!(
            condition_status(&mcn, "PinnedImageSetsDegraded") == Some("False"),
            "{mcn:#}"
        );
        let drop_in = cluster
            .node_read(&name, CRIO_DROP_IN)
            .with_context(|| format!("no {CRIO_DROP_IN} on {name}"))?;
        ensure!(
            drop_in == format!("[crio]\n  [crio.image]\n    pinned_images = [\"{image}\"]\n"),
            "{name}: {drop_in}"
        );
    }
    let pool = cluster.pool().await?;
    let listed: Vec<&str> = pool
        .spec
        .pinned_image_sets
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    ensure!(listed == ["e2e-images"], "the pool lists {listed:?}");
    // Every node pulled it into its own runtime.
    for (node, containerd) in &runtimes {
        ensure!(
            CriClient::new(containerd.socket())
                .image_present(&image)
                .await?,
            "the containerd of {node} does not have {image}"
        );
    }
    cluster.finish().await
}
