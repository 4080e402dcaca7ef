//! Authentication, authorization, NodeRestriction and the audit through HTTP, with kube-rs (the
//! agent's and the companion's client): a node with its kubelet client certificate, a service
//! account with a token and RBAC objects, anonymous requests, and the 401/403 Status bodies.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use mco_test_support::apiserver::{
    Identity, PolicyRule, ServerOptions, TestApiServer, fixtures, unused_permissions,
};
use serde_json::json;

async fn client_for(kubeconfig: &std::path::Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

fn status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

const COMPANION_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "mco:companion"}
rules:
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineconfigs]
  verbs: [get, list, watch]
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineconfigpools/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [nodes]
  resourceNames: [n1]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "mco:companion"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "mco:companion"}
subjects:
- {kind: ServiceAccount, name: companion, namespace: mco}
"#;

fn rbac_server() -> TestApiServer {
    let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    for node in ["n1", "n2"] {
        server.seed(fixtures::node(node)).unwrap();
    }
    server
        .seed(fixtures::pod("default", "on-n1", "n1", &[]))
        .unwrap();
    server
        .seed(fixtures::pod("default", "on-n2", "n2", &[]))
        .unwrap();
    server.seed_manifests(COMPANION_RBAC).unwrap();
    server
}

#[tokio::test]
async fn a_node_with_its_client_certificate_reads_and_writes_only_its_own() {
    let server = rbac_server();
    let kubeconfig = server.dir().join("n1.kubeconfig");
    server.write_node_kubeconfig(&kubeconfig, "n1").unwrap();
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(text.contains("client-certificate-data") && !text.contains("token"));
    let client = client_for(&kubeconfig).await;
    let nodes: Api<Node> = Api::all(client.clone());

    nodes.get("n1").await.unwrap();
    let other = status(nodes.get("n2").await.unwrap_err());
    assert_eq!((other.code, other.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        other.message,
        "nodes \"n2\" is forbidden: User \"system:node:n1\" cannot get resource \"nodes\" in API \
         group \"\" at the cluster scope: node 'n1' cannot read 'n2', only its own Node object"
    );
    let all = status(nodes.list(&ListParams::default()).await.unwrap_err());
    assert!(
        all.message
            .ends_with("node 'n1' cannot read all nodes, only its own Node object")
    );
    // A field selector on its own name makes list and watch about its own object.
    let own = ListParams::default().fields("metadata.name=n1");
    assert_eq!(nodes.list(&own).await.unwrap().items.len(), 1);
    let _events = nodes
        .watch(
            &WatchParams::default().fields("metadata.name=n1").timeout(1),
            "0",
        )
        .await
        .unwrap();

    let annotate = |value: &str| {
        Patch::Merge(
            json!({"metadata": {"annotations": {"machineconfiguration.openshift.io/state": value}}}),
        )
    };
    nodes
        .patch("n1", &PatchParams::default(), &annotate("Working"))
        .await
        .unwrap();
    let refused = status(
        nodes
            .patch("n2", &PatchParams::default(), &annotate("Done"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        refused.message,
        "nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\""
    );
    let label =
        Patch::Merge(json!({"metadata": {"labels": {"node-role.kubernetes.io/infra": ""}}}));
    let refused = status(
        nodes
            .patch("n1", &PatchParams::default(), &label)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        refused.message,
        "nodes \"n1\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/infra"
    );
    assert!(
        server.get("nodes", None, "n2").unwrap()["metadata"]["annotations"]
            .get("machineconfiguration.openshift.io/state")
            .is_none()
    );

    // Pods: only its own, listed with a spec.nodeName selector, evicted only when bound to it.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let all_pods: Api<Pod> = Api::all(client.clone());
    let mine = all_pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(mine.items.len(), 1);
    let unscoped = status(all_pods.list(&ListParams::default()).await.unwrap_err());
    assert!(
        unscoped
            .message
            .ends_with("can only list/watch pods with spec.nodeName field selector")
    );
    assert_eq!(status(pods.get("on-n2").await.unwrap_err()).code, 403);
    let refused = status(pods.evict("on-n2", &Default::default()).await.unwrap_err());
    assert_eq!(
        refused.message,
        "pods \"on-n2\" is forbidden: node n1 can only evict pods with spec.nodeName set to itself"
    );
    pods.evict("on-n1", &Default::default()).await.unwrap();

    // Leases outside kube-node-lease are never a node's, whatever RBAC says.
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let lease: Lease =
        serde_json::from_value(json!({"metadata": {"name": "fleetlock"}, "spec": {}})).unwrap();
    assert_eq!(
        status(
            leases
                .create(&PostParams::default(), &lease)
                .await
                .unwrap_err()
        )
        .code,
        403
    );

    let events = server.audit();
    let node_writes: Vec<String> = events
        .iter()
        .filter(|e| e.user == "system:node:n1" && e.allowed && e.verb == "patch")
        .map(|e| format!("{} {} {}", e.permission(), e.name, e.code))
        .collect();
    assert_eq!(
        node_writes,
        [
            "patch nodes n1 200",
            "patch nodes n2 403",
            "patch nodes n1 403"
        ]
    );
}

#[tokio::test]
async fn a_service_account_gets_what_its_role_grants_and_the_audit_shows_the_rest() {
    let server = rbac_server();
    let kubeconfig = server.dir().join("companion.kubeconfig");
    server
        .write_service_account_kubeconfig(&kubeconfig, "mco", "companion")
        .unwrap();
    let client = client_for(&kubeconfig).await;
    let gvk = |kind: &str| GroupVersionKind::gvk("machineconfiguration.openshift.io", "v1", kind);
    let mcs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&gvk("MachineConfig")),
    );
    mcs.list(&ListParams::default()).await.unwrap();
    let pools: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&gvk("MachineConfigPool")),
    );
    let denied = status(pools.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        denied.message,
        "machineconfigpools.machineconfiguration.openshift.io is forbidden: User \
         \"system:serviceaccount:mco:companion\" cannot list resource \"machineconfigpools\" in \
         API group \"machineconfiguration.openshift.io\" at the cluster scope"
    );
    let nodes: Api<Node> = Api::all(client);
    nodes.get("n1").await.unwrap();
    assert_eq!(
        status(nodes.get("n2").await.unwrap_err()).code,
        403,
        "resourceNames"
    );

    let events = server.audit();
    let allowed: Vec<&str> = events
        .iter()
        .filter(|e| e.user == "system:serviceaccount:mco:companion" && e.allowed)
        .filter(|e| e.non_resource_path.is_empty())
        .map(|e| e.grant.as_ref().map_or("", |g| g.binding.as_str()))
        .collect();
    assert_eq!(allowed, ["mco:companion", "mco:companion"]);
    let role = server.get("clusterroles", None, "mco:companion").unwrap();
    let ours: Vec<_> = events
        .into_iter()
        .filter(|e| e.user == "system:serviceaccount:mco:companion")
        .collect();
    assert_eq!(
        unused_permissions(&PolicyRule::all_of(&role), &ours),
        [
            "get machineconfigs.machineconfiguration.openshift.io",
            "watch machineconfigs.machineconfiguration.openshift.io",
            "patch machineconfigpools/status.machineconfiguration.openshift.io",
        ]
    );
}

