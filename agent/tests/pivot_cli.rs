//! `mco-agent pivot` on a root, with rpm-ostree the stand-in over a real ostree sysroot on a
//! private bus: the image is rebased to through rpm-ostree, `--dry-run` changes nothing, a bad
//! image or an update in progress changes nothing, and a registry that needs credentials is
//! pulled from only with the pull secret the agent arranges.

mod common;
mod os_env;

use std::fs;
use std::path::Path;

use common::seed_root;
use machine_config::{MachineConfig, MachineConfigSpec};
use mco_agent::engine::record::{self, Step, UpdateRecord};
use mco_agent::rootfs::Root;
use os_env::{Env, EnvOptions};

const IMAGE: &str = "registry.example/ocl/worker@sha256:2222222222222222222222222222222222222222222222222222222222222222";
const SECRET: &str = r#"{"auths":{"registry.example":{"auth":"dXNlcjpwYXNz"}}}"#;

async fn pivot(env: &Env, root: &Path, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco-agent"))
        .arg("pivot")
        .args(args)
        .arg("--root")
        .arg(root)
        .arg("--kubeconfig")
        .arg(root.join("no-kubeconfig"))
        .env("DBUS_SYSTEM_BUS_ADDRESS", env.bus.address())
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn origin(env: &Env) -> String {
    env.deployments()[0].origin.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pivot_rebases_to_the_image_with_the_pull_secret() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    seed_root(&root);
    let env = Env::start(EnvOptions {
        auth_required: &["registry.example"],
        auth_root: Some(root.clone()),
        ..EnvOptions::default()
    })
    .await;
    let v2 = env.sysroot.commit("fakeos/v2", "2.0").unwrap();
    env.map_image(IMAGE, "fakeos/v2");
    let before = env.deployments();

    // Malformed: refused before anything is looked at.
    let (ok, _, err) = pivot(&env, &root, &["https://registry.example/os"]).await;
    assert!(!ok && err.contains("a URL"), "{err}");

    // A dry run says what would change and changes nothing.
    let (ok, out, err) = pivot(&env, &root, &["--dry-run", IMAGE]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("would rebase the OS from"), "{out}");
    assert!(out.contains("(dry run: nothing changed)"), "{out}");
    assert_eq!(env.deployments(), before);
    assert!(!root.join("run/ostree/auth.json").exists());

    // The registry needs credentials and the node has none: the pull is refused.
    let (ok, out, err) = pivot(&env, &root, &["--skip-reboot", IMAGE]).await;
    assert!(!ok, "{out}{err}");
    assert!(err.contains("unauthorized"), "{err}");
    assert_eq!(env.deployments(), before);

    // With the kubelet's pull secret (no merged one), /run/ostree/auth.json points at it.
    fs::create_dir_all(root.join("var/lib/kubelet")).unwrap();
    fs::write(root.join("var/lib/kubelet/config.json"), SECRET).unwrap();
    let (ok, out, err) = pivot(&env, &root, &["--skip-reboot", IMAGE]).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains(&format!("staged {IMAGE}")), "{out}");
    assert!(
        out.contains("reboot needed: not rebooting (--skip-reboot)"),
        "{out}"
    );
    assert_eq!(
        fs::read_link(root.join("run/ostree/auth.json")).unwrap(),
        Path::new("/var/lib/kubelet/config.json")
    );
    // The secret is never logged.
    assert!(!err.contains("dXNlcjpwYXNz") && !out.contains("dXNlcjpwYXNz"));
    let deployments = env.deployments();
    assert_eq!(deployments[0].checksum, v2);
    assert!(
        origin(&env).contains(&format!(
            "container-image-reference=ostree-unverified-registry:{IMAGE}"
        )),
        "{}",
        origin(&env)
    );
    // Why is in the log.
    assert!(err.contains("mco-agent pivot: rebasing the OS"), "{err}");

    // Running it again: the sysroot is not booted, the default deployment is the image.
    let (ok, out, _) = pivot(&env, &root, &[IMAGE]).await;
    assert!(ok && out.contains("already running"), "{out}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pivot_refuses_while_an_update_is_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    seed_root(&root);
    let env = Env::start(EnvOptions::default()).await;
    env.sysroot.commit("fakeos/v2", "2.0").unwrap();
    env.map_image(IMAGE, "fakeos/v2");
    let before = env.deployments();
    let mc = |name: &str| {
        MachineConfig::new(
            name,
            MachineConfigSpec {
                config: Some(machine_config::IgnitionJson::from_value(
                    serde_json::json!({"ignition": {"version": "3.2.0"}}),
                )),
                ..Default::default()
            },
        )
    };
    let rec = UpdateRecord::new(mc("rendered-a"), mc("rendered-b"), Step::Os, "boot-1");
    record::store(&Root::open(&root).unwrap(), &rec).unwrap();
    let (ok, out, err) = pivot(&env, &root, &["--skip-reboot", IMAGE]).await;
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains("an update is in progress (rendered-a -> rendered-b"),
        "{err}"
    );
    assert_eq!(env.deployments(), before);
    env.stop().await;
}

/// `--dry-run` with no rpm-ostree to ask (its bus is gone) still says the target, that a tag is
/// not pinned, what it would do and what is unknown, and changes nothing.
#[test]
fn a_dry_run_without_rpm_ostree_says_what_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    seed_root(&root);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mco-agent"))
        .args(["pivot", "--dry-run", "quay.io/openshift/os:4.18", "--root"])
        .arg(&root)
        .arg("--kubeconfig")
        .arg(root.join("no-kubeconfig"))
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            format!("unix:path={}", dir.path().join("no-bus").display()),
        )
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "would rebase the OS from the running OS (unknown, below) to quay.io/openshift/os:4.18",
        "warning: quay.io/openshift/os:4.18 is not pinned by digest",
        "unknown: the running OS image, and whether it is quay.io/openshift/os:4.18 already (",
        "(dry run: nothing changed)",
    ] {
        assert!(stdout.contains(line), "{line:?} not in:\n{stdout}");
    }
}
