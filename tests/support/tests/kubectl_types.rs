//! The MCO's newer types, Leases and RBAC objects as the real `kubectl` (installed by
//! tests/setup.sh) sees them on the test server: apply, get with the CRDs' printer columns,
//! patches of the main resource and of `/status`, generation, validation; and `--seed` reading
//! YAML exactly as `kubectl apply -f` sends it.

use std::process::Output;

use mco_test_support::apiserver::TestApiServer;
use serde_json::{Value, json};

fn kubectl(server: &TestApiServer, args: &[&str]) -> Output {
    let output = server
        .kubectl(server.kubeconfig())
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

fn kubectl_ok(server: &TestApiServer, args: &[&str]) -> String {
    let output = kubectl(server, args);
    assert!(output.status.success(), "kubectl {args:?} failed");
    String::from_utf8(output.stdout).unwrap()
}

fn apply(server: &TestApiServer, name: &str, yaml: &str) -> String {
    let file = server.dir().join(name);
    std::fs::write(&file, yaml).unwrap();
    kubectl_ok(server, &["apply", "-f", file.to_str().unwrap()])
}

/// The table's header and the row of `name`, cut at the header's column starts (cells may be
/// blank).
fn row(table: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let header_line = table.lines().next().unwrap();
    let mut starts = Vec::new();
    let mut previous = ' ';
    for (i, c) in header_line.char_indices() {
        if c != ' ' && previous == ' ' {
            starts.push(i);
        }
        previous = c;
    }
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"));
    let cut = |text: &str| -> Vec<String> {
        starts
            .iter()
            .enumerate()
            .map(|(i, &start)| {
                let end = starts
                    .get(i + 1)
                    .copied()
                    .unwrap_or(text.len())
                    .min(text.len());
                text.get(start.min(text.len())..end)
                    .unwrap_or_default()
                    .trim()
                    .to_string()
            })
            .collect()
    };
    (cut(header_line), cut(line))
}

const MCN: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigNode
metadata:
  name: worker-0
spec:
  node: {name: worker-0}
  pool: {name: worker}
  configVersion: {desired: rendered-worker-a}
"#;

#[test]
fn machine_config_nodes_show_an_update_moving() {
    let server = TestApiServer::start().unwrap();
    let out = apply(&server, "mcn.yaml", MCN);
    assert!(
        out.contains("machineconfignode.machineconfiguration.openshift.io/worker-0 created"),
        "{out}"
    );
    let (header, cells) = row(
        &kubectl_ok(&server, &["get", "machineconfignodes"]),
        "worker-0",
    );
    assert_eq!(
        header,
        [
            "NAME",
            "POOLNAME",
            "DESIREDCONFIG",
            "CURRENTCONFIG",
            "UPDATED",
            "AGE"
        ]
    );
    assert_eq!(&cells[..3], ["worker-0", "worker", "rendered-worker-a"]);

    let status = json!({"status": {
        "observedGeneration": 1,
        "configVersion": {"current": "rendered-worker-a", "desired": "rendered-worker-b"},
        "conditions": [
            {"type": "Updated", "status": "False", "reason": "Updated", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Drained", "status": "True", "reason": "Drained", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
    }});
    kubectl_ok(
        &server,
        &[
            "patch",
            "machineconfignode",
            "worker-0",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            &status.to_string(),
        ],
    );
    kubectl_ok(
        &server,
        &[
            "patch",
            "machineconfignode",
            "worker-0",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"configVersion":{"desired":"rendered-worker-b"}}}"#,
        ],
    );
    let (header, cells) = row(
        &kubectl_ok(&server, &["get", "machineconfignodes", "-o", "wide"]),
        "worker-0",
    );
    let at = |column: &str| cells[header.iter().position(|h| h == column).unwrap()].clone();
    assert_eq!(at("DESIREDCONFIG"), "rendered-worker-b");
    assert_eq!(at("CURRENTCONFIG"), "rendered-worker-a");
    assert_eq!(at("UPDATED"), "False");
    assert_eq!(at("DRAINEDNODE"), "True");
    let mcn = server.get("machineconfignodes", None, "worker-0").unwrap();
    assert_eq!(
        mcn["metadata"]["generation"], 2,
        "spec changes bump generation, status does not"
    );

    let renamed = kubectl(
        &server,
        &[
            "patch",
            "machineconfignode",
            "worker-0",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"node":{"name":"worker-1"}}}"#,
        ],
    );
    assert!(!renamed.status.success());
    assert!(
        String::from_utf8_lossy(&renamed.stderr).contains(
            "The MachineConfigNode \"worker-0\" is invalid: <nil>: Invalid value: \"object\": spec.node.name should match metadata.name"
        )
    );
}

