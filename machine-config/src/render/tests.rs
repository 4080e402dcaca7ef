use super::*;
use serde_json::json;

fn mc(name: &str, role: Option<&str>, extra_labels: &[(&str, &str)], spec: Value) -> MachineConfig {
    let mut labels = serde_json::Map::new();
    if let Some(role) = role {
        labels.insert(ROLE_LABEL.into(), json!(role));
    }
    for (k, v) in extra_labels {
        labels.insert((*k).into(), json!(v));
    }
    MachineConfig::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .unwrap()
}

fn file(path: &str, data: &str) -> Value {
    json!({"path": path, "mode": 420, "contents": {"source": format!("data:,{data}")}})
}

fn ign(files: Vec<Value>) -> Value {
    json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}})
}

fn pool(name: &str, selector: Value) -> MachineConfigPool {
    MachineConfigPool::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"machineConfigSelector": selector,
                 "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}},
    }))
    .unwrap()
}

fn worker_pool() -> MachineConfigPool {
    pool("worker", json!({"matchLabels": {ROLE_LABEL: "worker"}}))
}

fn infra_pool() -> MachineConfigPool {
    pool(
        "infra",
        json!({"matchExpressions": [{"key": ROLE_LABEL, "operator": "In", "values": ["worker", "infra"]}]}),
    )
}

fn fleet() -> Vec<MachineConfig> {
    vec![
        mc(
            "99-worker-ssh",
            Some("worker"),
            &[],
            json!({"config": ign(vec![file("/etc/motd", "worker")])}),
        ),
        mc(
            "00-worker",
            Some("worker"),
            &[],
            json!({"config": ign(vec![file("/etc/a", "a")]), "kernelArguments": ["w=1"]}),
        ),
        mc(
            "00-master",
            Some("master"),
            &[],
            json!({"config": ign(vec![file("/etc/a", "master")])}),
        ),
        mc(
            "50-infra",
            Some("infra"),
            &[],
            json!({"config": ign(vec![file("/etc/motd", "infra")]), "kernelArguments": ["i=1"]}),
        ),
        mc(
            "90-node-a",
            Some("worker"),
            &[(NODE_LABEL, "node-a")],
            json!({"config": ign(vec![file("/etc/motd", "node-a")])}),
        ),
    ]
}

