//! Node disruption policies: the MCO's merge of user policies over the default table (as its
//! operator writes `status.nodeDisruptionPolicyStatus`), the MCD's closest-path lookup, and the
//! decision (policy entry) behind every action of a plan.

use machine_config::machineconfiguration::{
    FilePolicy, MachineConfiguration, NodeDisruptionPolicy, PolicyAction, ServiceRef, SshKeyPolicy,
    UnitPolicy,
};
use machine_config::policy::{Origin, Rule, Subject, default_policy};
use machine_config::{ClusterPolicies, MachineConfig, Plan, PolicyOptions, dataurl};
use serde_json::{Value, json};

fn act(type_: &str, svc: Option<&str>) -> PolicyAction {
    let service = svc.map(|s| ServiceRef {
        service_name: s.into(),
    });
    PolicyAction {
        type_: type_.into(),
        reload: (type_ == "Reload").then(|| service.clone()).flatten(),
        restart: (type_ == "Restart").then_some(service).flatten(),
    }
}

fn file_policy(path: &str, actions: &[PolicyAction]) -> FilePolicy {
    FilePolicy {
        path: path.into(),
        actions: actions.to_vec(),
    }
}

#[test]
fn user_entries_take_the_place_of_defaults_and_new_ones_are_appended() {
    let user = NodeDisruptionPolicy {
        files: vec![
            file_policy("/etc/foo.conf", &[act("Restart", Some("foo.service"))]),
            file_policy("/etc/containers/policy.json", &[act("None", None)]),
        ],
        units: vec![
            UnitPolicy {
                name: "foo.service".into(),
                actions: vec![act("DaemonReload", None)],
            },
            UnitPolicy {
                name: "iri-registry.service".into(),
                actions: vec![act("None", None)],
            },
        ],
        sshkey: Some(SshKeyPolicy {
            actions: vec![act("Drain", None)],
        }),
    };
    let merged = ClusterPolicies::merged(&user);
    let defaults = default_policy();
    let paths: Vec<&str> = merged
        .policies()
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    let mut want: Vec<&str> = defaults.files.iter().map(|f| f.path.as_str()).collect();
    want.push("/etc/foo.conf");
    assert_eq!(
        paths, want,
        "same place for replaced entries, new ones last"
    );
    assert_eq!(
        merged
            .file_policy("/etc/containers/policy.json")
            .unwrap()
            .actions,
        [act("None", None)]
    );
    assert_eq!(merged.policies().units.len(), 2);
    assert_eq!(merged.policies().units[0].name, "iri-registry.service");
    assert_eq!(merged.policies().units[0].actions, [act("None", None)]);
    assert_eq!(merged.policies().units[1].name, "foo.service");
    assert_eq!(
        merged.policies().sshkey.as_ref().unwrap().actions,
        [act("Drain", None)]
    );

    // An SSH policy without actions leaves the default one (the MCO's rule).
    let empty_ssh = NodeDisruptionPolicy {
        sshkey: Some(SshKeyPolicy { actions: vec![] }),
        ..NodeDisruptionPolicy::default()
    };
    assert_eq!(
        ClusterPolicies::merged(&empty_ssh),
        ClusterPolicies::default()
    );
    assert_eq!(
        ClusterPolicies::merged(&NodeDisruptionPolicy::default()).policies(),
        &defaults
    );
}

#[test]
fn the_closest_path_wins() {
    let policies = ClusterPolicies::merged(&NodeDisruptionPolicy {
        files: vec![
            file_policy("/etc/app", &[act("Restart", Some("app.service"))]),
            file_policy("/etc/app/special/", &[act("Reload", Some("app.service"))]),
        ],
        ..NodeDisruptionPolicy::default()
    });
    let rows: &[(&str, Option<&str>)] = &[
        ("/etc/app", Some("/etc/app")),
        ("/etc/app/x.conf", Some("/etc/app")),
        ("/etc/app/special/y", Some("/etc/app/special/")),
        ("/etc/app/special", Some("/etc/app")),
        ("/etc/application", None),
        (
            "/etc/containers/registries.d/a.yaml",
            Some("/etc/containers/registries.d"),
        ),
        ("/etc/containers/registries.dx", None),
        (
            "/etc/containers/registries.conf",
            Some("/etc/containers/registries.conf"),
        ),
    ];
    for (path, want) in rows {
        assert_eq!(
            policies.file_policy(path).map(|p| p.path.as_str()),
            *want,
            "{path}"
        );
    }
    assert!(policies.unit_policy("iri-registry.service").is_some());
    assert!(policies.unit_policy("iri-registry").is_none());
}

