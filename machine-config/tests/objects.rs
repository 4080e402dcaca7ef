//! MachineConfig (YAML 1.1 and JSON), MachineConfigPool and MachineConfiguration objects.

use std::collections::BTreeMap;

use machine_config::document::parse_value;
use machine_config::pool::MachineConfigPool;
use machine_config::{MachineConfig, MachineConfiguration, SpecVersion};

const SEED_YAML: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-examplecorp-chrony
  labels:
    machineconfiguration.openshift.io/role: worker
  annotations:
    example.com/owner: team-a
  ownerReferences:
  - apiVersion: machineconfiguration.openshift.io/v1
    kind: ControllerConfig
    name: machine-config-controller
    uid: 6f1c0d2e-0000-4000-8000-000000000001
    controller: true
spec:
  config:
    ignition:
      version: 2.2.0
    storage:
      files:
      - contents:
          source: data:text/plain;charset=utf-8;base64,c2VydmVyIGNsb2NrLmV4YW1wbGUuY29tIGlidXJzdAo=
        filesystem: root
        mode: 0644
        path: /etc/chrony.conf
      - contents:
          source: data:,%23!%2Fbin%2Fsh%0Aexit%200%0A
        filesystem: root
        mode: 0755
        path: /usr/local/bin/hello
  kernelArguments:
  - nosmt
  - "systemd.unified_cgroup_hierarchy=1"
  kernelType: realtime
  extensions:
  - usbguard
  fips: false
  osImageURL: quay.io/example/os@sha256:0123
"#;

#[test]
fn seed_yaml_reads_octal_modes_and_data_urls() {
    let mc = MachineConfig::from_slice(SEED_YAML.as_bytes()).unwrap();
    assert_eq!(mc.name(), "50-examplecorp-chrony");
    assert_eq!(mc.config_version(), Some(SpecVersion::V2_2));
    let ign = mc.ignition().unwrap();
    let chrony = &ign.storage.files[0];
    assert_eq!(chrony.path, "/etc/chrony.conf");
    assert_eq!(chrony.mode, Some(0o644));
    assert_eq!(
        chrony.decoded_contents().unwrap(),
        b"server clock.example.com iburst\n"
    );
    let hello = &ign.storage.files[1];
    assert_eq!(hello.mode, Some(0o755));
    assert_eq!(hello.mode, Some(493));
    assert_eq!(hello.decoded_contents().unwrap(), b"#!/bin/sh\nexit 0\n");
    assert_eq!(
        mc.spec.kernel_arguments,
        ["nosmt", "systemd.unified_cgroup_hierarchy=1"]
    );
    assert_eq!(mc.spec.kernel_type, "realtime");
    assert_eq!(mc.spec.extensions, ["usbguard"]);
    assert_eq!(mc.spec.os_image_url, "quay.io/example/os@sha256:0123");
    let labels = mc.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["machineconfiguration.openshift.io/role"], "worker");
    assert_eq!(
        mc.metadata.annotations.as_ref().unwrap()["example.com/owner"],
        "team-a"
    );
    let owners = mc.metadata.owner_references.as_ref().unwrap();
    assert_eq!(owners[0].kind, "ControllerConfig");
    assert_eq!(owners[0].controller, Some(true));
}

#[test]
fn yaml_integer_spellings() {
    // YAML 1.1 as the MCO reads it: a leading zero means octal; 0o is octal too.
    for (spelling, want) in [
        ("0755", 0o755),
        ("0644", 0o644),
        ("0600", 0o600),
        ("0", 0),
        ("420", 420),
        ("0o755", 0o755),
        ("0x1ed", 0x1ed),
    ] {
        let v = parse_value(format!("mode: {spelling}\n").as_bytes()).unwrap();
        assert_eq!(v["mode"].as_i64(), Some(want), "mode: {spelling}");
    }
    // Quoted stays a string; YAML 1.1 booleans are booleans.
    let v = parse_value(b"a: \"0755\"\nb: yes\nc: 3.2.0\n").unwrap();
    assert_eq!(v["a"], "0755");
    assert_eq!(v["b"], true);
    assert_eq!(v["c"], "3.2.0");
}

