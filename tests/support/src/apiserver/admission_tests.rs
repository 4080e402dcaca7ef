//! Table tests of NodeRestriction admission, and of admission on the store's write paths.

use serde_json::{Value, json};

use super::admission::{AdmissionRequest, Operation, node_restriction};
use super::identity::Identity;
use super::registry::{RESOURCES, index_of};
use super::writes::Write;

fn admit(
    who: &Identity,
    plural: &str,
    op: Operation,
    sub: &str,
    old: Option<Value>,
    new: Option<Value>,
) -> Result<(), String> {
    let def = &RESOURCES[index_of(plural)];
    let ns = old
        .as_ref()
        .or(new.as_ref())
        .and_then(|o| o.pointer("/metadata/namespace"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let request = AdmissionRequest {
        operation: op,
        def,
        subresource: sub,
        namespace: &ns,
        old: old.as_ref(),
        new: new.as_ref(),
    };
    node_restriction(who, &request).map_err(|e| e.message)
}

#[test]
fn node_restriction_narrows_node_writes() {
    let n1 = Identity::node("n1").authenticated();
    let node = |name: &str, labels: Value, taints: Value| json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}});
    let plain = node("n1", json!({"kubernetes.io/hostname": "n1"}), json!([]));
    let update = |new: Value| {
        admit(
            &n1,
            "nodes",
            Operation::Update,
            "",
            Some(plain.clone()),
            Some(new),
        )
    };
    assert_eq!(
        update(node(
            "n1",
            json!({"kubernetes.io/hostname": "n1", "mco.example/x": "y"}),
            json!([])
        )),
        Ok(())
    );
    assert_eq!(
        update(node("n1", json!({"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/infra": ""}), json!([]))),
        Err("nodes \"n1\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/infra".into())
    );
    assert_eq!(
        update(node(
            "n1",
            json!({"kubernetes.io/hostname": "n1"}),
            json!([{"key": "k", "effect": "NoSchedule"}])
        )),
        Err("nodes \"n1\" is forbidden: node \"n1\" is not allowed to modify taints".into())
    );
    assert_eq!(
        admit(
            &n1,
            "nodes",
            Operation::Update,
            "status",
            Some(node("n2", json!({}), json!([]))),
            Some(node("n2", json!({}), json!([])))
        ),
        Err("nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\"".into())
    );
    let pod = |name: &str, node: &str| json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": node}});
    assert_eq!(
        admit(
            &n1,
            "pods",
            Operation::Create,
            "eviction",
            Some(pod("p1", "n1")),
            Some(json!({}))
        ),
        Ok(())
    );
    assert_eq!(
        admit(&n1, "pods", Operation::Create, "eviction", Some(pod("p2", "n2")), Some(json!({}))),
        Err("pods \"p2\" is forbidden: node n1 can only evict pods with spec.nodeName set to itself".into())
    );
    assert_eq!(
        admit(&n1, "pods", Operation::Delete, "", Some(pod("p2", "n2")), None),
        Err("pods \"p2\" is forbidden: node \"n1\" can only delete pods with spec.nodeName set to itself".into())
    );
    assert!(
        admit(
            &n1,
            "pods",
            Operation::Create,
            "",
            None,
            Some(pod("p3", "n1"))
        )
        .unwrap_err()
        .contains("can only create mirror pods")
    );
    let lease = |ns: &str, name: &str| json!({"metadata": {"name": name, "namespace": ns}});
    assert_eq!(
        admit(
            &n1,
            "leases",
            Operation::Create,
            "",
            None,
            Some(lease("kube-node-lease", "n1"))
        ),
        Ok(())
    );
    assert_eq!(
        admit(&n1, "leases", Operation::Create, "", None, Some(lease("mco", "fleetlock"))),
        Err("leases.coordination.k8s.io \"fleetlock\" is forbidden: can only access leases in the \"kube-node-lease\" system namespace".into())
    );
    let companion = Identity::service_account("mco", "companion").authenticated();
    assert_eq!(
        admit(
            &companion,
            "nodes",
            Operation::Delete,
            "",
            Some(plain.clone()),
            None
        ),
        Ok(())
    );
}

#[test]
fn bootstrap_roles_are_stored_and_served() {
    let store = super::authz_tests::store();
    let roles = store
        .list(
            index_of("clusterroles"),
            None,
            &Default::default(),
            &Default::default(),
        )
        .0;
    let names: Vec<&str> = roles
        .iter()
        .filter_map(|r| r.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    for name in [
        "cluster-admin",
        "system:basic-user",
        "system:discovery",
        "system:node",
        "system:public-info-viewer",
    ] {
        assert!(names.contains(&name), "{names:?}");
    }
    // Admission runs on writes through the store.
    let refuse =
        |_: &AdmissionRequest| Err(super::status::ApiError::forbidden("", "nodes", "x", "no"));
    let write = Write {
        admit: &refuse,
        ..Write::main()
    };
    let err = store
        .create(
            index_of("nodes"),
            None,
            json!({"metadata": {"name": "x"}}),
            &write,
        )
        .unwrap_err();
    assert_eq!(err.code, 403);
    assert!(store.get(index_of("nodes"), None, "x").is_err());
}

/// The shipped MachineConfigNode policy: a node writes only the MCN named like itself, spec
/// and status alike; other identities are not narrowed (RBAC decides).
#[test]
fn nodes_write_only_their_own_machine_config_node() {
    let n1 = Identity::node("n1").authenticated();
    let mcn = |name: &str| json!({"metadata": {"name": name}, "spec": {"node": {"name": name}}});
    for (op, sub) in [
        (Operation::Create, ""),
        (Operation::Update, ""),
        (Operation::Update, "status"),
    ] {
        let old = (op == Operation::Update).then(|| mcn("n1"));
        assert_eq!(
            admit(&n1, "machineconfignodes", op, sub, old, Some(mcn("n1"))),
            Ok(())
        );
        let old = (op == Operation::Update).then(|| mcn("n2"));
        let err = admit(&n1, "machineconfignodes", op, sub, old, Some(mcn("n2"))).unwrap_err();
        assert_eq!(
            err,
            "machineconfignodes.machineconfiguration.openshift.io \"n2\" is forbidden: \
             ValidatingAdmissionPolicy 'mco-agent-machineconfignode-owner' with binding \
             'mco-agent-machineconfignode-owner' denied request: updates to MCN n2 can only be \
             done from the MCN's owner node"
        );
    }
    let admin = Identity::admin().authenticated();
    assert_eq!(
        admit(
            &admin,
            "machineconfignodes",
            Operation::Create,
            "",
            None,
            Some(mcn("n2"))
        ),
        Ok(())
    );
}
