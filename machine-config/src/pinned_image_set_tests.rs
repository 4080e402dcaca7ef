use serde_json::json;

use super::*;

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn with_digest(name: &str) -> String {
    format!("{name}@{DIGEST}")
}

#[test]
fn image_references_follow_the_crd_rules() {
    let good = [
        "quay.io/openshift-release-dev/ocp-v4.0-art-dev",
        "quay.io/app",
        "registry.example.com:5000/ns/name.with.dots",
        "127.0.0.1:45123/test/app",
        "a.b//name",
        "my-registry.local/ns_1/x-y_z",
    ];
    for name in good {
        assert_eq!(check_image_ref(&with_digest(name)), Ok(()), "{name}");
    }
    let bad_name = [
        "localhost/app",         // the host needs a dot
        "quay.io",               // no path
        "quay.io/a/b/c",         // two namespaces
        "quay.io:1/app",         // a port of one digit
        "quay.io:123456/app",    // six
        "quay.io/ns.dotted/app", // a dot in the namespace
        "qu_ay.io/app",          // an underscore in the host
        "docker://quay.io/app",  // a scheme
    ];
    for name in bad_name {
        assert_eq!(
            check_image_ref(&with_digest(name)),
            Err(NAME_MESSAGE.to_string()),
            "{name}"
        );
    }
    let bad_digest = [
        "quay.io/app:latest".to_string(),
        "quay.io/app@sha256:abc".to_string(),
        format!(
            "quay.io/app@{}",
            DIGEST.to_uppercase().replace("SHA256", "sha256")
        ),
        format!("quay.io/app@sha512:{}", &DIGEST[7..]),
        format!("quay.io/app@{DIGEST}@{DIGEST}"),
    ];
    for image in &bad_digest {
        assert_eq!(
            check_image_ref(image),
            Err(DIGEST_MESSAGE.to_string()),
            "{image}"
        );
    }
    let long = with_digest(&format!("quay.io/{}", "a".repeat(400)));
    assert!(check_image_ref(&long).unwrap_err().contains("1 to 447"));
    assert!(check_image_ref("").is_err());
}

fn set(name: &str, labels: serde_json::Value, images: &[&str]) -> PinnedImageSet {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "PinnedImageSet",
        "metadata": {"name": name, "labels": labels, "generation": 3, "uid": "u-1"},
        "spec": {"pinnedImages": images.iter().map(|i| json!({"name": i})).collect::<Vec<_>>()},
    }))
    .unwrap()
}

#[test]
fn a_set_is_validated_naming_the_set_and_the_entry() {
    let a = with_digest("quay.io/a");
    let ok = set("s", json!({}), &[&a]);
    assert_eq!(ok.validate(), Ok(()));
    assert_eq!((ok.name(), ok.generation(), ok.uid()), ("s", 3, "u-1"));
    let e = set("s", json!({}), &[&a, "quay.io/b:1"])
        .validate()
        .unwrap_err();
    assert_eq!(
        e,
        format!(
            "PinnedImageSet \"s\": spec.pinnedImages[1].name \"quay.io/b:1\": {DIGEST_MESSAGE}"
        )
    );
    let e = set("s", json!({}), &[&a, &a]).validate().unwrap_err();
    assert!(e.contains("spec.pinnedImages[1]: Duplicate value"), "{e}");
    let e = set("s", json!({}), &[]).validate().unwrap_err();
    assert!(e.contains("must have 1 to 500 items, it has 0"), "{e}");
}

fn pool(name: &str, selector: serde_json::Value) -> MachineConfigPool {
    MachineConfigPool::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name},
        "spec": {"machineConfigSelector": selector},
    }))
    .unwrap()
}

#[test]
fn a_pool_lists_the_sets_its_selector_selects_sorted_by_name() {
    let role = "machineconfiguration.openshift.io/role";
    let sets = vec![
        set("z-worker", json!({role: "worker"}), &[]),
        set("a-worker", json!({role: "worker"}), &[]),
        set("master", json!({role: "master"}), &[]),
        set("unlabelled", json!({}), &[]),
    ];
    let worker = pool("worker", json!({"matchLabels": {role: "worker"}}));
    assert_eq!(
        pool_set_names(&worker, &sets),
        Some(vec!["a-worker".to_string(), "z-worker".to_string()])
    );
    let expr = pool(
        "infra",
        json!({"matchExpressions": [{"key": role, "operator": "In", "values": ["worker", "master"]}]}),
    );
    assert_eq!(pool_set_names(&expr, &sets).unwrap().len(), 3);
    // `{}` is left alone; no selector selects nothing.
    assert_eq!(pool_set_names(&pool("all", json!({})), &sets), None);
    assert_eq!(
        pool_set_names(&pool("none", serde_json::Value::Null), &sets),
        Some(vec![])
    );
}

#[test]
fn the_pool_field_round_trips_and_is_left_out_when_empty() {
    let mut p = pool("worker", json!({"matchLabels": {"a": "b"}}));
    assert!(!p.to_json().contains("pinnedImageSets"));
    p.spec.pinned_image_sets = vec![PinnedImageRef { name: "s".into() }];
    let back: MachineConfigPool = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(back.spec.pinned_image_sets, p.spec.pinned_image_sets);
    let null = MachineConfigPool::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "p"}, "spec": {"pinnedImageSets": null},
    }))
    .unwrap();
    assert!(null.spec.pinned_image_sets.is_empty());
}
