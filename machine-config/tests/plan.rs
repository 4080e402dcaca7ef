//! Diff, node-disruption actions, drain and the `diff --json` shape.

use machine_config::machineconfiguration::MachineConfiguration;
use machine_config::{
    Action, ClusterPolicies, LegacyAction, MachineConfig, Plan, PolicyOptions, dataurl,
    legacy_action,
};
use serde_json::{Value, json};

fn mc(name: &str, files: Value, units: Value, spec: Value) -> MachineConfig {
    let mut s = spec;
    s["config"] = json!({"ignition": {"version": "3.4.0"},
        "storage": {"files": files}, "systemd": {"units": units}});
    MachineConfig::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": s
    }))
    .unwrap()
}

fn file(path: &str, text: &str) -> Value {
    json!({"path": path, "contents": {"source": dataurl::encode_percent(text.as_bytes())}, "mode": 420})
}

fn opts() -> PolicyOptions {
    PolicyOptions {
        arch: "x86_64".into(),
        ..PolicyOptions::default()
    }
}

fn plan_files(old: Value, new: Value, o: &PolicyOptions) -> Plan {
    Plan::new(
        &mc("a", old, json!([]), json!({})),
        &mc("b", new, json!([]), json!({})),
        o,
    )
    .unwrap()
}

fn types(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .map(|a| match a.unit() {
            Some(u) => format!("{}:{u}", a.type_name()),
            None => a.type_name().to_string(),
        })
        .collect()
}

#[test]
fn default_policy_rows() {
    let cases: &[(&str, &[&str], bool)] = &[
        ("/var/lib/kubelet/config.json", &["None"], false),
        (
            "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
            &["Reload:crio.service"],
            false,
        ),
        (
            "/etc/containers/policy.json",
            &["Reload:crio.service"],
            false,
        ),
        (
            "/etc/containers/registries.d/x.yaml",
            &["Reload:crio.service"],
            false,
        ),
        ("/etc/crio/policies/p.json", &["Reload:crio.service"], false),
        ("/etc/nmstate/openshift/eth0.yml", &["None"], false),
        (
            "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
            &[
                "Restart:coreos-update-ca-trust.service",
                "Restart:crio.service",
            ],
            false,
        ),
        (
            "/etc/kubernetes/credential-providers/ecr.yaml",
            &["Restart:kubelet.service"],
            false,
        ),
        (
            "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
            &["DaemonReload", "Restart:kubelet.service"],
            false,
        ),
        (
            "/etc/iri-registry/config.yml",
            &["Restart:iri-registry.service"],
            false,
        ),
        (
            "/usr/local/bin/load-registry-image.sh",
            &["Restart:iri-registry.service"],
            false,
        ),
        (
            "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
            &["Restart:coreos-update-ca-trust.service"],
            false,
        ),
        (
            "/etc/mco-agent/hooks.d/post-apply/10-site.yml",
            &["None"],
            false,
        ),
        ("/etc/motd", &["Reboot"], true),
        ("/etc/containers/registries.dx", &["Reboot"], true),
    ];
    for (path, want, drain) in cases {
        let p = plan_files(json!([]), json!([file(path, "x")]), &opts());
        assert!(p.reconcilable, "{path}: {:?}", p.reason);
        assert_eq!(p.files.added, [path.to_string()], "{path}");
        assert_eq!(types(&p), *want, "{path}");
        assert_eq!(p.drain, *drain, "{path}");
        assert_eq!(p.reboot, want == &["Reboot"], "{path}");
    }
    let unit_old = mc("a", json!([]), json!([]), json!({}));
    let unit_new = mc(
        "b",
        json!([]),
        json!([{"name": "iri-registry.service", "contents": "[Unit]\n"}]),
        json!({}),
    );
    let p = Plan::new(&unit_old, &unit_new, &opts()).unwrap();
    assert_eq!(types(&p), ["DaemonReload", "Restart:iri-registry.service"]);
    assert_eq!(p.units.added, ["iri-registry.service"]);
}

