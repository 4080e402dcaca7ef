//! API semantics of the test server as kube-rs (the agent's and the companion's client) sees
//! them: optimistic concurrency, watches from a resourceVersion with selectors, 410 Gone,
//! patch types, pagination, evictions and their Status bodies, fault injection.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use mco_test_support::apiserver::{Target, TestApiServer, fixtures};
use serde_json::json;

async fn client(server: &TestApiServer) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(server.kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    // See the server's answers, not kube's retries of 429/503/504.
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

fn api_error(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn stale_resource_version_conflicts() {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node("n1")).unwrap();
    let nodes: Api<Node> = Api::all(client(&server).await);
    let mut stale = nodes.get("n1").await.unwrap();
    let mut fresh = stale.clone();
    fresh
        .metadata
        .labels
        .get_or_insert_default()
        .insert("a".into(), "1".into());
    nodes
        .replace("n1", &PostParams::default(), &fresh)
        .await
        .unwrap();
    stale
        .metadata
        .labels
        .get_or_insert_default()
        .insert("b".into(), "2".into());
    let status = api_error(
        nodes
            .replace("n1", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );
    // A merge patch carrying a stale resourceVersion is a precondition too.
    let patch = json!({"metadata": {"resourceVersion": "1", "labels": {"c": "3"}}});
    let status = api_error(
        nodes
            .patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 409);
    let missing = api_error(nodes.get("nope").await.unwrap_err());
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    let exists = api_error(
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(fixtures::node("n1")).unwrap(),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (exists.code, exists.reason.as_str()),
        (409, "AlreadyExists")
    );
}

#[tokio::test]
async fn watch_follows_selectors_and_versions() {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node("n1")).unwrap();
    server.seed(fixtures::node("n2")).unwrap();
    let nodes: Api<Node> = Api::all(client(&server).await);
    let list = nodes
        .list(&ListParams::default().labels("pool=a"))
        .await
        .unwrap();
    assert!(list.items.is_empty());
    let rv = list.metadata.resource_version.unwrap();
    let mut events = nodes
        .watch(&WatchParams::default().labels("pool=a").timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    let label = |v: Option<&str>| json!({"metadata": {"labels": {"pool": v}}});
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(label(Some("a"))),
        )
        .await
        .unwrap();
    nodes
        .patch(
            "n2",
            &PatchParams::default(),
            &Patch::Merge(label(Some("b"))),
        )
        .await
        .unwrap();
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(label(None)))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push(match event {
            WatchEvent::Added(n) => format!("ADDED {}", n.metadata.name.unwrap()),
            WatchEvent::Modified(n) => format!("MODIFIED {}", n.metadata.name.unwrap()),
            WatchEvent::Deleted(n) => format!("DELETED {}", n.metadata.name.unwrap()),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(seen, ["ADDED n1", "MODIFIED n1", "DELETED n1"]);

    // Field selector on the name, from an old version: the history is replayed.
    let mut replay = nodes
        .watch(&WatchParams::default().fields("metadata.name=n2"), &rv)
        .await
        .unwrap()
        .boxed();
    match replay.try_next().await.unwrap().unwrap() {
        WatchEvent::Modified(n) => assert_eq!(n.metadata.labels.unwrap()["pool"], "b"),
        other => panic!("unexpected {other:?}"),
    }

    server.compact();
    let mut gone = nodes
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match gone.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("expected 410 Gone, got {other:?}"),
    }
}

#[tokio::test]
async fn dropped_watches_end_and_faults_answer_errors() {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node("n1")).unwrap();
    let nodes: Api<Node> = Api::all(client(&server).await);
    let mut events = nodes
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert!(matches!(
        events.try_next().await.unwrap(),
        Some(WatchEvent::Added(_))
    ));
    server.faults().drop_watches();
    let end = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap();
    assert!(end.is_none(), "the watch stream ends");

    server
        .faults()
        .fail_next("PATCH", "/api/v1/nodes/*", 2, 503);
    let patch = Patch::Merge(json!({"metadata": {"annotations": {"k": "v"}}}));
    for _ in 0..2 {
        let status = api_error(
            nodes
                .patch("n1", &PatchParams::default(), &patch)
                .await
                .unwrap_err(),
        );
        assert_eq!(status.code, 503);
    }
    nodes
        .patch("n1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let failed = server
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.status == 503)
        .count();
    assert_eq!(failed, 2);

    server.faults().delay(
        "GET",
        "/api/v1/nodes/n1",
        Duration::from_millis(300),
        Some(1),
    );
    let started = std::time::Instant::now();
    nodes.get("n1").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn patch_types_and_pagination() {
    let server = TestApiServer::start().unwrap();
    for n in ["n1", "n2", "n3"] {
        server.seed(fixtures::node(n)).unwrap();
    }
    let nodes: Api<Node> = Api::all(client(&server).await);
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/annotations/x", "value": "1"},
    ]))
    .unwrap();
    let n = nodes
        .patch("n1", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(n.metadata.annotations.unwrap()["x"], "1");
    let taint = json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Strategic(&taint))
        .await
        .unwrap();
    let n = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(n.spec.unwrap().taints.unwrap().len(), 1);
    // The main resource ignores status; /status changes it.
    assert_eq!(
        n.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].status,
        "True"
    );
    let n = nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .unwrap();
    assert_eq!(n.status.unwrap().phase.as_deref(), Some("Running"));

    let first = nodes.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().unwrap();
    let rest = nodes
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.items[0].metadata.name.as_deref(), Some("n3"));
    assert_eq!(
        rest.metadata.resource_version,
        first.metadata.resource_version
    );

    // Custom resources: merge patch works, strategic merge patch is refused as by a real server.
    let client = client(&server).await;
    let gvk = GroupVersionKind::gvk("machineconfiguration.openshift.io", "v1", "MachineConfig");
    let mcs: Api<DynamicObject> = Api::all_with(client, &ApiResource::from_gvk(&gvk));
    let mc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "00-test"}, "spec": {"config": {"ignition": {"version": "3.2.0"}}},
    }))
    .unwrap();
    mcs.create(&PostParams::default(), &mc).await.unwrap();
    let patched = mcs
        .patch(
            "00-test",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kernelType": "realtime"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["kernelType"], "realtime");
    assert_eq!(patched.metadata.generation, Some(2));
    let status = api_error(
        mcs.patch(
            "00-test",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(status.code, 415);
    mcs.delete("00-test", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn evictions_honour_budgets() {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node("n1")).unwrap();
    server
        .seed(fixtures::pod("default", "web-1", "n1", &[("app", "web")]))
        .unwrap();
    server
        .seed(fixtures::pod("default", "web-2", "n1", &[("app", "web")]))
        .unwrap();
    server
        .seed(fixtures::pdb(
            "default",
            "web-pdb",
            &[("app", "web")],
            json!({"maxUnavailable": 1}),
        ))
        .unwrap();
    server.set_pod_termination_delay(Duration::from_millis(500));
    let pods: Api<Pod> = Api::namespaced(client(&server).await, "default");
    pods.evict("web-1", &Default::default()).await.unwrap();
    let terminating = pods.get("web-1").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let status = api_error(pods.evict("web-2", &Default::default()).await.unwrap_err());
    assert_eq!(status.code, 429);
    assert_eq!(
        status.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &status.details.unwrap().causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert_eq!(
        cause.message,
        "The disruption budget web-pdb needs 1 healthy pods and has 1 currently"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(api_error(pods.get("web-1").await.unwrap_err()).code, 404);
    let pdb = server
        .get("poddisruptionbudgets", Some("default"), "web-pdb")
        .unwrap();
    assert_eq!(pdb["status"]["expectedPods"], 1);
    assert_eq!(pdb["status"]["disruptionsAllowed"], 1);
    pods.evict("web-2", &Default::default()).await.unwrap();
}

/// The disruption controller recomputes a budget's status when its spec changes, as when its
/// pods do.
#[test]
fn a_budgets_status_follows_its_spec() {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node("n1")).unwrap();
    server
        .seed(fixtures::pod("default", "web-1", "n1", &[("app", "web")]))
        .unwrap();
    server
        .seed(fixtures::pdb(
            "default",
            "web-pdb",
            &[("app", "web")],
            json!({"maxUnavailable": 0}),
        ))
        .unwrap();
    let allowed = || {
        server
            .get("poddisruptionbudgets", Some("default"), "web-pdb")
            .unwrap()["status"]["disruptionsAllowed"]
            .clone()
    };
    assert_eq!(allowed(), 0);
    server
        .patch(
            "poddisruptionbudgets",
            Some("default"),
            "web-pdb",
            &json!({"spec": {"maxUnavailable": 1}}),
            Target::Main,
        )
        .unwrap();
    assert_eq!(allowed(), 1);
}
