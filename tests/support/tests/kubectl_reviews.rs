//! TokenReview and SubjectAccessReview, which a delegating server (kube-rbac-proxy, the agent's
//! metrics listener) creates, as the real `kubectl` sees them on the test server with
//! authorization on: `create -f` answers (kube-apiserver's fields and messages), who may
//! create them (the Node authorizer's static rules, `system:auth-delegator`), and discovery.

use std::path::Path;
use std::process::Output;

use mco_test_support::apiserver::{Identity, ServerOptions, TestApiServer, fixtures};
use serde_json::{Value, json};

fn kubectl(server: &TestApiServer, kubeconfig: &Path, args: &[&str]) -> Output {
    let output = server
        .kubectl(kubeconfig)
        .args(args)
        .output()
        .expect("running kubectl (tests/setup.sh installs it)");
    eprintln!(
        "kubectl {}: {}\nstdout: {}\nstderr: {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `kubectl create -f` of `review` as the holder of `kubeconfig`: the answer, or stderr.
fn create(server: &TestApiServer, kubeconfig: &Path, review: &Value) -> Result<Value, String> {
    let file = server.dir().join(format!("review-{}.json", rand_suffix()));
    std::fs::write(&file, review.to_string()).unwrap();
    let out = kubectl(
        server,
        kubeconfig,
        &["create", "-f", file.to_str().unwrap(), "-o", "json"],
    );
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim_end().to_string())
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn token_review(token: &str) -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
           "spec": {"token": token}})
}

fn sar(user: &str, groups: &[&str], attributes: Value) -> Value {
    let mut spec = attributes;
    spec["user"] = json!(user);
    spec["groups"] = json!(groups);
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
}

fn metrics_url() -> Value {
    json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}})
}

fn node_metrics(node: &str) -> Value {
    json!({"resourceAttributes": {"verb": "get", "resource": "nodes", "subresource": "metrics", "name": node}})
}

const PROMETHEUS: &str = "system:serviceaccount:monitoring:prometheus";
const SA_GROUPS: &[&str] = &[
    "system:serviceaccounts",
    "system:serviceaccounts:monitoring",
];

const METRICS_READER: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: metrics-reader}
rules:
- nonResourceURLs: [/metrics]
  verbs: [get]
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: prometheus-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metrics-reader}
subjects:
- {kind: ServiceAccount, name: prometheus, namespace: monitoring}
"#;

#[test]
fn a_node_reviews_tokens_as_kube_apiserver_answers() {
    let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    server.seed(fixtures::node("n1")).unwrap();
    let node = server.dir().join("n1.kubeconfig");
    server.write_node_kubeconfig(&node, "n1").unwrap();
    let token = server.token_for(PROMETHEUS);

    // The Node authorizer's static rules let a kubelet create TokenReviews.
    let answer = create(&server, &node, &token_review(&token)).unwrap();
    assert_eq!(answer["kind"], "TokenReview");
    assert_eq!(answer["spec"]["token"], token.as_str());
    assert_eq!(
        answer["status"],
        json!({
            "authenticated": true,
            "user": {
                "username": PROMETHEUS,
                "groups": ["system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"],
            },
            "audiences": ["https://kubernetes.default.svc"],
        })
    );
    // Audiences asked for are those answered (the test server's tokens are not bound to any).
    let mut with_audience = token_review(&token);
    with_audience["spec"]["audiences"] = json!(["mco-agent"]);
    let answer = create(&server, &node, &with_audience).unwrap();
    assert_eq!(answer["status"]["audiences"], json!(["mco-agent"]));

    // A token the server never issued: not authenticated (the field left out), no user.
    let answer = create(&server, &node, &token_review("not-a-token")).unwrap();
    assert_eq!(answer["status"]["authenticated"], Value::Null);
    assert_eq!(answer["status"]["user"], json!({}));
    assert!(answer["status"]["error"].as_str().is_some(), "{answer}");

    let err = create(&server, &node, &token_review("")).unwrap_err();
    assert!(
        err.contains("token is required for TokenReview in authentication"),
        "{err}"
    );
}