/// GET `path` with the admin kubeconfig's server and CA and `credential`: "admin" (its
/// token), a bearer token, or none; the answer's code and body (`reason: message` of a Status).
async fn get(server: &TestApiServer, path: &str, credential: Option<&str>) -> (u16, String) {
    let admin = std::fs::read_to_string(server.kubeconfig()).unwrap();
    let text: String = admin
        .lines()
        .map(
            |line| match (line.trim_start().starts_with("token:"), credential) {
                (true, Some("admin")) | (false, _) => format!("{line}\n"),
                (true, Some(token)) => format!("    token: {token}\n"),
                (true, None) => "    username: nobody\n".to_string(),
            },
        )
        .collect();
    let file = server.dir().join("probe.kubeconfig");
    std::fs::write(&file, text).unwrap();
    let client = client_for(&file).await;
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    match client.request_text(request).await {
        Ok(body) => (200, body),
        Err(kube::Error::Api(status)) => (
            status.code,
            format!("{}: {}", status.reason, status.message),
        ),
        Err(other) => panic!("GET {path}: {other}"),
    }
}

#[tokio::test]
async fn credentials_anonymous_requests_and_tokens() {
    let server = rbac_server();
    // No credentials over HTTPS: 401 (anonymous auth is off)...
    let (code, body) = get(&server, "/api/v1/nodes", None).await;
    assert_eq!((code, body.as_str()), (401, "Unauthorized: Unauthorized"));
    // ... except health; an unknown token is 401 there too.
    assert_eq!(
        get(&server, "/healthz", None).await,
        (200, "ok".to_string())
    );
    assert_eq!(get(&server, "/healthz", Some("nope")).await.0, 401);
    let token = server.token_for_identity(&Identity::new("carol", &["qa"]));
    let (code, body) = get(&server, "/api/v1/nodes", Some(&token)).await;
    assert_eq!(
        (code, body.as_str()),
        (
            403,
            "Forbidden: nodes is forbidden: User \"carol\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        )
    );
    assert_eq!(get(&server, "/api/v1/nodes", Some("admin")).await.0, 200);

    let anonymous = TestApiServer::start_with(ServerOptions {
        anonymous: Some(true),
        ..ServerOptions::rbac()
    })
    .unwrap();
    let (code, body) = get(&anonymous, "/api/v1/nodes", None).await;
    assert_eq!(
        (code, body.as_str()),
        (
            403,
            "Forbidden: nodes is forbidden: User \"system:anonymous\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        )
    );
    assert_eq!(get(&anonymous, "/version", None).await.0, 200);
}
