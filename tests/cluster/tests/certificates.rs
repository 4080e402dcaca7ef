//! The certificate writer across a cluster: the operator's ControllerConfig
//! `machine-config-controller` (created and then rotated by the test, as the operator writes it)
//! reaches every node's kubelet CA, cloud CA, registry CA directories and merged pull secret,
//! each node records `lastSyncedControllerConfigResourceVersion`, and a rotation of the kubelet
//! CA and of the registry CAs (one added with a port, one removed) is no update: no node leaves
//! Done, is cordoned, drained or rebooted, and its `currentConfig` stays.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use machine_config::ControllerConfig;
use machine_config::controller_config::NAME as CONTROLLER_CONFIG;
use machine_config::mco::annotations::{
    CURRENT_CONFIG, LAST_SYNCED_CONTROLLER_CONFIG_RESOURCE_VERSION,
};
use machine_config::mco::paths::{CLOUD_CA_BUNDLE, KUBELET_CA, MERGED_PULL_SECRET};
use mco_cluster_tests::{Cluster, Spec, binaries, secs};
use serde_json::{Value, json};

/// The MachineConfig file that creates `/etc/docker/certs.d` on OpenShift
/// (`templates/common/_base/files/etc-docker-certs.d.yaml`): without the directory the writer
/// leaves registry CAs alone, as the MCD does.
const CERTS_D_CREATE: &str = "/etc/docker/certs.d/.create";

fn pem(name: &str) -> String {
    format!("-----BEGIN CERTIFICATE-----\n{name}\n-----END CERTIFICATE-----\n")
}

