//! `mco-companion render`: YAML and JSON print the same rendered MachineConfig, per pool and
//! per node, and errors name what is missing.

mod common;

use std::process::Command;

use common::fixture_manifests;
use machine_config::MachineConfig;

fn render(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mco-companion"))
        .arg("render")
        .arg("--manifests")
        .arg(fixture_manifests())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn yaml_and_json_agree_for_pools_and_nodes() {
    for args in [
        vec!["--pool", "worker"],
        vec!["--pool", "infra"],
        vec!["--pool", "worker", "--node", "worker-0"],
    ] {
        let yaml = render(&[&args[..], &["-o", "yaml"]].concat());
        let json = render(&[&args[..], &["-o", "json"]].concat());
        assert!(yaml.status.success() && json.status.success(), "{args:?}");
        let from_yaml = MachineConfig::from_slice(&yaml.stdout).unwrap();
        let from_json = MachineConfig::from_slice(&json.stdout).unwrap();
        assert_eq!(from_yaml, from_json, "{args:?}");
        let prefix = match args.as_slice() {
            [_, pool, _, node] => format!("rendered-{pool}-{node}-"),
            [_, pool] => format!("rendered-{pool}-"),
            _ => unreachable!(),
        };
        assert!(
            from_json.name().starts_with(&prefix),
            "{}",
            from_json.name()
        );
    }
    // a node without configs of its own gets the pool's render
    let pool =
        MachineConfig::from_slice(&render(&["--pool", "worker", "-o", "json"]).stdout).unwrap();
    let other = MachineConfig::from_slice(
        &render(&["--pool", "worker", "--node", "worker-9", "-o", "json"]).stdout,
    )
    .unwrap();
    assert_eq!(pool, other);
}

#[test]
fn errors_name_the_pool() {
    let out = render(&["--pool", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no MachineConfigPool \"nope\""), "{stderr}");
}