#[test]
fn json_round_trip_keeps_everything() {
    let mc = MachineConfig::from_slice(SEED_YAML.as_bytes()).unwrap();
    let json = mc.to_json();
    let again = MachineConfig::from_slice(json.as_bytes()).unwrap();
    assert_eq!(again, mc);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["apiVersion"], "machineconfiguration.openshift.io/v1");
    assert_eq!(v["kind"], "MachineConfig");
    assert_eq!(v["spec"]["osImageURL"], "quay.io/example/os@sha256:0123");
    assert_eq!(v["spec"]["config"]["storage"]["files"][1]["mode"], 493);
    assert_eq!(
        v["metadata"]["ownerReferences"][0]["name"],
        "machine-config-controller"
    );
}

#[test]
fn go_style_nulls_and_empty_configs() {
    let json = br#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig",
        "metadata":{"name":"rendered-worker-abc"},
        "spec":{"osImageURL":"","config":null,"kernelArguments":null,"extensions":null,
                "fips":false,"kernelType":""}}"#;
    let mc = MachineConfig::from_slice(json).unwrap();
    assert!(mc.spec.kernel_arguments.is_empty());
    assert_eq!(mc.kernel_type(), "default");
    let ign = mc.ignition().unwrap();
    assert_eq!(ign.ignition.version, "3.5.0");
    assert!(ign.storage.files.is_empty());
    let empty_obj =
        br#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig",
        "metadata":{"name":"x"},"spec":{"config":{}}}"#;
    assert!(
        MachineConfig::from_slice(empty_obj)
            .unwrap()
            .ignition()
            .is_ok()
    );
}

#[test]
fn machineconfig_errors_are_located() {
    let cases: [(&str, &str); 7] = [
        (
            "kind: Pod\napiVersion: v1\n",
            "$.apiVersion: expected \"machineconfiguration.openshift.io/v1\", got \"v1\"; $.kind: expected \"MachineConfig\", got \"Pod\"",
        ),
        ("metadata: {name: x}\n", "$.apiVersion: missing"),
        (
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nspec:\n  config:\n    ignition: {version: 3.2.0}\n    storage: {files: [{path: rel, contents: {source: 'data:,x'}}]}\n",
            "$.spec.config.storage.files.0.path: file \"rel\": path not absolute",
        ),
        (
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nspec:\n  kernelArguments: nosmt\n",
            // a value where a list is expected is never quoted (it may hold what the list would)
            "$.spec.kernelArguments: invalid type: a string of 5 bytes (not shown: it may hold what the list or object would, a file or a key), expected a sequence",
        ),
        // a NUL byte fails when the config is read, not at `rpm-ostree kargs` (found fuzzing)
        (
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nspec:\n  kernelArguments: [nosmt, \"a=\\0\"]\n",
            "$.spec.kernelArguments.1: contains a NUL byte",
        ),
        ("a: [1\n", "invalid YAML"),
        ("{\"a\": ", "invalid JSON"),
    ];
    for (input, want) in cases {
        let e = MachineConfig::from_slice(input.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(want), "input {input:?}: got {e:?}");
    }
}

const POOL: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
  nodeSelector:
    matchExpressions:
    - key: node-role.kubernetes.io/worker
      operator: Exists
    - key: node-role.kubernetes.io/infra
      operator: DoesNotExist
  maxUnavailable: 25%
  paused: false
  configuration:
    name: rendered-worker-0123
    source:
    - apiVersion: machineconfiguration.openshift.io/v1
      kind: MachineConfig
      name: 00-worker
status:
  observedGeneration: 3
  machineCount: 8
  updatedMachineCount: 2
  configuration:
    name: rendered-worker-0001
  conditions:
  - type: Updated
    status: "False"
"#;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn pools_select_and_bound_unavailability() {
    let pool = MachineConfigPool::from_slice(POOL.as_bytes()).unwrap();
    assert_eq!(pool.name(), "worker");
    assert_eq!(pool.spec.configuration.name, "rendered-worker-0123");
    assert_eq!(
        pool.spec.configuration.source[0].name.as_deref(),
        Some("00-worker")
    );
    assert_eq!(pool.status.updated_machine_count, 2);
    assert_eq!(pool.status.conditions[0].status, "False");
    assert!(pool.selects_machine_config(&labels(&[(
        "machineconfiguration.openshift.io/role",
        "worker"
    )])));
    assert!(!pool.selects_machine_config(&labels(&[(
        "machineconfiguration.openshift.io/role",
        "master"
    )])));
    assert!(pool.selects_node(&labels(&[("node-role.kubernetes.io/worker", "")])));
    assert!(!pool.selects_node(&labels(&[
        ("node-role.kubernetes.io/worker", ""),
        ("node-role.kubernetes.io/infra", "")
    ])));
    for (total, want) in [(8, 2), (3, 1), (0, 1), (100, 25)] {
        assert_eq!(pool.max_unavailable(total), want, "total {total}");
    }
    let int = POOL.replace("maxUnavailable: 25%", "maxUnavailable: 0");
    assert_eq!(
        MachineConfigPool::from_slice(int.as_bytes())
            .unwrap()
            .max_unavailable(10),
        1
    );
    let three = POOL.replace("maxUnavailable: 25%", "maxUnavailable: 3");
    assert_eq!(
        MachineConfigPool::from_slice(three.as_bytes())
            .unwrap()
            .max_unavailable(10),
        3
    );
    let bad = POOL.replace("maxUnavailable: 25%", "maxUnavailable: lots");
    let e = MachineConfigPool::from_slice(bad.as_bytes())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "$.spec.maxUnavailable: invalid value \"lots\": must be an integer or a percentage like \"10%\""
    );
    let again = MachineConfigPool::from_slice(pool.to_json().as_bytes()).unwrap();
    assert_eq!(again, pool);
}