#[test]
fn subject_access_reviews_answer_for_the_subject_in_the_spec() {
    let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    server.seed(fixtures::node("n1")).unwrap();
    let admin = server.kubeconfig().to_path_buf();
    let node = server.dir().join("n1.kubeconfig");
    server.write_node_kubeconfig(&node, "n1").unwrap();

    let allowed = |review: &Value| create(&server, &node, review).unwrap()["status"].clone();
    assert_eq!(
        allowed(&sar(PROMETHEUS, SA_GROUPS, metrics_url())),
        json!({"allowed": false})
    );
    assert_eq!(
        allowed(&sar(PROMETHEUS, SA_GROUPS, node_metrics("n1"))),
        json!({"allowed": false})
    );

    let file = server.dir().join("reader.yaml");
    std::fs::write(&file, METRICS_READER).unwrap();
    let applied = kubectl(&server, &admin, &["apply", "-f", file.to_str().unwrap()]);
    assert!(applied.status.success());

    let status = allowed(&sar(PROMETHEUS, SA_GROUPS, metrics_url()));
    assert_eq!(status["allowed"], true);
    assert_eq!(
        status["reason"],
        format!(
            "RBAC: allowed by ClusterRoleBinding \"prometheus-metrics\" of ClusterRole \"metrics-reader\" to ServiceAccount \"prometheus/monitoring\""
        )
    );
    assert_eq!(
        allowed(&sar(PROMETHEUS, SA_GROUPS, node_metrics("n1")))["allowed"],
        true
    );
    // The subject is who the spec says, nothing added: without the service account's name the
    // groups alone are not bound.
    assert_eq!(
        allowed(&sar("", SA_GROUPS, metrics_url()))["allowed"],
        false
    );
    // Another verb, another path: not allowed.
    let post = json!({"nonResourceAttributes": {"path": "/metrics", "verb": "post"}});
    assert_eq!(allowed(&sar(PROMETHEUS, SA_GROUPS, post))["allowed"], false);
    // The Node authorizer answers for node subjects as for their own requests.
    let own = json!({"resourceAttributes": {"verb": "get", "resource": "nodes", "name": "n1"}});
    assert_eq!(
        allowed(&sar("system:node:n1", &["system:nodes"], own))["allowed"],
        true
    );

    let err = create(&server, &node, &sar("", &[], metrics_url())).unwrap_err();
    assert!(
        err.contains(
            "spec.user: Invalid value: \"\": at least one of user or group must be specified"
        ),
        "{err}"
    );
    let both = json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                      "resourceAttributes": {"verb": "get", "resource": "nodes"}});
    let err = create(&server, &node, &sar(PROMETHEUS, SA_GROUPS, both)).unwrap_err();
    assert!(
        err.contains(
            "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        ),
        "{err}"
    );
}

const DELEGATOR: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: proxy-delegator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects:
- {kind: ServiceAccount, name: proxy, namespace: mco}
"#;

#[test]
fn reviews_need_the_create_permission_system_auth_delegator_grants() {
    let server = TestApiServer::start_with(ServerOptions::rbac()).unwrap();
    let admin = server.kubeconfig().to_path_buf();
    let proxy = server.dir().join("proxy.kubeconfig");
    server
        .write_service_account_kubeconfig(&proxy, "mco", "proxy")
        .unwrap();
    let token = server.token_for_identity(&Identity::admin());
    let err = create(&server, &proxy, &token_review(&token)).unwrap_err();
    assert!(
        err.contains("tokenreviews.authentication.k8s.io is forbidden: User \"system:serviceaccount:mco:proxy\" cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope"),
        "{err}"
    );
    let file = server.dir().join("delegator.yaml");
    std::fs::write(&file, DELEGATOR).unwrap();
    let bind = kubectl(&server, &admin, &["apply", "-f", file.to_str().unwrap()]);
    assert!(bind.status.success());
    let answer = create(&server, &proxy, &token_review(&token)).unwrap();
    assert_eq!(answer["status"]["user"]["username"], "admin");
    let answer = create(&server, &proxy, &sar(PROMETHEUS, SA_GROUPS, metrics_url())).unwrap();
    assert_eq!(answer["status"]["allowed"], false);

    // Reviews are never stored: neither listed nor fetched.
    let list = kubectl(&server, &admin, &["get", "tokenreviews"]);
    assert!(!list.status.success());

    let resources = kubectl(
        &server,
        &admin,
        &["api-resources", "--no-headers", "-o", "wide"],
    );
    let text = String::from_utf8_lossy(&resources.stdout);
    for (name, group, kind) in [
        ("tokenreviews", "authentication.k8s.io/v1", "TokenReview"),
        (
            "subjectaccessreviews",
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
        ),
    ] {
        let row: Vec<&str> = text
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not in api-resources: {text}"))
            .split_whitespace()
            .collect();
        assert_eq!(row[1..5], [group, "false", kind, "create"], "{row:?}");
    }
}