fn mc(name: &str, files: &[(&str, &str)], units: Value, spec: Value) -> MachineConfig {
    let files: Vec<Value> = files
        .iter()
        .map(|(p, t)| json!({"path": p, "mode": 420, "contents": {"source": dataurl::encode_percent(t.as_bytes())}}))
        .collect();
    let mut s = spec;
    s["config"] = json!({"ignition": {"version": "3.4.0"},
        "storage": {"files": files}, "systemd": {"units": units},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [name]}]}});
    MachineConfig::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": s
    }))
    .unwrap()
}

fn with_user(yaml: &str) -> PolicyOptions {
    let doc = format!(
        "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {{name: cluster}}\nspec:\n  nodeDisruptionPolicy:\n{yaml}"
    );
    let mc = MachineConfiguration::from_slice(doc.as_bytes()).unwrap();
    PolicyOptions {
        policies: ClusterPolicies::merged(&mc.spec.node_disruption_policy),
        ..PolicyOptions::default()
    }
}

#[test]
fn every_change_names_the_entry_that_chose_its_actions() {
    let opts = with_user(
        "    files:\n    - path: /etc/foo.conf\n      actions: [{type: Restart, restart: {serviceName: foo.service}}]\n    units:\n    - name: foo.service\n      actions: [{type: DaemonReload}]\n",
    );
    let unit = |c: &str| json!([{"name": "foo.service", "contents": c}]);
    let old = mc(
        "a",
        &[
            ("/etc/containers/registries.conf", ""),
            ("/etc/foo.conf", "1"),
        ],
        unit("a"),
        json!({}),
    );
    let new = mc(
        "b",
        &[
            (
                "/etc/containers/registries.conf",
                "unqualified-search-registries = [\"quay.io\"]\n",
            ),
            ("/etc/foo.conf", "2"),
            ("/etc/containers/registries.d/x.yaml", "x"),
        ],
        unit("b"),
        json!({}),
    );
    let plan = Plan::new(&old, &new, &opts).unwrap();
    assert_eq!(
        plan.explain(),
        [
            "/etc/containers/registries.d/x.yaml: Reload crio.service (default policy /etc/containers/registries.d)",
            "/etc/containers/registries.conf: Special (default policy)",
            "/etc/foo.conf: Restart foo.service (cluster policy /etc/foo.conf)",
            "unit foo.service: DaemonReload (cluster policy foo.service)",
            "SSH keys: None (default policy)",
        ]
    );
    assert_eq!(
        plan.decisions[2].rule,
        Rule::Policy {
            origin: Origin::Cluster,
            entry: "/etc/foo.conf".into()
        }
    );
    assert!(!plan.reboot);

    // One file no policy covers reboots the node, and says which.
    let bar = mc("c", &[("/etc/bar", "x")], json!([]), json!({}));
    let plan = Plan::new(&new, &bar, &opts).unwrap();
    assert_eq!(
        plan.explain(),
        [
            "reboot: no policy matches /etc/bar",
            "/etc/containers/registries.conf: Special (default policy)",
            "/etc/containers/registries.d/x.yaml: Reload crio.service (default policy /etc/containers/registries.d)",
            "/etc/foo.conf: Restart foo.service (cluster policy /etc/foo.conf)",
            "unit foo.service: DaemonReload (cluster policy foo.service)",
            "SSH keys: None (default policy)",
        ]
    );
    assert_eq!(plan.actions, [machine_config::Action::Reboot]);
    assert_eq!(plan.decisions[0].subject, Subject::File("/etc/bar".into()));
    assert!(plan.reboot && plan.drain);

    // OS changes reboot whatever the policies say.
    let os = mc(
        "d",
        &[("/etc/bar", "x")],
        json!([]),
        json!({"osImageURL": "quay.io/os@sha256:2", "kernelArguments": ["nosmt"]}),
    );
    let plan = Plan::new(&bar, &os, &opts).unwrap();
    assert_eq!(
        plan.explain(),
        [
            "reboot: osImageURL changed",
            "reboot: kernel arguments changed"
        ]
    );

    // Nothing the policies cover.
    let same = Plan::new(&bar, &bar, &opts).unwrap();
    assert_eq!(
        same.explain(),
        ["none: no changes in files, units or SSH keys"]
    );
}

