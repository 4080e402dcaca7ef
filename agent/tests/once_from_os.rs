//! `once-from --root` with OS changes: the files go under the root, the kernel arguments go to
//! rpm-ostree on the system bus (the stand-in over a real ostree sysroot, on a private bus).

mod common;
mod os_env;

use std::fs;

use common::seed_root;
use os_env::{Env, EnvOptions};

const CONFIG: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: rendered-worker-kargs}
spec:
  kernelArguments: [mco.test=1, "quoted=\"a b\""]
  config:
    ignition: {version: 3.2.0}
    storage:
      files:
      - {path: /etc/mco/hello.conf, mode: 0644, contents: {source: "data:,hello%0A"}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_arguments_go_to_rpm_ostree_and_files_to_the_root() {
    let env = Env::start(EnvOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    seed_root(&root);
    let config = dir.path().join("kargs.yaml");
    fs::write(&config, CONFIG).unwrap();

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco-agent"))
        .arg("once-from")
        .arg(&config)
        .arg("--root")
        .arg(&root)
        .env("DBUS_SYSTEM_BUS_ADDRESS", env.bus.address())
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("OS change staged: kernel arguments: +mco.test=1 +quoted=\"a b\"\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("reboot needed: not rebooting: an alternate root is never rebooted\n"),
        "{stdout}"
    );
    assert_eq!(
        fs::read_to_string(root.join("etc/mco/hello.conf")).unwrap(),
        "hello\n"
    );
    let options = env.deployments()[0].options.clone();
    for want in ["root=LABEL=root rw ", " mco.test=1 quoted=\"a b\""] {
        assert!(options.contains(want), "{want} not in {options}");
    }
    // The root cannot be booted here, so the update is recorded as done.
    let current: serde_json::Value = serde_json::from_slice(
        &fs::read(root.join("etc/machine-config-daemon/currentconfig")).unwrap(),
    )
    .unwrap();
    assert_eq!(current["metadata"]["name"], "rendered-worker-kargs");
    assert!(
        !root
            .join("etc/machine-config-daemon/mco-agent-update.json")
            .exists()
    );
    env.stop().await;
}
