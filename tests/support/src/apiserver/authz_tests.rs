//! Table tests of the authorizer chain: system:masters, Node, RBAC over stored objects and the
//! bootstrap roles.

use serde_json::{Value, json};

use super::attributes::Attributes;
use super::authz::{AuthorizationMode, authorize, forbidden, rules_for};
use super::bootstrap;
use super::identity::Identity;
use super::store::Store;

const MCO: &str = "machineconfiguration.openshift.io";

pub(super) fn store() -> std::sync::Arc<Store> {
    let store = Store::new();
    for object in bootstrap::objects() {
        store.seed(object).unwrap();
    }
    let rbac = |kind: &str, body: Value| {
        let mut object = body;
        object["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
        object["kind"] = json!(kind);
        store.seed(object).unwrap();
    };
    rbac(
        "ClusterRole",
        json!({"metadata": {"name": "mco:reader"}, "rules": [
            {"apiGroups": [MCO], "resources": ["machineconfigs", "machineconfigpools"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [MCO], "resources": ["machineconfignodes/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mco-config"], "verbs": ["get"]},
            {"nonResourceURLs": ["/metrics*"], "verbs": ["get"]},
        ]}),
    );
    rbac(
        "ClusterRoleBinding",
        json!({"metadata": {"name": "mco:reader"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "mco:reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "companion", "namespace": "mco"},
                            {"kind": "Group", "name": "system:nodes"}]}),
    );
    rbac(
        "Role",
        json!({"metadata": {"name": "leases", "namespace": "mco"}, "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["*"], "verbs": ["*"]},
            {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["update"]},
        ]}),
    );
    rbac(
        "RoleBinding",
        json!({"metadata": {"name": "leases", "namespace": "mco"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
               "subjects": [{"kind": "ServiceAccount", "name": "companion"}]}),
    );
    rbac(
        "ClusterRoleBinding",
        json!({"metadata": {"name": "dangling"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "missing"},
               "subjects": [{"kind": "User", "name": "carol"}]}),
    );
    store
        .seed(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default"}, "spec": {"nodeName": "n1",
            "volumes": [{"name": "v", "secret": {"secretName": "in-volume"}},
                        {"name": "p", "projected": {"sources": [{"configMap": {"name": "projected"}}]}}],
            "imagePullSecrets": [{"name": "pull"}],
            "containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "in-env", "key": "k"}}}],
                            "envFrom": [{"configMapRef": {"name": "env-from"}}]}]}}))
        .unwrap();
    store
}

fn attrs(spec: &str) -> Attributes {
    // "verb group resource[/sub] namespace name" with "-" for empty, or "verb /path".
    let parts: Vec<&str> = spec.split(' ').collect();
    if let [verb, path] = parts.as_slice() {
        return Attributes::non_resource(verb, path);
    }
    let field = |i: usize| parts.get(i).copied().filter(|p| *p != "-").unwrap_or("");
    Attributes::resource(field(0), field(1), field(2), field(3), field(4))
}

#[test]
fn who_may_do_what() {
    let store = store();
    let node = Identity::node("n1").authenticated();
    let other_node = Identity::node("n2").authenticated();
    let companion = Identity::service_account("mco", "companion").authenticated();
    let elsewhere = Identity::service_account("other", "companion").authenticated();
    let admin = Identity::admin().authenticated();
    let carol = Identity::new("carol", &[]).authenticated();
    let anonymous = Identity::anonymous();
    let mut list_own_pods = attrs("list - pods - -");
    list_own_pods.field_equals = vec![("spec.nodeName".into(), "n1".into())];
    let cases: Vec<(&Identity, Attributes, bool, &str)> = vec![
        (&admin, attrs("delete - nodes - n9"), true, "SystemMasters"),
        (&node, attrs("get - nodes - n1"), true, "Node"),
        (&node, attrs("get - nodes - n2"), false, ""),
        (&node, attrs("list - nodes - -"), false, ""),
        (&node, attrs("patch - nodes - n2"), true, "Node"),
        (&node, attrs("patch - nodes/status - n1"), true, "Node"),
        (&node, attrs("get - pods default p1"), true, "Node"),
        (&node, attrs("get - pods default p2"), false, ""),
        (&node, list_own_pods, true, "Node"),
        (&node, attrs("list - pods - -"), false, ""),
        // the graph: secrets and configmaps a pod bound to the node references, by name only
        (
            &node,
            attrs("get - secrets default in-volume"),
            true,
            "Node",
        ),
        (&node, attrs("get - secrets default in-env"), true, "Node"),
        (&node, attrs("get - secrets default pull"), true, "Node"),
        (
            &node,
            attrs("get - configmaps default projected"),
            true,
            "Node",
        ),
        (
            &node,
            attrs("get - configmaps default env-from"),
            true,
            "Node",
        ),
        (&node, attrs("get - secrets default projected"), false, ""),
        (&node, attrs("get - secrets other in-volume"), false, ""),
        (&node, attrs("list - secrets default -"), false, ""),
        (
            &node,
            attrs("update - secrets default in-volume"),
            false,
            "",
        ),
        (
            &other_node,
            attrs("get - secrets default in-volume"),
            false,
            "",
        ),
        (
            &node,
            attrs("create - pods/eviction default p1"),
            true,
            "Node",
        ),
        (&node, attrs("create - events default -"), true, "Node"),
        (
            &node,
            attrs("get coordination.k8s.io leases kube-node-lease n1"),
            true,
            "Node",
        ),
        (
            &node,
            attrs("get coordination.k8s.io leases default n1"),
            false,
            "",
        ),
        // Through RBAC (system:nodes is bound to mco:reader).
        (
            &node,
            attrs(&format!("list {MCO} machineconfigs - -")),
            true,
            "RBAC",
        ),
        (
            &node,
            attrs(&format!("patch {MCO} machineconfignodes/status - n1")),
            true,
            "RBAC",
        ),
        (
            &node,
            attrs(&format!("patch {MCO} machineconfignodes - n1")),
            false,
            "",
        ),
        (
            &companion,
            attrs(&format!("watch {MCO} machineconfigpools - -")),
            true,
            "RBAC",
        ),
        (
            &companion,
            attrs(&format!("update {MCO} machineconfigpools - -")),
            false,
            "",
        ),
        (
            &companion,
            attrs("get - configmaps mco mco-config"),
            true,
            "RBAC",
        ),
        (&companion, attrs("get - configmaps mco other"), false, ""),
        (&companion, attrs("list - configmaps mco -"), false, ""),
        (
            &companion,
            attrs("create coordination.k8s.io leases mco -"),
            true,
            "RBAC",
        ),
        (
            &companion,
            attrs("create coordination.k8s.io leases default -"),
            false,
            "",
        ),
        (
            &companion,
            attrs("update apps deployments/status mco d"),
            true,
            "RBAC",
        ),
        (
            &companion,
            attrs("update apps deployments mco d"),
            false,
            "",
        ),
        (
            &elsewhere,
            attrs("create coordination.k8s.io leases mco -"),
            false,
            "",
        ),
        (&companion, attrs("get /metrics/cadvisor"), true, "RBAC"),
        (&companion, attrs("get /apis/policy/v1"), true, "RBAC"),
        (&companion, attrs("post /apis"), false, ""),
        (&carol, attrs("get - nodes - n1"), false, ""),
        (&anonymous, attrs("get /healthz"), true, "RBAC"),
        (&anonymous, attrs("get /api"), false, ""),
    ];
    for (who, attrs, allowed, by) in cases {
        let verdict = authorize(AuthorizationMode::NodeRbac, &store, who, &attrs);
        assert_eq!(
            (verdict.allowed, verdict.authorizer),
            (allowed, by),
            "{} {attrs:?}: {}",
            who.user,
            verdict.reason
        );
        let open = authorize(AuthorizationMode::AlwaysAllow, &store, who, &attrs);
        assert!(open.allowed && open.authorizer == "AlwaysAllow");
    }
}