#[test]
fn the_status_the_operator_computes() {
    let doc = r#"
apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata: {name: cluster, generation: 3}
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/foo.conf
      actions: [{type: None}]
status:
  observedGeneration: 2
"#;
    let mut mc = MachineConfiguration::from_slice(doc.as_bytes()).unwrap();
    assert!(!mc.policy_status_current());
    let status = mc.computed_policy_status();
    assert_eq!(status.observed_generation, 3);
    let mut want = default_policy();
    want.files
        .push(file_policy("/etc/foo.conf", &[act("None", None)]));
    assert_eq!(status.node_disruption_policy_status.cluster_policies, want);
    mc.status = status;
    assert!(mc.policy_status_current());
    assert_eq!(mc.status_policies().policies(), &want);
    // The status as the MCO writes it: every default entry, the SSH policy, the user's entry.
    let v = serde_json::to_value(&mc.status).unwrap();
    assert_eq!(v["observedGeneration"], 3);
    let files = v["nodeDisruptionPolicyStatus"]["clusterPolicies"]["files"]
        .as_array()
        .unwrap();
    assert_eq!(files.len(), default_policy().files.len() + 1);
    assert_eq!(
        files[3],
        json!({"path": "/etc/containers/registries.conf", "actions": [{"type": "Special"}]})
    );
    assert_eq!(
        v["nodeDisruptionPolicyStatus"]["clusterPolicies"]["sshkey"],
        json!({"actions": [{"type": "None"}]})
    );
}

/// A file's policy as the MCD finds it: one row per decision, naming the MCD function.
#[test]
fn file_policies_match_paths_as_the_mcd_does() {
    let policies = ClusterPolicies::merged(&NodeDisruptionPolicy {
        files: vec![
            file_policy("/etc/myapp/", &[act("Restart", Some("myapp.service"))]),
            file_policy("/", &[act("None", None)]),
            file_policy("/opt/tool", &[act("Drain", None)]),
            file_policy("/opt/tool/", &[act("DaemonReload", None)]),
            file_policy("/srv//data/./x", &[act("Drain", None)]),
        ],
        ..NodeDisruptionPolicy::default()
    });
    let rows: &[(&str, &str, Option<&str>)] = &[
        // IsSubdirectory cleans the policy path: a trailing slash names the directory.
        ("IsSubdirectory", "/etc/myapp/a.conf", Some("/etc/myapp/")),
        (
            "IsSubdirectory",
            "/etc/myapp/sub/b.conf",
            Some("/etc/myapp/"),
        ),
        // ... and appends a separator: the directory itself is no file under it.
        ("IsSubdirectory", "/etc/myapp", None),
        ("IsSubdirectory", "/etc/myappx/a", None),
        // `/` cleaned is `/`, plus the separator `//`: no path starts with it.
        ("IsSubdirectory", "/etc/hosts", None),
        ("IsSubdirectory", "/", Some("/")),
        // FindClosestFilePolicyPathMatch: an exact match, or the longest policy path wins.
        (
            "FindClosestFilePolicyPathMatch",
            "/opt/tool",
            Some("/opt/tool"),
        ),
        (
            "FindClosestFilePolicyPathMatch",
            "/opt/tool/bin",
            Some("/opt/tool/"),
        ),
        ("IsSubdirectory", "/srv/data/x/y", Some("/srv//data/./x")),
    ];
    for (mcd, path, want) in rows {
        assert_eq!(
            policies.file_policy(path).map(|p| p.path.as_str()),
            *want,
            "{mcd}: {path}"
        );
    }
}

/// The actions of an update from its policies: one row per reduction of
/// `calculatePostConfigChangeNodeDisruptionActionFromMCDiffs`.
#[test]
fn actions_reduce_as_the_mcd_reduces_them() {
    use machine_config::Action;
    let opts = with_user(
        "    files:\n    - {path: /etc/quiet, actions: []}\n    - {path: /etc/none, actions: [{type: None}]}\n    - path: /etc/svc\n      actions: [{type: Restart, restart: {serviceName: svc.service}}]\n    - {path: /etc/boot, actions: [{type: Reboot}]}\n",
    );
    let before = mc(
        "a",
        &[
            ("/etc/quiet", "1"),
            ("/etc/none", "1"),
            ("/etc/svc", "1"),
            ("/etc/boot", "1"),
        ],
        json!([]),
        json!({}),
    );
    let rows: &[(&str, &[&str], &[Action])] = &[
        // `actions: []` adds nothing: no None, no event, no condition.
        ("an empty action list", &["/etc/quiet"], &[]),
        ("all None: one None", &["/etc/none"], &[Action::None]),
        (
            "empty and None",
            &["/etc/quiet", "/etc/none"],
            &[Action::None],
        ),
        (
            "None goes beside other actions",
            &["/etc/none", "/etc/svc"],
            &[Action::Restart(String::new())],
        ),
        (
            "any Reboot is a single Reboot",
            &["/etc/svc", "/etc/boot"],
            &[Action::Reboot],
        ),
    ];
    for (what, changed, want) in rows {
        let files: Vec<(&str, &str)> = ["/etc/quiet", "/etc/none", "/etc/svc", "/etc/boot"]
            .into_iter()
            .map(|p| (p, if changed.contains(&p) { "2" } else { "1" }))
            .collect();
        // The same SSH key ("a"): only the files change.
        let after = mc("a", &files, json!([]), json!({}));
        let plan = Plan::new(&before, &after, &opts).unwrap();
        let want: Vec<Action> = want
            .iter()
            .map(|a| match a {
                Action::Restart(_) => Action::Restart("svc.service".into()),
                a => a.clone(),
            })
            .collect();
        assert_eq!(plan.actions, want, "{what}: {:?}", plan.explain());
    }
}

