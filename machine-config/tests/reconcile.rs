//! The reconcile rules, one case per reason string.

use machine_config::machineconfiguration::IrreconcilableValidationOverrides;
use machine_config::{MachineConfig, ReconcileOptions, reconcile, reconcile_with};
use serde_json::{Value, json};

fn mc(name: &str, config: Value, spec: Value) -> MachineConfig {
    let mut s = spec;
    s["config"] = config;
    MachineConfig::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": s
    }))
    .unwrap()
}

fn ign(extra: Value) -> Value {
    let mut v = json!({"ignition": {"version": "3.4.0"}});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

const INNER: &str = "can't reconcile config old with new: configs old, new are not reconcilable: new machineconfig \"old\" is not reconcilable against \"new\": ";

#[test]
fn each_rule_has_its_reason() {
    let core = |extra: Value| {
        let mut u = json!({"name": "core", "sshAuthorizedKeys": ["k1"]});
        if let (Some(o), Some(e)) = (u.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        ign(json!({"passwd": {"users": [u]}}))
    };
    let file = |f: Value| ign(json!({"storage": {"files": [f]}}));
    let cases: Vec<(&str, Value, Value, Value, String)> = vec![
        (
            "groups",
            ign(json!({})),
            ign(json!({"passwd": {"groups": [{"name": "g"}]}})),
            json!({}),
            format!("{INNER}invalid passwd change(s): ignition Passwd Groups section contains changes"),
        ),
        (
            "non-core user",
            ign(json!({})),
            ign(json!({"passwd": {"users": [{"name": "admin", "sshAuthorizedKeys": ["k"]}]}})),
            json!({}),
            format!("{INNER}invalid passwd change(s): ignition passwd user section contains unsupported changes: non-core user"),
        ),
        (
            "core with other fields",
            core(json!({})),
            core(json!({"shell": "/bin/zsh", "sshAuthorizedKeys": ["k2"]})),
            json!({}),
            format!("{INNER}invalid passwd change(s): SSH keys and password hash are not reconcilable"),
        ),
        (
            "core without keys or hash",
            core(json!({})),
            ign(json!({"passwd": {"users": [{"name": "core"}]}})),
            json!({}),
            format!("{INNER}invalid passwd change(s): ignition passwd user section contains unsupported changes: user must be core and have 1 or more sshKeys"),
        ),
        (
            "ignition kargs",
            ign(json!({})),
            ign(json!({"kernelArguments": {"shouldExist": ["x"]}})),
            json!({}),
            format!("{INNER}ignition kargs section contains changes"),
        ),
        (
            "disks",
            ign(json!({})),
            ign(json!({"storage": {"disks": [{"device": "/dev/vdb"}]}})),
            json!({}),
            format!("{INNER}ignition disks section contains changes"),
        ),
        (
            "filesystems",
            ign(json!({})),
            ign(json!({"storage": {"filesystems": [{"device": "/dev/vdb1", "format": "xfs"}]}})),
            json!({}),
            format!("{INNER}ignition filesystems section contains changes"),
        ),
        (
            "raid",
            ign(json!({})),
            ign(json!({"storage": {"raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/a"]}]}})),
            json!({}),
            format!("{INNER}ignition raid section contains changes"),
        ),
        (
            "directories",
            ign(json!({})),
            ign(json!({"storage": {"directories": [{"path": "/etc/d"}]}})),
            json!({}),
            format!("{INNER}ignition directories section contains changes"),
        ),
        (
            "links added",
            ign(json!({})),
            ign(json!({"storage": {"links": [{"path": "/etc/l", "target": "/etc/x"}]}})),
            json!({}),
            format!("{INNER}ignition links section contains changes"),
        ),
        (
            "append",
            ign(json!({})),
            file(json!({"path": "/etc/a", "append": [{"source": "data:,x"}]})),
            json!({}),
            format!("{INNER}ignition file /etc/a includes append"),
        ),
        (
            "force file",
            ign(json!({})),
            file(json!({"path": "/run/machine-config-daemon-force", "contents": {"source": "data:,"}})),
            json!({}),
            format!("{INNER}cannot create /run/machine-config-daemon-force via Ignition"),
        ),
        (
            "fips",
            ign(json!({})),
            ign(json!({})),
            json!({"fips": true}),
            format!("{INNER}detected change to FIPS flag; refusing to modify FIPS on a running cluster"),
        ),
        (
            "extensions",
            ign(json!({})),
            ign(json!({})),
            json!({"extensions": ["usbguard", "vim", "emacs"]}),
            "can't reconcile config old with new: invalid extensions found: [vim emacs]".to_string(),
        ),
        (
            "kernel type value",
            ign(json!({})),
            ign(json!({})),
            json!({"kernelType": "lowlatency"}),
            "can't reconcile config old with new: kernelType=lowlatency is invalid".to_string(),
        ),
        (
            "kernel-devel with realtime",
            ign(json!({})),
            ign(json!({})),
            json!({"kernelType": "realtime", "extensions": ["kernel-devel"]}),
            "can't reconcile config old with new: installing kernel-devel extension is not supported with kernelType: realtime".to_string(),
        ),
        (
            "64k-pages on x86_64",
            ign(json!({})),
            ign(json!({})),
            json!({"kernelType": "64k-pages"}),
            "can't reconcile config old with new: 64k-pages is only supported for aarch64 architecture".to_string(),
        ),
    ];
    for (name, old_cfg, new_cfg, new_spec, want) in cases {
        let old = mc("old", old_cfg, json!({}));
        let new = mc("new", new_cfg, new_spec);
        let got = reconcile(&old, &new, "x86_64").expect_err(name).to_string();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn reconcilable_changes() {
    let files = |c: &str| {
        ign(
            json!({"storage": {"files": [{"path": "/etc/f", "contents": {"source": c}}]},
                   "systemd": {"units": [{"name": "a.service", "contents": c}]}}),
        )
    };
    let keys =
        |k: &str| ign(json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [k]}]}}));
    let cases: Vec<(&str, Value, Value, Value, &str)> = vec![
        (
            "files and units",
            files("data:,a"),
            files("data:,b"),
            json!({}),
            "x86_64",
        ),
        ("ssh keys", keys("k1"), keys("k2"), json!({}), "x86_64"),
        (
            "password hash only",
            ign(json!({})),
            ign(json!({"passwd": {"users": [{"name": "core", "passwordHash": "$6$x$y"}]}})),
            json!({}),
            "x86_64",
        ),
        (
            "users emptied",
            keys("k1"),
            ign(json!({})),
            json!({}),
            "x86_64",
        ),
        (
            "links removed",
            ign(json!({"storage": {"links": [{"path": "/etc/l", "target": "/x"}]}})),
            ign(json!({})),
            json!({}),
            "x86_64",
        ),
        (
            "luks is not checked",
            ign(json!({})),
            ign(json!({"storage": {"luks": [{"name": "root", "device": "/dev/vda4"}]}})),
            json!({}),
            "x86_64",
        ),
        (
            "os fields",
            ign(json!({})),
            ign(json!({})),
            json!({"osImageURL": "quay.io/x@sha256:1", "kernelArguments": ["nosmt"], "kernelType": "realtime",
                   "extensions": ["usbguard", "two-node-ha", "ipsec", "kerberos", "sandboxed-containers", "sysstat"]}),
            "x86_64",
        ),
        (
            "64k-pages on aarch64",
            ign(json!({})),
            ign(json!({})),
            json!({"kernelType": "64k-pages"}),
            "aarch64",
        ),
        (
            "2.2 to 3.4 same content",
            json!({"ignition": {"version": "2.2.0"}}),
            ign(json!({})),
            json!({}),
            "x86_64",
        ),
    ];
    for (name, old_cfg, new_cfg, new_spec, arch) in cases {
        let old = mc("old", old_cfg, json!({}));
        let new = mc("new", new_cfg, new_spec);
        assert_eq!(reconcile(&old, &new, arch), Ok(()), "{name}");
    }
}

#[test]
fn overrides_and_node_fips() {
    let old = mc("old", ign(json!({})), json!({}));
    let new = mc(
        "new",
        ign(json!({"storage": {"disks": [{"device": "/dev/vdb"}]}})),
        json!({}),
    );
    let opts = ReconcileOptions {
        arch: "x86_64".into(),
        fips_enabled: None,
        overrides: IrreconcilableValidationOverrides {
            storage: vec!["Disks".into()],
        },
    };
    assert_eq!(reconcile_with(&old, &new, &opts), Ok(()));
    let fips_node = ReconcileOptions {
        arch: "x86_64".into(),
        fips_enabled: Some(true),
        ..ReconcileOptions::default()
    };
    let same = mc("new", ign(json!({})), json!({}));
    assert_eq!(
        reconcile_with(&old, &same, &fips_node)
            .unwrap_err()
            .to_string(),
        "can't reconcile config old with new: detected change to FIPS flag; refusing to modify FIPS on a running cluster"
    );
}
