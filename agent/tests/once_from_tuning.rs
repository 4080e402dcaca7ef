//! `/etc/pivot/kernel-args` (the MCD's `UpdateTuningArgs`) in a whole update: `once-from
//! --root` with the tuning file in the root, the change going to rpm-ostree on the system bus
//! (the stand-in over a real ostree sysroot, on a private bus) after the config's own kernel
//! arguments, checked in the BLS entry libostree wrote.

mod common;
mod os_env;

use std::fs;
use std::path::Path;

use common::seed_root;
use os_env::{Env, EnvOptions};

const CONFIG: &str = r#"
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: rendered-worker-tuning}
spec:
  kernelArguments: [mco.test=1]
  config:
    ignition: {version: 3.2.0}
    storage:
      files:
      - {path: /etc/mco/hello.conf, mode: 0644, contents: {source: "data:,hello%0A"}}
"#;

/// A root on RHCOS (where only `nosmt` is tunable) whose kernel runs with `cmdline`.
fn rhcos_root(root: &Path, tuning: &str, cmdline: &str) {
    seed_root(root);
    fs::write(
        root.join("etc/os-release"),
        "ID=\"rhcos\"\nVERSION_ID=\"4.16\"\n",
    )
    .unwrap();
    fs::create_dir_all(root.join("etc/pivot")).unwrap();
    fs::write(root.join("etc/pivot/kernel-args"), tuning).unwrap();
    fs::create_dir_all(root.join("proc")).unwrap();
    fs::write(root.join("proc/cmdline"), cmdline).unwrap();
}

async fn once_from(env: &Env, dir: &Path, root: &Path) -> (bool, String) {
    let config = dir.join("config.yaml");
    fs::write(&config, CONFIG).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco-agent"))
        .arg("once-from")
        .arg(&config)
        .arg("--root")
        .arg(root)
        .env("DBUS_SYSTEM_BUS_ADDRESS", env.bus.address())
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tuning_file_changes_go_to_rpm_ostree_after_the_configs_kernel_arguments() {
    let env = Env::start(EnvOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    // nosmt is added; quiet is not tunable on RHCOS; rw is on the command line already.
    rhcos_root(
        &root,
        "# SMT off for this node\nADD nosmt\nDELETE quiet\nADD rw\n",
        "BOOT_IMAGE=/vmlinuz root=LABEL=root rw quiet\n",
    );
    let (ok, out) = once_from(&env, dir.path(), &root).await;
    assert!(ok, "{out}");
    assert!(
        out.contains("OS change staged: /etc/pivot/kernel-args: --append-if-missing=nosmt\n"),
        "{out}"
    );
    let options = env.deployments()[0].options.clone();
    assert!(
        options.ends_with(" mco.test=1 nosmt"),
        "the tuning comes after the config's arguments: {options}"
    );
    assert_eq!(
        fs::read_to_string(root.join("etc/mco/hello.conf")).unwrap(),
        "hello\n"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_tuning_file_fails_the_update_naming_the_file_and_line() {
    let env = Env::start(EnvOptions::default()).await;
    let before = env.default_kargs();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    rhcos_root(&root, "ADD nosmt\nadd nosmt\n", "root=LABEL=root rw\n");
    let (ok, out) = once_from(&env, dir.path(), &root).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains(
            "/etc/pivot/kernel-args line 2: expected \"ADD <argument>\" or \"DELETE <argument>\": \"add nosmt\""
        ),
        "{out}"
    );
    assert_eq!(
        env.default_kargs(),
        before,
        "neither the tuning file nor the config's arguments were applied"
    );
    assert!(
        !root.join("etc/mco/hello.conf").exists(),
        "the update's files were rolled back"
    );
    env.stop().await;
}