const POLICY: &str = r#"
apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/my-app
      actions:
      - type: Restart
        restart:
          serviceName: my-app.service
    units:
    - name: my-app.service
      actions:
      - type: DaemonReload
      - type: Reload
        reload:
          serviceName: my-app.service
    sshkey:
      actions:
      - type: Drain
"#;

#[test]
fn machine_configuration_policies() {
    let mc = MachineConfiguration::from_slice(POLICY.as_bytes()).unwrap();
    let p = &mc.spec.node_disruption_policy;
    assert_eq!(p.files[0].path, "/etc/my-app");
    assert_eq!(
        p.files[0].actions[0].restart.as_ref().unwrap().service_name,
        "my-app.service"
    );
    assert_eq!(p.units[0].actions[1].type_, "Reload");
    assert_eq!(p.sshkey.as_ref().unwrap().actions[0].type_, "Drain");
    let bad = POLICY
        .replace("type: Drain", "type: Explode")
        .replace(
            "        restart:\n          serviceName: my-app.service\n",
            "",
        )
        .replace("path: /etc/my-app", "path: /etc/my-app/");
    let e = MachineConfiguration::from_slice(bad.as_bytes())
        .unwrap_err()
        .to_string();
    // The API's words; a path with a trailing slash is taken (the API has no rule for paths).
    assert_eq!(
        e,
        "$.spec.nodeDisruptionPolicy.files.0.actions.0: restart is required when type is Restart, and forbidden otherwise; \
         $.spec.nodeDisruptionPolicy.sshkey.actions.0.type: Unsupported value: \"Explode\": supported values: \"Reboot\", \"Drain\", \"Reload\", \"Restart\", \"DaemonReload\", \"None\""
    );
}

#[test]
fn empty_pool_selectors_select_nothing() {
    let empty = POOL.replace(
        "  nodeSelector:\n    matchExpressions:\n    - key: node-role.kubernetes.io/worker\n      operator: Exists\n    - key: node-role.kubernetes.io/infra\n      operator: DoesNotExist\n",
        "  nodeSelector: {}\n",
    );
    let pool = MachineConfigPool::from_slice(empty.as_bytes()).unwrap();
    assert!(!pool.selects_node(&labels(&[("node-role.kubernetes.io/worker", "")])));
    assert!(machine_config::pool::selector_matches(
        &Default::default(),
        &labels(&[("a", "b")])
    ));
}

#[test]
fn from_value_parsed_returns_the_same_config_as_ignition() {
    let value = parse_value(SEED_YAML.as_bytes()).unwrap();
    let (mc, parsed) = MachineConfig::from_value_parsed(value).unwrap();
    assert_eq!(parsed.config, mc.ignition().unwrap());
    assert_eq!(parsed.source_version, SpecVersion::V2_2);
}