fn files_of(mc: &MachineConfig) -> Vec<(String, String)> {
    let config = mc.spec.config.as_ref().unwrap().to_value().unwrap();
    config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["contents"]["source"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn pools_select_and_order_their_configs() {
    let fleet = fleet();
    let names = |p: &MachineConfigPool| -> Vec<String> {
        select_for_pool(p, &fleet)
            .iter()
            .map(|m| m.name().to_string())
            .collect()
    };
    // per-node configs never belong to a pool; worker-role configs come first in a custom pool
    assert_eq!(names(&worker_pool()), ["00-worker", "99-worker-ssh"]);
    assert_eq!(
        names(&infra_pool()),
        ["00-worker", "99-worker-ssh", "50-infra"]
    );

    let worker = render_pool(&worker_pool(), &fleet, &RenderOptions::default()).unwrap();
    assert_eq!(
        files_of(&worker.config),
        [
            ("/etc/a".into(), "data:,a".into()),
            ("/etc/motd".into(), "data:,worker".into())
        ]
    );
    let infra = render_pool(&infra_pool(), &fleet, &RenderOptions::default()).unwrap();
    // the custom pool's config overrides the worker config although its name sorts first
    assert_eq!(
        files_of(&infra.config)[1],
        ("/etc/motd".into(), "data:,infra".into())
    );
    assert_eq!(infra.config.spec.kernel_arguments, ["w=1", "i=1"]);
    let sources: Vec<_> = infra
        .sources
        .iter()
        .map(|r| r.name.clone().unwrap())
        .collect();
    assert_eq!(sources, ["00-worker", "50-infra", "99-worker-ssh"]);
    let owner = &infra.config.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("MachineConfigPool", "infra", "uid-infra")
    );
    assert!(infra.config.name().starts_with("rendered-infra-"));
}

#[test]
fn spec_merge_rules() {
    let options = RenderOptions {
        os_image_url: "quay.io/base@sha256:1".into(),
        base_os_extensions_container_image: "quay.io/ext@sha256:1".into(),
    };
    type Case = (&'static str, Vec<Value>, Result<Value, &'static str>);
    let cases: Vec<Case> = vec![
        (
            "defaults: base image, default kernel, overwrite true",
            vec![json!({"config": ign(vec![file("/a", "x")])})],
            Ok(
                json!({"osImageURL": "quay.io/base@sha256:1", "kernelType": "default", "fips": false,
                "overwrite": [true]}),
            ),
        ),
        (
            "explicit overwrite false kept; fips OR-ed; kargs and extensions concatenated",
            vec![
                json!({"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/a", "overwrite": false}]}},
                       "kernelArguments": ["a", "b"], "extensions": ["usbguard"], "fips": true}),
                json!({"kernelArguments": ["a"], "extensions": ["sysstat"]}),
            ],
            Ok(
                json!({"fips": true, "kernelArguments": ["a", "b", "a"], "extensions": ["usbguard", "sysstat"],
                "overwrite": [false]}),
            ),
        ),
        (
            "a user osImageURL wins, a generated one does not",
            vec![
                json!({"osImageURL": "quay.io/user@sha256:2"}),
                json!({"osImageURL": "quay.io/generated@sha256:3", "generated": true}),
            ],
            Ok(json!({"osImageURL": "quay.io/user@sha256:2"})),
        ),
        (
            "realtime wins over a later default",
            vec![
                json!({"kernelType": "realtime"}),
                json!({"kernelType": "default"}),
            ],
            Ok(json!({"kernelType": "realtime"})),
        ),
        (
            "64k-pages later wins",
            vec![
                json!({"kernelType": "realtime"}),
                json!({"kernelType": "64k-pages"}),
            ],
            Ok(json!({"kernelType": "64k-pages"})),
        ),
        (
            "kernel-devel needs the default kernel",
            vec![json!({"kernelType": "realtime", "extensions": ["kernel-devel"]})],
            Err("installing kernel-devel extension is not supported with kernelType: realtime"),
        ),
        (
            "contents carry their compression",
            vec![
                json!({"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
                    {"path": "/z", "contents": {"source": "data:;base64,H4sIAAAAAAAA/wMAAAAAAAAAAAA=", "compression": "gzip"}}]}}}),
                json!({"config": ign(vec![file("/z", "plain")])}),
            ],
            Ok(json!({"compression": [null]})),
        ),
    ];
    for (name, specs, expected) in cases {
        let configs: Vec<MachineConfig> = specs
            .into_iter()
            .enumerate()
            .map(|(i, mut spec)| {
                let generated = spec.as_object_mut().unwrap().remove("generated").is_some();
                let mut m = mc(&format!("{i:02}"), Some("worker"), &[], spec);
                if generated {
                    m.metadata.annotations =
                        Some([(GENERATED_BY_ANNOTATION.to_string(), "v1".to_string())].into());
                }
                m
            })
            .collect();
        let refs: Vec<&MachineConfig> = configs.iter().collect();
        let got = merge_specs(&refs, &options, "pool test");
        match expected {
            Err(message) => assert_eq!(got.unwrap_err().to_string(), message, "{name}"),
            Ok(want) => {
                let spec = got.unwrap();
                let as_json = serde_json::to_value(&spec).unwrap();
                for (key, value) in want.as_object().unwrap() {
                    let got = match key.as_str() {
                        "overwrite" | "compression" => {
                            let field = if key == "overwrite" {
                                "/overwrite"
                            } else {
                                "/contents/compression"
                            };
                            json!(
                                spec.config.as_ref().unwrap().to_value().unwrap()["storage"]["files"]
                                    .as_array()
                                    .unwrap()
                                    .iter()
                                    .map(|f| f.pointer(field).cloned().unwrap_or(Value::Null))
                                    .collect::<Vec<_>>()
                            )
                        }
                        "fips" => json!(spec.fips),
                        _ => as_json[key].clone(),
                    };
                    assert_eq!(&got, value, "{name}: {key}");
                }
            }
        }
    }
}

