//! Leader election against the API test server, as the companion's service account with the
//! shipped RBAC: the Lease's resourceVersion conflicts decide races between replicas, and the
//! fence under kube's real client stack keeps a replica that does not lead from writing
//! anything (the server never sees the request).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::Api;
use kube::api::PostParams;
use mco_companion::leader::elector::{Elector, Round};
use mco_companion::leader::fence::{Fence, FenceError};
use mco_companion::leader::lease_api::{KubeLease, LeaseApi, LeaseError};
use mco_companion::leader::timings::Timings;
use mco_test_support::apiserver::{ServerOptions, TestApiServer};
use mco_test_support::shipped::{self, COMPANION_NAMESPACE};

const LEASE: &str = "mco-companion-controller";

fn timings() -> Timings {
    Timings {
        lease_duration: Duration::from_secs(6),
        renew_deadline: Duration::from_secs(4),
        retry_period: Duration::from_secs(1),
    }
}

async fn cluster() -> (TestApiServer, std::path::PathBuf) {
    let api = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    shipped::load_rbac(&api).unwrap();
    let kubeconfig = shipped::companion_kubeconfig(&api).unwrap();
    (api, kubeconfig)
}

async fn elector(kubeconfig: &std::path::Path, identity: &str) -> (Elector, Fence) {
    let client = mco_companion::cluster::client(kubeconfig).await.unwrap();
    let fence = Fence::new(timings().write_cutoff());
    let api = Arc::new(KubeLease::new(client, COMPANION_NAMESPACE, LEASE));
    (Elector::new(api, identity, timings(), fence.clone()), fence)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_servers_resource_versions_decide_between_replicas() {
    let (api, kubeconfig) = cluster().await;
    let (mut first, first_fence) = elector(&kubeconfig, "companion-0").await;
    let (mut second, second_fence) = elector(&kubeconfig, "companion-1").await;
    assert_eq!(first.round().await, Round::Leading);
    assert_eq!(second.round().await, Round::Following("companion-0".into()));
    assert!(first_fence.is_leading() && !second_fence.is_leading());
    let stored = api.get("leases", Some(COMPANION_NAMESPACE), LEASE).unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], "companion-0");
    assert_eq!(stored["spec"]["leaseDurationSeconds"], 6);
    assert_eq!(stored["spec"]["leaseTransitions"], 1);

    // a replica that read the Lease before the holder renewed it cannot write it
    let client = mco_companion::cluster::client(&kubeconfig).await.unwrap();
    let racer = KubeLease::new(client.clone(), COMPANION_NAMESPACE, LEASE);
    let stale = racer.get().await.unwrap().unwrap();
    assert_eq!(first.round().await, Round::Leading);
    let taken = LeaseSpec {
        holder_identity: Some("companion-9".into()),
        ..LeaseSpec::default()
    };
    assert_eq!(
        racer.replace(stale, taken.clone()).await.unwrap_err(),
        LeaseError::Conflict
    );
    // nor create it again
    assert_eq!(racer.create(taken).await.unwrap_err(), LeaseError::Conflict);
    // and an update without a resourceVersion is refused (leases allow no unconditional update)
    let mut unconditional = racer.get().await.unwrap().unwrap();
    unconditional.metadata.resource_version = None;
    let leases: Api<Lease> = Api::namespaced(client, COMPANION_NAMESPACE);
    assert!(
        leases
            .replace(LEASE, &PostParams::default(), &unconditional)
            .await
            .is_err()
    );

    // the holder releases it: the other takes it at its next round, not a lease duration later
    first.release().await;
    assert!(!first_fence.is_leading());
    let stored = api.get("leases", Some(COMPANION_NAMESPACE), LEASE).unwrap();
    assert!(stored["spec"]["holderIdentity"].is_null(), "{stored}");
    assert_eq!(second.round().await, Round::Leading);
    let stored = api.get("leases", Some(COMPANION_NAMESPACE), LEASE).unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], "companion-1");
    assert_eq!(stored["spec"]["leaseTransitions"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_client_writes_only_while_leading() {
    let (api, kubeconfig) = cluster().await;
    let fence = Fence::new(Duration::from_secs(1));
    let client = mco_companion::cluster::fenced_client(&kubeconfig, &fence, true)
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(client, COMPANION_NAMESPACE);
    let lease = |name: &str| Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec::default()),
    };
    let not_leading = |err: kube::Error| match err {
        kube::Error::Service(inner) => inner.downcast_ref::<FenceError>().cloned(),
        other => panic!("not the fence's refusal: {other:?}"),
    };

    // not leading: reads pass, writes never reach the server
    assert!(leases.get_opt("fenced").await.unwrap().is_none());
    let refused = leases
        .create(&PostParams::default(), &lease("fenced"))
        .await
        .unwrap_err();
    assert_eq!(not_leading(refused), Some(FenceError::NotLeading));
    assert!(
        api.get("leases", Some(COMPANION_NAMESPACE), "fenced")
            .is_none()
    );

    // leading: they pass
    fence.extend(tokio::time::Instant::now() + Duration::from_secs(60));
    leases
        .create(&PostParams::default(), &lease("fenced"))
        .await
        .unwrap();

    // the leadership's deadline passed (no one revoked it): refused again
    fence.extend(tokio::time::Instant::now() + Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let refused = leases
        .create(&PostParams::default(), &lease("fenced-late"))
        .await
        .unwrap_err();
    assert_eq!(not_leading(refused), Some(FenceError::NotLeading));
    assert!(
        api.get("leases", Some(COMPANION_NAMESPACE), "fenced-late")
            .is_none()
    );
}
