//! The rebase from local container storage (the MCD's `RebaseLayeredFromContainerStorage`)
//! with **real podman** over a private containers-storage (`CONTAINERS_STORAGE_CONF`), and the
//! rpm-ostree stand-in over a real ostree sysroot. The registry needs credentials the node does
//! not have (a disconnected node): the image podman holds is rebased to all the same, from
//! `containers-storage`, where no registry is asked.

mod common;
mod os_env;

use std::path::Path;
use std::process::Command;

use mco_agent::engine::os_image::{self, ImageHost};
use mco_agent::host::command::{HostCommands, ProcessCommands};
use mco_agent::os::{OsImage, OsUpdater};
use mco_agent::rootfs::Root;
use os_env::{Env, EnvOptions};

const HELD: &str = "registry.example/openshift/os:4.18";
const NOT_HELD: &str = "registry.example/openshift/os:4.19";

/// A podman whose storage lives in `dir`, holding one image named [`HELD`].
fn podman_with_image(dir: &Path) -> ProcessCommands {
    let conf = dir.join("storage.conf");
    std::fs::write(
        &conf,
        format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
            dir.join("root").display(),
            dir.join("run").display()
        ),
    )
    .unwrap();
    let layer = dir.join("layer");
    std::fs::create_dir_all(&layer).unwrap();
    std::fs::write(layer.join("os-release"), "ID=rhcos\n").unwrap();
    let tar = dir.join("layer.tar");
    let status = Command::new("tar")
        .args(["-C"])
        .arg(&layer)
        .arg("-cf")
        .arg(&tar)
        .arg("os-release")
        .status()
        .unwrap();
    assert!(status.success(), "tar");
    let out = Command::new("podman")
        .env("CONTAINERS_STORAGE_CONF", &conf)
        .arg("import")
        .arg(&tar)
        .arg(HELD)
        .output()
        .unwrap_or_else(|e| {
            panic!("podman is needed for this test (tests/setup.sh installs it): {e}")
        });
    assert!(
        out.status.success(),
        "podman import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    ProcessCommands::default().with_env("CONTAINERS_STORAGE_CONF", conf.to_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_podman_holds_is_rebased_from_containers_storage_without_credentials() {
    let storage = tempfile::tempdir().unwrap();
    let podman = podman_with_image(storage.path());
    let env = Env::start(EnvOptions {
        auth_required: &["registry.example"],
        ..Default::default()
    })
    .await;
    let v2 = env.sysroot.commit("fakeos/v2", "2.0").unwrap();
    env.map_image(HELD, "fakeos/v2");
    env.map_image(NOT_HELD, "fakeos/v2");
    let os = env.client().await;
    let node = tempfile::tempdir().unwrap();
    let root = Root::open(node.path()).unwrap();

    // podman says which image it holds, as the MCD asks it
    assert!(
        os_image::local_image(&podman, HELD)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        os_image::local_image(&podman, NOT_HELD).await.unwrap(),
        None
    );

    // the registry refuses this node (no pull secret)...
    let refused = os.rebase(&OsImage::Registry(NOT_HELD.into())).await;
    let refused = refused.unwrap_err().to_string();
    assert!(
        refused.contains("unauthorized: authentication required"),
        "{refused}"
    );

    // ...but the image podman holds is rebased from local storage
    let host = ImageHost {
        root: &root,
        commands: &podman as &dyn HostCommands,
        systemd: None,
    };
    os_image::rebase(&os, HELD, None, Some(host)).await.unwrap();
    let deps = env.deployments();
    assert_eq!(deps[0].checksum, v2);
    assert_eq!(
        deps[0].origin_value("origin", "container-image-reference"),
        Some(format!("ostree-unverified-image:containers-storage:{HELD}"))
    );
    assert_eq!(
        os.status().await.unwrap().deployments[0]
            .image_url()
            .as_deref(),
        Some(HELD)
    );
    env.stop().await;
}