const IMAGE_MODE: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSConfig
metadata:
  name: worker
spec:
  machineConfigPool: {name: worker}
  imageBuilder: {imageBuilderType: Job}
  renderedImagePushSecret: {name: push}
  renderedImagePushSpec: registry.example/os:latest
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineOSBuild
metadata:
  name: worker-build-1
spec:
  machineConfig: {name: rendered-worker-a}
  machineOSConfig: {name: worker}
  renderedImagePushSpec: registry.example/os:latest
---
apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  logLevel: Normal
  operatorLogLevel: Normal
"#;

#[test]
fn image_mode_objects_and_the_operator_configuration() {
    let server = TestApiServer::start().unwrap();
    let out = apply(&server, "image-mode.yaml", IMAGE_MODE);
    assert!(out.contains("machineosconfig.machineconfiguration.openshift.io/worker created"));
    assert!(
        out.contains("machineosbuild.machineconfiguration.openshift.io/worker-build-1 created")
    );
    assert!(out.contains("machineconfiguration.operator.openshift.io/cluster created"));
    let build_status = json!({"status": {
        "conditions": [
            {"type": "Succeeded", "status": "True", "reason": "Ready", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Building", "status": "False", "reason": "Ready", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
        "digestedImagePushSpec": "registry.example/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    }});
    kubectl_ok(
        &server,
        &[
            "patch",
            "machineosbuild",
            "worker-build-1",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            &build_status.to_string(),
        ],
    );
    let (header, cells) = row(
        &kubectl_ok(&server, &["get", "machineosbuilds"]),
        "worker-build-1",
    );
    assert_eq!(
        header,
        [
            "NAME",
            "PREPARED",
            "BUILDING",
            "SUCCEEDED",
            "INTERRUPTED",
            "FAILED",
            "AGE"
        ]
    );
    assert_eq!(
        &cells[1..4],
        ["", "False", "True"],
        "no Prepared condition yet"
    );
    let (header, _) = row(&kubectl_ok(&server, &["get", "machineosconfigs"]), "worker");
    assert_eq!(header, ["NAME", "AGE"]);

    // The operator's generation/observedGeneration handshake.
    kubectl_ok(
        &server,
        &[
            "patch",
            "machineconfiguration",
            "cluster",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"nodeDisruptionPolicy":{"files":[{"path":"/etc/x","actions":[{"type":"None"}]}]}}}"#,
        ],
    );
    kubectl_ok(
        &server,
        &[
            "patch",
            "machineconfiguration",
            "cluster",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"observedGeneration":2}}"#,
        ],
    );
    let generations = kubectl_ok(
        &server,
        &[
            "get",
            "machineconfiguration",
            "cluster",
            "-o",
            "jsonpath={.metadata.generation} {.status.observedGeneration}",
        ],
    );
    assert_eq!(generations, "2 2");
}

#[test]
fn leases_and_rbac_objects_apply_and_print() {
    let server = TestApiServer::start().unwrap();
    let objects = r#"
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: fleetlock-default, namespace: default}
spec: {holderIdentity: worker-0, leaseDurationSeconds: 300}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "mco:agent"}
rules:
- apiGroups: [machineconfiguration.openshift.io]
  resources: [machineconfignodes, machineconfignodes/status]
  verbs: [get, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "mco:agent"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "mco:agent"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:nodes"}
- {kind: ServiceAccount, name: companion, namespace: mco}
"#;
    let out = apply(&server, "objects.yaml", objects);
    assert!(out.contains("lease.coordination.k8s.io/fleetlock-default created"));
    assert!(out.contains("clusterrole.rbac.authorization.k8s.io/mco:agent created"));
    let (_, cells) = row(
        &kubectl_ok(&server, &["get", "lease", "-n", "default"]),
        "fleetlock-default",
    );
    assert_eq!(cells[1], "worker-0");
    let (header, cells) = row(
        &kubectl_ok(
            &server,
            &["get", "clusterrolebinding", "mco:agent", "-o", "wide"],
        ),
        "mco:agent",
    );
    assert_eq!(
        header,
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    );
    assert_eq!(cells[1], "ClusterRole/mco:agent");
    assert!(cells.contains(&"mco/companion".to_string()), "{cells:?}");
    let again = apply(&server, "objects.yaml", objects);
    assert!(
        again.contains("clusterrole.rbac.authorization.k8s.io/mco:agent unchanged"),
        "{again}"
    );
    let moved = kubectl(
        &server,
        &[
            "patch",
            "clusterrolebinding",
            "mco:agent",
            "--type",
            "merge",
            "-p",
            r#"{"roleRef":{"name":"cluster-admin"}}"#,
        ],
    );
    assert!(!moved.status.success());
    assert!(String::from_utf8_lossy(&moved.stderr).contains("cannot change roleRef"));
}

