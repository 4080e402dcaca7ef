//! Leases through kube-rs, as a FleetLock semaphore backed by Leases uses them: optimistic
//! concurrency (a stale resourceVersion is a 409 Conflict), no unconditional updates, create
//! by PUT, AlreadyExists for a second create.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use mco_test_support::apiserver::TestApiServer;
use serde_json::json;

async fn client(server: &TestApiServer) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(server.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn lease(name: &str, holder: &str) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 300},
    }))
    .unwrap()
}

#[tokio::test]
async fn two_holders_racing_for_a_lease_conflict() {
    let server = TestApiServer::start().unwrap();
    let leases: Api<Lease> = Api::namespaced(client(&server).await, "default");
    let pp = PostParams::default();
    leases.create(&pp, &lease("slot", "")).await.unwrap();
    let exists = status(leases.create(&pp, &lease("slot", "")).await.unwrap_err());
    assert_eq!(
        (exists.code, exists.reason.as_str()),
        (409, "AlreadyExists")
    );

    let read = leases.get("slot").await.unwrap();
    let mut first = read.clone();
    first.spec.as_mut().unwrap().holder_identity = Some("worker-0".into());
    let mut second = read.clone();
    second.spec.as_mut().unwrap().holder_identity = Some("worker-1".into());
    leases.replace("slot", &pp, &first).await.unwrap();
    let lost = status(leases.replace("slot", &pp, &second).await.unwrap_err());
    assert_eq!((lost.code, lost.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        lost.message,
        "Operation cannot be fulfilled on leases.coordination.k8s.io \"slot\": the object has been \
         modified; please apply your changes to the latest version and try again"
    );
    let held = leases.get("slot").await.unwrap();
    assert_eq!(
        held.spec.unwrap().holder_identity.as_deref(),
        Some("worker-0")
    );

    // Leases refuse updates without a resourceVersion (AllowUnconditionalUpdate is false).
    let mut blind = second.clone();
    blind.metadata.resource_version = None;
    let refused = status(leases.replace("slot", &pp, &blind).await.unwrap_err());
    assert_eq!(refused.code, 422);
    assert!(
        refused.message.contains(
            "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
        ),
        "{}",
        refused.message
    );

    // ... and may be created by PUT (AllowCreateOnUpdate).
    let created = leases
        .replace("by-put", &pp, &lease("by-put", "worker-2"))
        .await
        .unwrap();
    assert_eq!(
        created.spec.unwrap().holder_identity.as_deref(),
        Some("worker-2")
    );
    let put = server
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT" && r.path.ends_with("/leases/by-put"))
        .unwrap();
    assert_eq!(put.status, 201);
}
