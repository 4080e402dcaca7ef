//! The pinned image set controller against the Kubernetes API test server, the companion
//! running as its shipped service account under the shipped RBAC: each pool's
//! `spec.pinnedImageSets` follows the sets its `machineConfigSelector` selects (added, relabelled,
//! deleted), a pool with the empty selector is left alone, and a write that fails is the pool's
//! `PinnedImageSetsDegraded` condition with the MCO's message, cleared by the next pass.

use std::time::{Duration, Instant};

use machine_config::render::RenderOptions;
use mco_companion::cluster::{self, controller};
use mco_test_support::apiserver::{ServerOptions, Target, TestApiServer};
use mco_test_support::shipped;
use serde_json::{Value, json};
use tokio::sync::watch;

const ROLE: &str = "machineconfiguration.openshift.io/role";
const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn pool(name: &str, selector: Value) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "machineConfigSelector": selector,
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}},
        }
    })
}

fn set(name: &str, role: &str) -> Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "PinnedImageSet",
        "metadata": {"name": name, "labels": {ROLE: role}},
        "spec": {"pinnedImages": [{"name": format!("quay.io/openshift/{name}@{DIGEST}")}]},
    })
}

fn listed(api: &TestApiServer, pool: &str) -> Option<Vec<String>> {
    let p = api.get("machineconfigpools", None, pool)?;
    Some(
        p["spec"]["pinnedImageSets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect(),
    )
}

fn condition(api: &TestApiServer, pool: &str) -> Option<(String, String)> {
    let p = api.get("machineconfigpools", None, pool)?;
    let c = p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PinnedImageSetsDegraded")?
        .clone();
    Some((
        c["status"].as_str()?.to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
    ))
}

async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pool_lists_the_sets_its_selector_selects() {
    let api = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    shipped::load_rbac(&api).unwrap();
    let kubeconfig = shipped::companion_kubeconfig(&api).unwrap();
    let workers = json!({"matchLabels": {ROLE: "worker"}});
    let infra = json!({"matchExpressions": [{"key": ROLE, "operator": "In", "values": ["worker", "infra"]}]});
    api.seed(pool("worker", workers)).unwrap();
    api.seed(pool("infra", infra)).unwrap();
    api.seed(pool("everything", json!({}))).unwrap();
    api.seed(set("b-worker", "worker")).unwrap();
    api.seed(set("a-worker", "worker")).unwrap();
    api.seed(set("gpu", "infra")).unwrap();

    let client = cluster::client(&kubeconfig).await.unwrap();
    let (stop, shutdown) = watch::channel(false);
    let running = tokio::spawn(controller::run(client, RenderOptions::default(), shutdown));

    let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    wait_for("the pools' sets", || {
        listed(&api, "worker") == names(&["a-worker", "b-worker"])
            && listed(&api, "infra") == names(&["a-worker", "b-worker", "gpu"])
    })
    .await;
    assert_eq!(
        listed(&api, "everything"),
        names(&[]),
        "an empty selector is left alone"
    );
    wait_for("PinnedImageSetsDegraded=False", || {
        condition(&api, "worker").is_some_and(|c| c.0 == "False")
    })
    .await;

    // relabelled: it leaves the worker pool, stays in infra
    api.patch(
        "pinnedimagesets",
        None,
        "a-worker",
        &json!({"metadata": {"labels": {ROLE: "infra"}}}),
        Target::Main,
    )
    .unwrap();
    wait_for("a-worker out of worker", || {
        listed(&api, "worker") == names(&["b-worker"])
    })
    .await;
    // deleted: gone from every pool (the field removed when empty)
    api.delete("pinnedimagesets", None, "b-worker").unwrap();
    wait_for("b-worker gone", || {
        listed(&api, "worker") == names(&[]) && listed(&api, "infra") == names(&["a-worker", "gpu"])
    })
    .await;
    assert!(
        api.get("machineconfigpools", None, "worker").unwrap()["spec"]
            .get("pinnedImageSets")
            .is_none(),
        "an empty list is no field"
    );

    // a write that fails degrades the pool, with the MCO's message, until one lands
    api.faults().fail_next(
        "PATCH",
        "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker",
        1,
        500,
    );
    api.seed(set("c-worker", "worker")).unwrap();
    wait_for("PinnedImageSetsDegraded=True", || {
        condition(&api, "worker").is_some_and(|c| c.0 == "True")
    })
    .await;
    let (_, message) = condition(&api, "worker").unwrap();
    assert!(
        message.starts_with("Failed to populate pinned image sets for pool worker: "),
        "{message}"
    );
    wait_for("the retry", || {
        listed(&api, "worker") == names(&["c-worker"])
            && condition(&api, "worker").is_some_and(|c| c.0 == "False")
    })
    .await;

    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
    let user = format!(
        "system:serviceaccount:{}:{}",
        shipped::COMPANION_NAMESPACE,
        shipped::COMPANION_SERVICE_ACCOUNT
    );
    let usage = shipped::role_use(&api.audit(), &user, shipped::COMPANION_ROLE).unwrap();
    assert!(usage.refused.is_empty(), "refused: {:#?}", usage.refused);
    for needed in [
        "list pinnedimagesets.machineconfiguration.openshift.io",
        "watch pinnedimagesets.machineconfiguration.openshift.io",
    ] {
        assert!(
            usage.used.iter().any(|u| u.starts_with(needed)),
            "{needed} not used: {:#?}",
            usage.used
        );
    }
}