/// The ControllerConfig's spec as the operator fills it (byte fields base64, as Go writes
/// `[]byte`).
fn spec(kubelet_ca: &str, registries: &[(&str, &str)]) -> Value {
    let bundles: Vec<Value> = registries
        .iter()
        .map(|(file, ca)| json!({"file": file, "data": BASE64.encode(ca)}))
        .collect();
    json!({
        "kubeAPIServerServingCAData": BASE64.encode(kubelet_ca),
        "cloudProviderCAData": null,
        "imageRegistryBundleData": bundles,
        "imageRegistryBundleUserData": [],
        "internalRegistryPullSecret": BASE64.encode(r#"{"auths":{"image-registry.openshift-image-registry.svc:5000":{"auth":"c2E6dG9rZW4="}}}"#),
    })
}

/// Waits until every node has `kubelet_ca` and `registries` (directory → CA) on disk and no
/// other registry directory, and has recorded `resource_version`.
async fn wait_synced(
    cluster: &Cluster,
    kubelet_ca: &str,
    registries: &[(&str, &str)],
    resource_version: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut lagging = BTreeMap::new();
        for node in cluster.node_names() {
            let annotations = cluster.annotations(&node).await?;
            let recorded = annotations
                .get(LAST_SYNCED_CONTROLLER_CONFIG_RESOURCE_VERSION)
                .cloned()
                .unwrap_or_default();
            let mut wrong = Vec::new();
            if recorded != resource_version {
                wrong.push(format!("resourceVersion {recorded:?}"));
            }
            if cluster.node_read(&node, KUBELET_CA).as_deref() != Some(kubelet_ca) {
                wrong.push(format!(
                    "{KUBELET_CA} {:?}",
                    cluster.node_read(&node, KUBELET_CA)
                ));
            }
            for (dir, ca) in registries {
                let path = format!("/etc/docker/certs.d/{dir}/ca.crt");
                if cluster.node_read(&node, &path).as_deref() != Some(*ca) {
                    wrong.push(format!("{path} {:?}", cluster.node_read(&node, &path)));
                }
            }
            let dirs = cluster.node_dirs(&node, "/etc/docker/certs.d");
            let expected: Vec<String> = registries.iter().map(|(d, _)| d.to_string()).collect();
            if dirs != expected {
                wrong.push(format!("certs.d holds {dirs:?}"));
            }
            if !wrong.is_empty() {
                lagging.insert(node, wrong);
            }
        }
        if lagging.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "ControllerConfig resourceVersion {resource_version} did not reach every node \
                 in {timeout:?}: {lagging:?}\n{}",
                cluster.diagnostics().await
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn version(object: &DynamicObject) -> &str {
    object
        .metadata
        .resource_version
        .as_deref()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_rotation_reaches_every_node_with_no_update() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(binaries!(), Spec::default()).await?;
    // `/etc/docker/certs.d` exists on OpenShift nodes through a MachineConfig file.
    let with_certs_d = cluster
        .apply_files_config("01-worker-container-runtime", &[(CERTS_D_CREATE, "")])
        .await?;
    cluster
        .wait_pool_done_rebooting(&with_certs_d, secs(60))
        .await?;
    cluster.restart_availability_count();
    let boots = cluster.boots();
    let mut configs = BTreeMap::new();
    for node in cluster.node_names() {
        configs.insert(
            node.clone(),
            cluster
                .annotations(&node)
                .await?
                .get(CURRENT_CONFIG)
                .cloned(),
        );
    }
    // Untyped: the typed object's byte fields are read-only (they do not serialize as Go's
    // base64).
    let api = Api::<DynamicObject>::all_with(
        cluster.client.clone(),
        &ApiResource::erase::<ControllerConfig>(&()),
    );

    // The operator publishes the ControllerConfig: every node writes its files.
    let first_ca = pem("kube-apiserver-to-kubelet-signer-1");
    let registry = pem("image-registry-ca-1");
    let first_registries = [(
        "image-registry.openshift-image-registry.svc",
        registry.as_str(),
    )];
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "ControllerConfig",
        "metadata": {"name": CONTROLLER_CONFIG},
        "spec": spec(&first_ca, &first_registries),
    }))?;
    let created = api.create(&PostParams::default(), &object).await?;
    wait_synced(
        &cluster,
        &first_ca,
        &first_registries,
        version(&created),
        secs(30),
    )
    .await?;
    for node in cluster.node_names() {
        let secret = cluster.node_read(&node, MERGED_PULL_SECRET);
        anyhow::ensure!(
            secret
                .as_deref()
                .is_some_and(|s| s.starts_with(r#"{"auths":"#)),
            "{node}: {MERGED_PULL_SECRET} {secret:?}"
        );
        // An empty cloud CA is written as a newline, as the MCD writes it.
        anyhow::ensure!(
            cluster.node_read(&node, CLOUD_CA_BUNDLE).as_deref() == Some("\n"),
            "{node}: {CLOUD_CA_BUNDLE} {:?}",
            cluster.node_read(&node, CLOUD_CA_BUNDLE)
        );
    }

    // The signer rotates and a registry with a port replaces the internal one's CA: the new
    // files reach every node, the old registry directory goes.
    let second_ca = format!("{first_ca}{}", pem("kube-apiserver-to-kubelet-signer-2"));
    let mirror = pem("mirror-ca");
    let patch = json!({"spec": spec(&second_ca, &[("mirror.example.com..5000", mirror.as_str())])});
    let rotated = api
        .patch(
            CONTROLLER_CONFIG,
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?;
    anyhow::ensure!(version(&rotated) != version(&created));
    wait_synced(
        &cluster,
        &second_ca,
        &[("mirror.example.com:5000", mirror.as_str())],
        version(&rotated),
        secs(30),
    )
    .await?;

    // No update: the same boots and configs, no node ever left Done or was cordoned.
    anyhow::ensure!(
        cluster.boots() == boots,
        "a certificate rotation rebooted: {boots:?} -> {:?}",
        cluster.boots()
    );
    for (node, config) in &configs {
        let now = cluster
            .annotations(node)
            .await?
            .get(CURRENT_CONFIG)
            .cloned();
        anyhow::ensure!(
            &now == config,
            "{node}: currentConfig {config:?} -> {now:?}"
        );
    }
    let (_, max_seen) = cluster.check_availability()?;
    anyhow::ensure!(
        max_seen == 0,
        "a certificate rotation made {max_seen} node(s) unavailable at once (the config change \
         before it is rebootless and needs no drain)"
    );
    cluster.finish().await
}