#[test]
fn rendered_name_is_stable_and_tracks_every_change() {
    let fleet = fleet();
    let options = RenderOptions::default();
    let first = render_pool(&worker_pool(), &fleet, &options).unwrap();
    let mut reversed = fleet.clone();
    reversed.reverse();
    assert_eq!(
        render_pool(&worker_pool(), &reversed, &options).unwrap(),
        first
    );

    let mut changed = fleet.clone();
    changed[1].spec.kernel_arguments.push("extra".into());
    assert_ne!(
        render_pool(&worker_pool(), &changed, &options)
            .unwrap()
            .config
            .name(),
        first.config.name()
    );
    let other_base = RenderOptions {
        os_image_url: "quay.io/os@sha256:9".into(),
        ..RenderOptions::default()
    };
    assert_ne!(
        render_pool(&worker_pool(), &fleet, &other_base)
            .unwrap()
            .config
            .name(),
        first.config.name()
    );
    // a master-only change does not touch the worker pool
    let mut master = fleet.clone();
    master[2].spec.fips = true;
    assert_eq!(
        render_pool(&worker_pool(), &master, &options)
            .unwrap()
            .config
            .name(),
        first.config.name()
    );
}

#[test]
fn per_node_configs_layer_on_the_pool() {
    let fleet = fleet();
    let options = RenderOptions::default();
    let base = render_pool(&worker_pool(), &fleet, &options)
        .unwrap()
        .config;
    assert_eq!(
        render_node(&worker_pool(), &base, "node-b", &fleet).unwrap(),
        None
    );
    let node = render_node(&worker_pool(), &base, "node-a", &fleet)
        .unwrap()
        .unwrap();
    assert!(
        node.config.name().starts_with("rendered-worker-node-a-"),
        "{}",
        node.config.name()
    );
    assert_eq!(
        files_of(&node.config),
        [
            ("/etc/a".into(), "data:,a".into()),
            ("/etc/motd".into(), "data:,node-a".into())
        ]
    );
    assert_eq!(node.config.spec.kernel_arguments, ["w=1"]);
    assert_eq!(node.config.spec.kernel_type, "default");
    let sources: Vec<_> = node
        .sources
        .iter()
        .map(|r| r.name.clone().unwrap())
        .collect();
    assert_eq!(sources, [base.name(), "90-node-a"]);
    let labels = node.config.metadata.labels.clone().unwrap();
    assert_eq!(labels[RENDERED_FOR_NODE_LABEL], "node-a");
    assert_eq!(
        node.config.metadata.annotations.clone().unwrap()[BASE_CONFIG_ANNOTATION],
        base.name()
    );
    // same inputs, same name; the base's image carries over unless the node's config sets one
    assert_eq!(
        render_node(&worker_pool(), &base, "node-a", &fleet)
            .unwrap()
            .unwrap()
            .config
            .name(),
        node.config.name()
    );
    let based = RenderOptions {
        os_image_url: "quay.io/os@sha256:5".into(),
        ..RenderOptions::default()
    };
    let base2 = render_pool(&worker_pool(), &fleet, &based).unwrap().config;
    let node2 = render_node(&worker_pool(), &base2, "node-a", &fleet)
        .unwrap()
        .unwrap();
    assert_eq!(node2.config.spec.os_image_url, "quay.io/os@sha256:5");
    assert_ne!(node2.config.name(), node.config.name());
}

#[test]
fn pools_without_configs_are_errors() {
    let fleet = fleet();
    let options = RenderOptions::default();
    let none = pool("none", json!({"matchLabels": {ROLE_LABEL: "nothing"}}));
    assert_eq!(
        render_pool(&none, &fleet, &options)
            .unwrap_err()
            .to_string(),
        "no MachineConfigs found matching selector for pool none"
    );
    let all = pool("all", json!({}));
    assert!(matches!(
        render_pool(&all, &fleet, &options),
        Err(RenderError::NoSelector { .. })
    ));
}