/// What the certificate writer and the feature-gate reader read: a ControllerConfig, the
/// `kubeconfig-data` ConfigMap, FeatureGate/cluster and ClusterVersion/version, applied and
/// printed as on a cluster (ClusterVersion with its CRD's columns), status through `/status`.
#[test]
fn controller_configs_config_maps_and_cluster_config() {
    let server = TestApiServer::start().unwrap();
    let objects = r#"
apiVersion: v1
kind: Namespace
metadata: {name: openshift-machine-config-operator}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kubeconfig-data, namespace: openshift-machine-config-operator}
data: {ca-bundle.crt: "-----BEGIN CERTIFICATE-----"}
binaryData: {extra: "eA=="}
---
apiVersion: machineconfiguration.openshift.io/v1
kind: ControllerConfig
metadata:
  name: machine-config-controller
  annotations: {machineconfiguration.openshift.io/service-ca-rotate: "false"}
spec:
  kubeAPIServerServingCAData: Y2E=
  imageRegistryBundleData: [{file: "reg..5000", data: cmVn}]
---
apiVersion: config.openshift.io/v1
kind: FeatureGate
metadata: {name: cluster}
spec: {featureSet: TechPreviewNoUpgrade}
---
apiVersion: config.openshift.io/v1
kind: ClusterVersion
metadata: {name: version}
spec: {clusterID: 0d5d5b4e-0000-4000-8000-000000000000}
"#;
    let out = apply(&server, "objects.yaml", objects);
    for created in [
        "configmap/kubeconfig-data created",
        "controllerconfig.machineconfiguration.openshift.io/machine-config-controller created",
        "featuregate.config.openshift.io/cluster created",
        "clusterversion.config.openshift.io/version created",
    ] {
        assert!(out.contains(created), "{out}");
    }
    let (header, cells) = row(
        &kubectl_ok(
            &server,
            &["get", "cm", "-n", "openshift-machine-config-operator"],
        ),
        "kubeconfig-data",
    );
    assert_eq!(header, ["NAME", "DATA", "AGE"]);
    assert_eq!(cells[1], "2");
    let (header, _) = row(
        &kubectl_ok(&server, &["get", "controllerconfigs"]),
        "machine-config-controller",
    );
    assert_eq!(header, ["NAME", "AGE"]);

    for (resource, status) in [
        (
            "featuregate/cluster",
            r#"{"status":{"featureGates":[{"version":"4.18.3","enabled":[{"name":"ImageModeStatusReporting"}],"disabled":[{"name":"IrreconcilableMachineConfig"}]}]}}"#,
        ),
        (
            "clusterversion/version",
            r#"{"status":{"desired":{"version":"4.18.3"},"history":[{"state":"Completed","version":"4.18.3"}],"conditions":[{"type":"Available","status":"True"},{"type":"Progressing","status":"False","lastTransitionTime":"2026-01-01T00:00:00Z","message":"Cluster version is 4.18.3"}]}}"#,
        ),
    ] {
        kubectl_ok(
            &server,
            &[
                "patch",
                resource,
                "--subresource",
                "status",
                "--type",
                "merge",
                "-p",
                status,
            ],
        );
    }
    let (header, cells) = row(&kubectl_ok(&server, &["get", "clusterversion"]), "version");
    assert_eq!(
        header,
        [
            "NAME",
            "VERSION",
            "AVAILABLE",
            "PROGRESSING",
            "SINCE",
            "STATUS"
        ]
    );
    assert_eq!(&cells[1..4], ["4.18.3", "True", "False"]);
    assert!(cells[4].ends_with('d'), "{cells:?}");
    assert_eq!(cells[5], "Cluster version is 4.18.3");
    let gates = kubectl_ok(
        &server,
        &[
            "get",
            "featuregate",
            "cluster",
            "-o",
            "jsonpath={.status.featureGates[0].enabled[0].name}",
        ],
    );
    assert_eq!(gates, "ImageModeStatusReporting");
    let cc = kubectl_ok(
        &server,
        &[
            "get",
            "controllerconfig",
            "machine-config-controller",
            "-o",
            "jsonpath={.spec.imageRegistryBundleData[0].file}",
        ],
    );
    assert_eq!(cc, "reg..5000");
}

