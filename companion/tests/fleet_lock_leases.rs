//! FleetLock in cluster mode: two companion replicas (two Lease stores over two clients) share
//! the semaphores through Leases in the companion's namespace, as its service account with the
//! shipped RBAC enforced; races between them end with exactly the configured slots held.

use std::sync::Arc;

use mco_companion::fleet_lock::lease_store::{HOLDERS_ANNOTATION, LeaseStore, lease_name};
use mco_companion::fleet_lock::{LockError, LockStore};
use mco_test_support::apiserver::{ServerOptions, TestApiServer};
use mco_test_support::shipped::{self, COMPANION_NAMESPACE, COMPANION_SERVICE_ACCOUNT};

async fn replicas() -> (TestApiServer, Vec<Arc<LeaseStore>>) {
    let api = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    shipped::load_rbac(&api).unwrap();
    let kubeconfig = shipped::companion_kubeconfig(&api).unwrap();
    // (the shipped kubeconfig names the namespace; this one does not: as --fleet-lock-namespace)
    let mut stores = Vec::new();
    for _ in 0..2 {
        let client = mco_companion::cluster::client(&kubeconfig).await.unwrap();
        stores.push(Arc::new(LeaseStore::new(client, COMPANION_NAMESPACE)));
    }
    (api, stores)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_agree_on_the_holders() {
    let (api, stores) = replicas().await;
    let (one, two) = (&stores[0], &stores[1]);
    one.lock("worker", "node-a", 1).await.unwrap();
    assert!(matches!(
        two.lock("worker", "node-b", 1).await,
        Err(LockError::Full(f)) if f.holders == ["node-a"]
    ));
    two.lock("worker", "node-a", 1).await.unwrap(); // recursive, through the other replica
    two.unlock("worker", "node-b").await.unwrap(); // not held: nothing
    two.unlock("worker", "node-a").await.unwrap();
    one.lock("worker", "node-b", 1).await.unwrap();
    // groups a Lease name cannot spell as they are get their own Lease
    one.lock("Workers.eu", "node-c", 1).await.unwrap();
    let lease = api
        .get(
            "leases",
            Some(COMPANION_NAMESPACE),
            &lease_name("Workers.eu"),
        )
        .unwrap();
    assert_eq!(
        lease["metadata"]["annotations"][HOLDERS_ANNOTATION],
        "[\"node-c\"]"
    );
    assert_eq!(lease["spec"]["holderIdentity"], "node-c");

    // both replicas race for 2 slots, 8 clients: exactly 2 win, whatever the conflicts
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("racer-{i}");
            loop {
                match store.lock("race", &id, 2).await {
                    Ok(()) => return Some(id),
                    Err(LockError::Full(_)) => return None,
                    Err(LockError::Busy(_)) => continue,
                    Err(e) => panic!("{e:?}"),
                }
            }
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        winners.extend(t.await.unwrap());
    }
    assert_eq!(winners.len(), 2, "{winners:?}");
    let lease = api
        .get("leases", Some(COMPANION_NAMESPACE), "fleet-lock-race")
        .unwrap();
    let mut held: Vec<String> = serde_json::from_str(
        lease["metadata"]["annotations"][HOLDERS_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    held.sort();
    winners.sort();
    assert_eq!(held, winners);

    let user = format!("system:serviceaccount:{COMPANION_NAMESPACE}:{COMPANION_SERVICE_ACCOUNT}");
    let refused: Vec<_> = api
        .audit()
        .into_iter()
        .filter(|e| e.user == user && !e.allowed)
        .collect();
    assert!(refused.is_empty(), "refused: {refused:#?}");
}
