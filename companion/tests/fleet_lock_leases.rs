//! FleetLock in cluster mode: two companion replicas (two Lease stores over two clients) share
//! the semaphores through Leases in the companion's namespace, as its service account with the
//! shipped RBAC enforced; races between them end with exactly the configured slots held; the
//! last holder's unlock deletes its Lease; a proven node may lock only its own pool's group.

use std::sync::Arc;

use mco_companion::fleet_lock::access::{GroupRefusal, Groups, PoolGroups};
use mco_companion::fleet_lock::lease_store::{HOLDERS_ANNOTATION, LeaseStore, lease_name};
use mco_companion::fleet_lock::{LockError, LockStore};
use mco_test_support::apiserver::{ServerOptions, TestApiServer};
use mco_test_support::shipped::{self, COMPANION_NAMESPACE, COMPANION_SERVICE_ACCOUNT};
use serde_json::json;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_unlock_deletes_the_lease() {
    let (api, stores) = replicas().await;
    let store = &stores[0];
    for i in 0..5 {
        let group = format!("group-{i}");
        store.lock(&group, "node-a", 1).await.unwrap();
        assert!(
            api.get("leases", Some(COMPANION_NAMESPACE), &lease_name(&group))
                .is_some()
        );
        store.unlock(&group, "node-a").await.unwrap();
    }
    store.lock("worker", "node-a", 2).await.unwrap();
    store.lock("worker", "node-b", 2).await.unwrap();
    store.unlock("worker", "node-a").await.unwrap();
    assert!(
        api.get("leases", Some(COMPANION_NAMESPACE), "fleet-lock-worker")
            .is_some(),
        "node-b still holds a slot"
    );
    store.unlock("worker", "node-b").await.unwrap();
    let left: Vec<_> = api
        .list("leases", Some(COMPANION_NAMESPACE))
        .into_iter()
        .filter_map(|l| l["metadata"]["name"].as_str().map(str::to_string))
        .filter(|n| n.starts_with("fleet-lock-"))
        .collect();
    assert!(left.is_empty(), "Leases left behind: {left:?}");
    // unlocking what nobody holds creates nothing
    store.unlock("worker", "node-a").await.unwrap();
    assert!(
        api.get("leases", Some(COMPANION_NAMESPACE), "fleet-lock-worker")
            .is_none()
    );
    let user = format!("system:serviceaccount:{COMPANION_NAMESPACE}:{COMPANION_SERVICE_ACCOUNT}");
    let refused: Vec<_> = api
        .audit()
        .into_iter()
        .filter(|e| e.user == user && !e.allowed)
        .collect();
    assert!(refused.is_empty(), "refused: {refused:#?}");
}

fn pool(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": name}},
            "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}
        }
    })
}

fn node(name: &str, role: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {format!("node-role.kubernetes.io/{role}"): ""}}
    })
}

/// The groups in cluster mode, read as the companion's service account: the pools, and for a
/// proven node its own pool only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_may_lock_only_its_own_pools_group() {
    let api = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    shipped::load_rbac(&api).unwrap();
    for object in [
        pool("worker"),
        pool("master"),
        node("worker-0", "worker"),
        node("master-0", "master"),
        node("loner", "none"),
    ] {
        api.seed(object).unwrap();
    }
    let kubeconfig = shipped::companion_kubeconfig(&api).unwrap();
    let client = mco_companion::cluster::client(&kubeconfig).await.unwrap();
    let groups = PoolGroups {
        pools: kube::Api::all(client.clone()),
        nodes: kube::Api::all(client),
        configured: ["infra".to_string()].into(),
    };
    // (group, proven node, Ok or a part of the refusal with its kind)
    type Want = Result<(), (&'static str, &'static str)>;
    let rows: [(&str, Option<&str>, Want); 9] = [
        ("worker", Some("worker-0"), Ok(())),
        ("master", Some("master-0"), Ok(())),
        (
            "master",
            Some("worker-0"),
            Err(("not own", "its own pool's group, \"worker\"")),
        ),
        (
            "infra",
            Some("worker-0"),
            Err(("not own", "its own pool's group")),
        ),
        (
            "worker",
            Some("loner"),
            Err(("not own", "belongs to no MachineConfigPool")),
        ),
        (
            "worker",
            Some("ghost"),
            Err(("not own", "no Node \"ghost\"")),
        ),
        ("master", None, Ok(())),
        ("infra", None, Ok(())),
        ("made-up", None, Err(("unknown", "is not a pool's name"))),
    ];
    for (group, node, want) in rows {
        let got = groups.check(group, node).await;
        match (want, got) {
            (Ok(()), Ok(())) => {}
            (Err(("not own", part)), Err(GroupRefusal::NotOwn(why)))
            | (Err(("unknown", part)), Err(GroupRefusal::Unknown(why))) => {
                assert!(why.contains(part), "{group} {node:?}: {why}");
                assert!(
                    !why.contains("master-0") || node == Some("master-0"),
                    "{why}"
                );
            }
            (want, got) => panic!("{group} {node:?}: {got:?}, want {want:?}"),
        }
    }
    let user = format!("system:serviceaccount:{COMPANION_NAMESPACE}:{COMPANION_SERVICE_ACCOUNT}");
    let refused: Vec<_> = api
        .audit()
        .into_iter()
        .filter(|e| e.user == user && !e.allowed)
        .collect();
    assert!(refused.is_empty(), "refused: {refused:#?}");
}