const YAML_1_1: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-yaml-1-1
spec:
  config:
    ignition: {version: 3.2.0}
    storage:
      files:
      - path: /etc/octal
        mode: 0644
        overwrite: yes
        contents: {source: "data:,x"}
      - path: /etc/decimal
        mode: 420
        contents: {source: "data:,y"}
  probe: {leading_zero: 08, exponent: 1e3, fraction: 0.5, hex: 0x1F, underscores: 1_000, quoted: "0644", date: 2001-12-14, on_off: off}
"#;

#[test]
fn seed_reads_yaml_as_kubectl_apply_sends_it() {
    let applied = TestApiServer::start().unwrap();
    apply(&applied, "mc.yaml", YAML_1_1);
    let seeded = TestApiServer::start().unwrap();
    assert_eq!(seeded.seed_manifests(YAML_1_1).unwrap(), 1);
    let spec = |server: &TestApiServer| -> Value {
        server
            .get("machineconfigs", None, "99-yaml-1-1")
            .unwrap()
            .get("spec")
            .cloned()
            .unwrap()
    };
    let sent = spec(&applied);
    assert_eq!(sent["config"]["storage"]["files"][0]["mode"], 420);
    assert_eq!(sent["config"]["storage"]["files"][0]["overwrite"], true);
    // Value equality also tells the integer 8 from the float 8.0.
    assert_eq!(
        spec(&seeded),
        sent,
        "seeded and kubectl-applied objects are the same JSON"
    );
}

const PINNED: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: PinnedImageSet
metadata:
  name: release-images
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  pinnedImages:
  - name: quay.io/openshift-release-dev/ocp-release@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  - name: quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789
"#;

#[test]
fn pinned_image_sets_apply_print_and_validate() {
    let server = TestApiServer::start().unwrap();
    let out = apply(&server, "pinned.yaml", PINNED);
    assert!(
        out.contains("pinnedimageset.machineconfiguration.openshift.io/release-images created"),
        "{out}"
    );
    let (header, cells) = row(
        &kubectl_ok(&server, &["get", "pinnedimagesets"]),
        "release-images",
    );
    assert_eq!(header, ["NAME", "AGE"]);
    assert_eq!(cells[0], "release-images");
    // A spec change is a new generation; a status write is not.
    let third = r#"[{"op":"add","path":"/spec/pinnedImages/-","value":{"name":"quay.io/x/y@sha256:1111111111111111111111111111111111111111111111111111111111111111"}}]"#;
    kubectl_ok(
        &server,
        &[
            "patch",
            "pinnedimageset",
            "release-images",
            "--type",
            "json",
            "-p",
            third,
        ],
    );
    let status = r#"{"status":{"conditions":[{"type":"Degraded","status":"False","reason":"AsExpected","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#;
    kubectl_ok(
        &server,
        &[
            "patch",
            "pinnedimageset",
            "release-images",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            status,
        ],
    );
    let got = kubectl_ok(
        &server,
        &[
            "get",
            "pinnedimageset",
            "release-images",
            "-o",
            "jsonpath={.metadata.generation} {.spec.pinnedImages[2].name}",
        ],
    );
    assert_eq!(
        got,
        "2 quay.io/x/y@sha256:1111111111111111111111111111111111111111111111111111111111111111"
    );
    // The CRD's rules: a tag is refused, and so is an image twice.
    let tagged = PINNED.replace("release-images", "tagged").replace(
        "ocp-release@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "ocp-release:4.18",
    );
    let file = server.dir().join("tagged.yaml");
    std::fs::write(&file, tagged).unwrap();
    let refused = kubectl(&server, &["apply", "-f", file.to_str().unwrap()]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("spec.pinnedImages[0].name: Invalid value: \"string\": the OCI Image reference must end with a valid '@sha256:<digest>' suffix"),
        "{stderr}"
    );
    let twice = r#"[{"op":"add","path":"/spec/pinnedImages/-","value":{"name":"quay.io/x/y@sha256:1111111111111111111111111111111111111111111111111111111111111111"}}]"#;
    let refused = kubectl(
        &server,
        &[
            "patch",
            "pinnedimageset",
            "release-images",
            "--type",
            "json",
            "-p",
            twice,
        ],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("spec.pinnedImages[3]: Duplicate value")
    );
}