#[test]
fn forbidden_messages_carry_the_reasons() {
    let store = store();
    let check = |who: &Identity, attrs: Attributes, message: &str| {
        let verdict = authorize(AuthorizationMode::NodeRbac, &store, who, &attrs);
        assert!(!verdict.allowed);
        let err = forbidden(who, &attrs, &verdict.reason);
        assert_eq!((err.code, err.reason), (403, "Forbidden"));
        assert_eq!(err.message, message);
    };
    let node = Identity::node("n1").authenticated();
    check(
        &node,
        attrs("get - nodes - n2"),
        "nodes \"n2\" is forbidden: User \"system:node:n1\" cannot get resource \"nodes\" in API group \"\" at the cluster scope: node 'n1' cannot read 'n2', only its own Node object",
    );
    check(
        &node,
        attrs(&format!("delete {MCO} machineconfigs - 00-worker")),
        "machineconfigs.machineconfiguration.openshift.io \"00-worker\" is forbidden: User \"system:node:n1\" cannot delete resource \"machineconfigs\" in API group \"machineconfiguration.openshift.io\" at the cluster scope",
    );
    check(
        &Identity::service_account("mco", "companion").authenticated(),
        attrs("list - pods mco -"),
        "pods is forbidden: User \"system:serviceaccount:mco:companion\" cannot list resource \"pods\" in API group \"\" in the namespace \"mco\"",
    );
    check(
        &Identity::new("carol", &[]).authenticated(),
        attrs("get - nodes - n1"),
        "nodes \"n1\" is forbidden: User \"carol\" cannot get resource \"nodes\" in API group \"\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found",
    );
    check(
        &Identity::anonymous(),
        attrs("get /api"),
        "forbidden: User \"system:anonymous\" cannot get path \"/api\"",
    );
    let unknown = Identity::new("bob", &["system:nodes"]).authenticated();
    let verdict = authorize(
        AuthorizationMode::NodeRbac,
        &store,
        &unknown,
        &attrs("get - nodes - n1"),
    );
    assert_eq!(verdict.reason, "unknown node for user \"bob\"");
}

#[test]
fn rules_reviews_list_the_bound_rules() {
    let store = store();
    let companion = Identity::service_account("mco", "companion").authenticated();
    let (resource, non_resource, incomplete, error) =
        rules_for(AuthorizationMode::NodeRbac, &store, &companion, "mco");
    assert!(!incomplete && error.is_empty());
    let names: Vec<String> = resource.iter().map(|r| r.resources.join(",")).collect();
    assert!(
        names.contains(&"machineconfigs,machineconfigpools".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"*".to_string()),
        "the Role in mco: {names:?}"
    );
    assert!(
        non_resource
            .iter()
            .any(|r| r.non_resource_urls == ["/metrics*"])
    );
    let (resource, _, _, _) = rules_for(AuthorizationMode::NodeRbac, &store, &companion, "default");
    assert!(
        !resource.iter().any(|r| r.resources == ["*"]),
        "no Role outside mco"
    );
    let node = Identity::node("n1").authenticated();
    let (_, _, incomplete, error) =
        rules_for(AuthorizationMode::NodeRbac, &store, &node, "default");
    assert!(incomplete);
    assert_eq!(
        error,
        "node authorizer does not support user rule resolution"
    );
}