#[test]
fn none_is_stripped_beside_other_actions_and_unmatched_reboots() {
    let p = plan_files(
        json!([]),
        json!([
            file("/var/lib/kubelet/config.json", "{}"),
            file("/etc/containers/policy.json", "{}")
        ]),
        &opts(),
    );
    assert_eq!(types(&p), ["Reload:crio.service"]);
    assert!(!p.drain);
    let all_none = plan_files(
        json!([]),
        json!([
            file("/var/lib/kubelet/config.json", "{}"),
            file("/etc/nmstate/openshift/a", "x")
        ]),
        &opts(),
    );
    assert_eq!(types(&all_none), ["None"]);
    let mixed = plan_files(
        json!([]),
        json!([
            file("/etc/containers/policy.json", "{}"),
            file("/etc/unknown", "x")
        ]),
        &opts(),
    );
    assert_eq!(types(&mixed), ["Reboot"]);
    assert!(mixed.drain && mixed.reboot);
    let unit = Plan::new(
        &mc("a", json!([]), json!([]), json!({})),
        &mc(
            "b",
            json!([]),
            json!([{"name": "my.service", "contents": "x"}]),
            json!({}),
        ),
        &opts(),
    )
    .unwrap();
    assert_eq!(types(&unit), ["Reboot"]);
}

const USER_POLICY: &str = r#"
apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata: {name: cluster}
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/app
      actions: [{type: Restart, restart: {serviceName: app.service}}]
    - path: /etc/app/special
      actions: [{type: Reload, reload: {serviceName: app.service}}]
    - path: /etc/containers/policy.json
      actions: [{type: None}]
    units:
    - name: app.service
      actions: [{type: DaemonReload}, {type: Restart, restart: {serviceName: app.service}}]
    sshkey:
      actions: [{type: Drain}]
"#;

