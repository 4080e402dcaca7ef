//! The shipped Deployment (`manifests/companion.yaml`) runs a command line this companion
//! accepts, and mounts every path its arguments name.

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
    let mut paths = vec![serve.cert, serve.key];
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
