//! The shipped Deployment (`manifests/companion.yaml`) runs a command line this companion
//! accepts, with client authentication on, and mounts every path its arguments name; the
//! shipped NetworkPolicy (`manifests/networkpolicy.yaml`) admits the machine network to the
//! config server's ports and no pod.

use clap::Parser as _;
use mco_companion::cli::{Cli, Command};
use serde_json::Value;

#[test]
fn the_deployments_arguments_parse_and_name_mounted_paths() {
    let deployment = mco_test_support::shipped::object("Deployment", "mco-companion").unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("the container has args")
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let cli = Cli::try_parse_from(std::iter::once("mco-companion".to_string()).chain(args))
        .unwrap_or_else(|e| panic!("the shipped arguments do not parse: {e}"));
    let Command::Serve(serve) = cli.command else {
        panic!("the Deployment does not run serve");
    };
    let mounts: Vec<&str> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    // nodes prove their names (per-node configs, FleetLock): client authentication is on
    let client_ca = serve
        .client_ca
        .clone()
        .expect("the shipped Deployment passes --client-ca");
    // the status page listens on the pod's loopback only (docs/security.md, "The status page")
    let status = serve
        .status_listen
        .expect("the shipped Deployment serves the status page");
    assert!(
        status.ip().is_loopback(),
        "--status-listen {status} is not loopback"
    );
    let mut paths = vec![serve.cert, serve.key, client_ca];
    paths.extend(serve.kubeconfig);
    paths.extend(serve.bootstrap_tokens);
    for path in paths {
        assert!(
            mounts.iter().any(|m| path.starts_with(m)),
            "{} is on no volume mount ({mounts:?})",
            path.display()
        );
    }
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    let tokens = volumes
        .iter()
        .find(|v| v["name"] == "bootstrap-tokens")
        .expect("a bootstrap-tokens volume");
    // a cluster without tokens still starts the pod
    assert_eq!(tokens["secret"]["optional"], Value::Bool(true));
}

#[test]
fn the_network_policy_admits_the_machine_network_to_the_config_servers_ports_only() {
    let policy = mco_test_support::shipped::object("NetworkPolicy", "mco-companion")
        .expect("manifests/ ships a NetworkPolicy for the companion");
    let deployment = mco_test_support::shipped::object("Deployment", "mco-companion").unwrap();
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let spec = &policy["spec"];
    assert_eq!(
        policy["metadata"]["namespace"],
        deployment["metadata"]["namespace"]
    );
    for (key, value) in spec["podSelector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &pod_labels[key], value,
            "the policy does not select the companion's pod"
        );
    }
    assert_eq!(spec["policyTypes"], serde_json::json!(["Ingress"]));
    let rules = spec["ingress"].as_array().unwrap();
    assert!(!rules.is_empty());
    let container_port =
        deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
            .clone();
    for rule in rules {
        // an empty or missing `from` admits every source, a pod or namespace selector pods
        let from = rule["from"]
            .as_array()
            .expect("each rule names its sources");
        assert!(!from.is_empty());
        for peer in from {
            assert!(
                peer.get("podSelector").is_none() && peer.get("namespaceSelector").is_none(),
                "a rule admits pods: {peer}"
            );
            assert!(peer["ipBlock"]["cidr"].is_string(), "{peer}");
        }
        let ports: Vec<&Value> = rule["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["port"])
            .collect();
        assert!(ports.contains(&&container_port), "{ports:?}");
        assert!(
            ports
                .iter()
                .all(|p| [22623, 22624].contains(&p.as_i64().unwrap_or(0)))
        );
    }
}

/// Three replicas with leader election: spread over nodes, each ready once it serves, a budget
/// that lets a drain take one at a time, a rolling update that never has two down, and the
/// downward API giving each its identity and the Lease's namespace (where the shipped Role lets
/// it write Leases).
#[test]
fn the_deployment_runs_three_replicas_with_leader_election() {
    let deployment = mco_test_support::shipped::object("Deployment", "mco-companion").unwrap();
    let spec = &deployment["spec"];
    let pod = &spec["template"]["spec"];
    let container = &pod["containers"][0];
    let pod_labels = &spec["template"]["metadata"]["labels"];
    let namespace = &deployment["metadata"]["namespace"];
    assert_eq!(spec["replicas"], 3);
    assert_eq!(spec["strategy"]["type"], "RollingUpdate");
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 1);
    let spread = &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0]["podAffinityTerm"];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(&spread["labelSelector"]["matchLabels"], pod_labels);
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["path"], "/healthz", "{probe}");
        assert_eq!(container[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
    }
    let env = container["env"].as_array().expect("the container has env");
    for (name, field) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        let var = env.iter().find(|e| e["name"] == name).expect(name);
        assert_eq!(var["valueFrom"]["fieldRef"]["fieldPath"], field, "{name}");
    }
    let budget = mco_test_support::shipped::object("PodDisruptionBudget", "mco-companion")
        .expect("manifests/ ships a PodDisruptionBudget for the companion");
    assert_eq!(&budget["metadata"]["namespace"], namespace);
    assert_eq!(&budget["spec"]["selector"]["matchLabels"], pod_labels);
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
    // the leader election's Lease: in the pod's namespace, which the Role covers
    let role = mco_test_support::shipped::object("Role", "mco-companion-fleet-lock").unwrap();
    assert_eq!(&role["metadata"]["namespace"], namespace);
    let rule = &role["rules"][0];
    assert_eq!(rule["resources"], serde_json::json!(["leases"]));
    for verb in ["get", "create", "update"] {
        assert!(
            rule["verbs"].as_array().unwrap().iter().any(|v| v == verb),
            "the Role lacks {verb} on leases"
        );
    }
}