#[test]
fn user_policies_override_defaults_and_longest_prefix_wins() {
    let user = MachineConfiguration::from_slice(USER_POLICY.as_bytes()).unwrap();
    let o = PolicyOptions {
        policies: ClusterPolicies::merged(&user.spec.node_disruption_policy),
        ..opts()
    };
    let cases: &[(&str, &[&str])] = &[
        ("/etc/app/config.yaml", &["Restart:app.service"]),
        ("/etc/app/special/x", &["Reload:app.service"]),
        ("/etc/app/special", &["Reload:app.service"]),
        ("/etc/application", &["Reboot"]),
        ("/etc/containers/policy.json", &["None"]),
        ("/etc/crio/policies/p", &["Reload:crio.service"]),
    ];
    for (path, want) in cases {
        let p = plan_files(json!([]), json!([file(path, "x")]), &o);
        assert_eq!(types(&p), *want, "{path}");
    }
    let keys = |k: &str| {
        let mut m = mc("x", json!([]), json!([]), json!({}));
        m.spec.config = Some(
            json!({"ignition": {"version": "3.4.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [k]}]}})
            .into(),
        );
        m
    };
    let p = Plan::new(&keys("k1"), &keys("k2"), &o).unwrap();
    assert!(p.passwd);
    assert_eq!(types(&p), ["Drain"]);
    assert!(p.drain && !p.reboot);
    let default_ssh = Plan::new(&keys("k1"), &keys("k2"), &opts()).unwrap();
    assert_eq!(types(&default_ssh), ["None"]);
    let unit = Plan::new(
        &mc(
            "a",
            json!([]),
            json!([{"name": "app.service", "contents": "a"}]),
            json!({}),
        ),
        &mc(
            "b",
            json!([]),
            json!([{"name": "app.service", "contents": "b"}]),
            json!({}),
        ),
        &o,
    )
    .unwrap();
    assert_eq!(unit.units.changed, ["app.service"]);
    assert_eq!(types(&unit), ["DaemonReload", "Restart:app.service"]);
}

#[test]
fn os_changes_and_force_reboot() {
    let base = json!({"osImageURL": "quay.io/os@sha256:1", "kernelArguments": ["a"], "extensions": ["usbguard"]});
    let mut changed = base.clone();
    changed["osImageURL"] = json!("quay.io/os@sha256:2");
    changed["kernelArguments"] = json!(["a", "b=\"1 2\""]);
    changed["extensions"] = json!(["kerberos"]);
    changed["kernelType"] = json!("realtime");
    let old = mc("a", json!([]), json!([]), base.clone());
    let new = mc("b", json!([]), json!([]), changed);
    let p = Plan::new(&old, &new, &opts()).unwrap();
    assert!(p.os_update && p.kernel_type && p.reboot && p.drain);
    assert_eq!(
        p.kargs,
        ["--delete-if-present=a", "--append=a", "--append=b=\"1 2\""]
    );
    assert_eq!(p.extensions.install, ["krb5-workstation", "libkadm5"]);
    assert_eq!(p.extensions.uninstall, ["usbguard"]);
    assert_eq!(types(&p), ["Reboot"]);

    let same = mc("b", json!([]), json!([]), base);
    let unchanged = Plan::new(&old, &same, &opts()).unwrap();
    assert!(unchanged.diff.is_empty());
    assert_eq!(types(&unchanged), ["None"]);
    assert!(!unchanged.drain && !unchanged.reboot && unchanged.kargs.is_empty());
    let forced = Plan::new(
        &old,
        &same,
        &PolicyOptions {
            force: true,
            ..opts()
        },
    )
    .unwrap();
    assert!(forced.os_update);
    assert_eq!(types(&forced), ["Reboot"]);
}

#[test]
fn registries_conf_special_drains_only_when_unsafe() {
    let base = "[[registry]]\nlocation = \"quay.io\"\nmirror-by-digest-only = true\n";
    let safe = format!("{base}[[registry.mirror]]\nlocation = \"m.local\"\n");
    let unsafe_ = "[[registry]]\nlocation = \"other.io\"\n";
    let path = "/etc/containers/registries.conf";
    let p = plan_files(
        json!([file(path, base)]),
        json!([file(path, &safe)]),
        &opts(),
    );
    assert_eq!(types(&p), ["Special"]);
    assert!(!p.drain && !p.reboot);
    let p = plan_files(
        json!([file(path, base)]),
        json!([file(path, unsafe_)]),
        &opts(),
    );
    assert_eq!(types(&p), ["Special"]);
    assert!(p.drain);
    let e = Plan::new(
        &mc("a", json!([file(path, base)]), json!([]), json!({})),
        &mc("b", json!([file(path, "[[registry")]), json!([]), json!({})),
        &opts(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("/etc/containers/registries.conf: failed decoding TOML content"),
        "{e}"
    );
}

#[test]
fn file_diff_compares_decoded_contents_mode_and_owner() {
    let gz = {
        use std::io::Write as _;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"same").unwrap();
        enc.finish().unwrap()
    };
    let old = json!([
        file("/etc/a", "same"),
        file("/etc/b", "x"),
        file("/etc/c", "x"),
        file("/etc/gone", "x")
    ]);
    let new = json!([
        {"path": "/etc/a", "mode": 420, "contents": {"source": dataurl::encode_base64(&gz), "compression": "gzip"}},
        {"path": "/etc/b", "mode": 384, "contents": {"source": "data:,x"}},
        {"path": "/etc/c", "mode": 420, "user": {"name": "core"}, "contents": {"source": "data:,x"}},
        file("/etc/new", "n")
    ]);
    let p = plan_files(old, new, &opts());
    assert_eq!(p.files.added, ["/etc/new"]);
    assert_eq!(p.files.changed, ["/etc/b", "/etc/c"]);
    assert_eq!(p.files.removed, ["/etc/gone"]);
}

#[test]
fn units_diff_covers_dropins_mask_and_enabled() {
    let u = |v: Value| mc("x", json!([]), v, json!({}));
    let old = u(json!([
        {"name": "a.service", "dropins": [{"name": "1.conf", "contents": "x"}, {"name": "2.conf", "contents": "y"}]},
        {"name": "b.service", "contents": "b"},
        {"name": "c.service", "contents": "c", "enabled": true},
        {"name": "d.service", "contents": "d"}
    ]));
    let new = u(json!([
        {"name": "a.service", "dropins": [{"name": "2.conf", "contents": "y"}, {"name": "1.conf", "contents": "x"}]},
        {"name": "b.service", "contents": "b", "mask": true},
        {"name": "c.service", "contents": "c", "enabled": false},
        {"name": "e.service", "contents": "e"}
    ]));
    let p = Plan::new(&old, &new, &opts()).unwrap();
    assert_eq!(p.units.added, ["e.service"]);
    assert_eq!(p.units.changed, ["b.service", "c.service"]);
    assert_eq!(p.units.removed, ["d.service"]);
}

#[test]
fn json_shape_is_exact() {
    let p = plan_files(
        json!([]),
        json!([file("/etc/containers/policy.json", "{}")]),
        &opts(),
    );
    let v: Value = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(
        v,
        json!({
            "reconcilable": true, "reason": null,
            "files": {"added": ["/etc/containers/policy.json"], "changed": [], "removed": []},
            "units": {"added": [], "changed": [], "removed": []},
            "passwd": false, "os_update": false, "kernel_type": false,
            "extensions": {"install": [], "uninstall": []},
            "fips": false, "kargs": [],
            "actions": [{"type": "Reload", "unit": "crio.service"}],
            "decisions": [{
                "subject": {"kind": "file", "name": "/etc/containers/policy.json"},
                "actions": [{"type": "Reload", "unit": "crio.service"}],
                "rule": {"by": "policy", "origin": "default", "entry": "/etc/containers/policy.json"}
            }],
            "drain": false, "reboot": false
        })
    );
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "reconcilable",
            "reason",
            "files",
            "units",
            "passwd",
            "os_update",
            "kernel_type",
            "extensions",
            "fips",
            "kargs",
            "actions",
            "decisions",
            "drain",
            "reboot"
        ]
    );
    let mut bad = mc("b", json!([]), json!([]), json!({}));
    bad.spec.config = Some(
        json!({"ignition": {"version": "3.4.0"}, "storage": {"directories": [{"path": "/d"}]}})
            .into(),
    );
    let un = Plan::new(&mc("a", json!([]), json!([]), json!({})), &bad, &opts()).unwrap();
    let v: Value = serde_json::from_str(&un.to_json()).unwrap();
    assert_eq!(v["reconcilable"], false);
    assert_eq!(
        v["reason"],
        "can't reconcile config a with b: configs a, b are not reconcilable: new machineconfig \"a\" is not reconcilable against \"b\": ignition directories section contains changes"
    );
    assert_eq!(v["actions"], json!([]));
    assert_eq!(v["decisions"], json!([]));
}

#[test]
fn legacy_actions() {
    let diff_of = |files: Value, spec: Value| {
        Plan::new(
            &mc("a", json!([]), json!([]), json!({})),
            &mc("b", files, json!([]), spec),
            &opts(),
        )
        .unwrap()
        .diff
    };
    let cases: Vec<(Value, Value, LegacyAction)> = vec![
        (json!([]), json!({}), LegacyAction::None),
        (
            json!([file("/var/lib/kubelet/config.json", "x")]),
            json!({}),
            LegacyAction::None,
        ),
        (
            json!([file("/etc/kubernetes/kubelet-ca.crt", "x")]),
            json!({}),
            LegacyAction::None,
        ),
        (
            json!([file("/etc/containers/registries.conf", "")]),
            json!({}),
            LegacyAction::ReloadCrio,
        ),
        (
            json!([file("/etc/containers/registries.d/a.yaml", "")]),
            json!({}),
            LegacyAction::ReloadCrio,
        ),
        (
            json!([file("/etc/containers/registries.d/sub/a.yaml", "")]),
            json!({}),
            LegacyAction::Reboot,
        ),
        (
            json!([
                file("/etc/containers/policy.json", "x"),
                file(
                    "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
                    "x"
                )
            ]),
            json!({}),
            LegacyAction::RestartCrio,
        ),
        (
            json!([file("/etc/nmstate/openshift/a.yml", "")]),
            json!({}),
            LegacyAction::None,
        ),
        (
            json!([file("/etc/motd", "")]),
            json!({}),
            LegacyAction::Reboot,
        ),
        (
            json!([]),
            json!({"kernelArguments": ["nosmt"]}),
            LegacyAction::Reboot,
        ),
    ];
    for (files, spec, want) in cases {
        let d = diff_of(files.clone(), spec);
        assert_eq!(legacy_action(&d, false), want, "{files}");
    }
    assert_eq!(
        legacy_action(&diff_of(json!([]), json!({})), true),
        LegacyAction::Reboot
    );
    let units = Plan::new(
        &mc("a", json!([]), json!([]), json!({})),
        &mc(
            "b",
            json!([]),
            json!([{"name": "x.service", "contents": "x"}]),
            json!({}),
        ),
        &opts(),
    )
    .unwrap();
    assert_eq!(legacy_action(&units.diff, false), LegacyAction::Reboot);
    assert_eq!(LegacyAction::ReloadCrio.as_str(), "reload crio");
    assert_eq!(Action::Special.type_name(), "Special");
}