/// A user's policy as the API server validates it (the CRD's enum, CEL rules and limits), in
/// its words: one row per rule; what the API takes is taken.
#[test]
fn user_policies_are_refused_as_the_api_refuses_them() {
    let doc = |policy: &str| {
        format!(
            "apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {{name: cluster}}\nspec:\n  nodeDisruptionPolicy:\n{policy}"
        )
    };
    let at = "$.spec.nodeDisruptionPolicy";
    let rows: &[(&str, &str, Option<String>)] = &[
        (
            "a path with a trailing slash (no rule for paths)",
            "    files: [{path: /etc/myapp/, actions: [{type: None}]}]\n",
            None,
        ),
        (
            "any path",
            "    files: [{path: /, actions: []}, {path: relative, actions: []}]\n",
            None,
        ),
        ("an empty action list", "    sshkey: {actions: []}\n", None),
        (
            "Special is the operator's own (the spec's enum)",
            "    files: [{path: /etc/a, actions: [{type: Special}]}]\n",
            Some(format!(
                "{at}.files.0.actions.0.type: Unsupported value: \"Special\": supported values: \"Reboot\", \"Drain\", \"Reload\", \"Restart\", \"DaemonReload\", \"None\""
            )),
        ),
        (
            "None standalone (CEL)",
            "    files: [{path: /etc/a, actions: [{type: None}, {type: Drain}]}]\n",
            Some(format!(
                "{at}.files.0.actions: None action can only be specified standalone, as it will override any other actions"
            )),
        ),
        (
            "Reboot standalone (CEL)",
            "    sshkey: {actions: [{type: Drain}, {type: Reboot}]}\n",
            Some(format!(
                "{at}.sshkey.actions: Reboot action can only be specified standalone, as it will override any other actions"
            )),
        ),
        (
            "reload only with Reload (CEL)",
            "    units: [{name: a.service, actions: [{type: Drain, reload: {serviceName: a.service}}]}]\n",
            Some(format!(
                "{at}.units.0.actions.0: reload is required when type is Reload, and forbidden otherwise"
            )),
        ),
        (
            "a unit name without a systemd suffix (CEL)",
            "    units: [{name: crio, actions: [{type: None}]}]\n",
            Some(format!(
                "{at}.units.0.name: Invalid ${{SERVICETYPE}} in service name. Expected format is ${{NAME}}${{SERVICETYPE}}, where ${{SERVICETYPE}} must be one of \".service\", \".socket\", \".device\", \".mount\", \".automount\", \".swap\", \".target\", \".path\", \".timer\",\".snapshot\", \".slice\" or \".scope\".; {at}.units.0.name: Invalid ${{NAME}} in service name. Expected format is ${{NAME}}${{SERVICETYPE}}, where {{NAME}} must be atleast 1 character long and can only consist of alphabets, digits, \":\", \"-\", \"_\", \".\", and \"\\\""
            )),
        ),
        (
            "a service name the pattern refuses (CEL)",
            "    files: [{path: /etc/a, actions: [{type: Restart, restart: {serviceName: a@b.service}}]}]\n",
            Some(format!(
                "{at}.files.0.actions.0.restart.serviceName: Invalid ${{NAME}} in service name. Expected format is ${{NAME}}${{SERVICETYPE}}, where {{NAME}} must be atleast 1 character long and can only consist of alphabets, digits, \":\", \"-\", \"_\", \".\", and \"\\\""
            )),
        ),
        (
            "at most 10 actions (MaxItems)",
            "    sshkey: {actions: [{type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}]}\n",
            Some(format!(
                "{at}.sshkey.actions: Too many: 11: must have at most 10 items"
            )),
        ),
    ];
    for (rule, policy, want) in rows {
        let got =
            MachineConfiguration::from_slice(doc(policy).as_bytes()).map_err(|e| e.to_string());
        match want {
            None => assert!(got.is_ok(), "{rule}: {got:?}"),
            Some(want) => assert_eq!(got.err().as_ref(), Some(want), "{rule}"),
        }
    }
}
