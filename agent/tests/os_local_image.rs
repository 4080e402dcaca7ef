//! The rebase from local container storage (the MCD's `RebaseLayeredFromContainerStorage`)
//! with **real podman** over a private containers-storage (`CONTAINERS_STORAGE_CONF`, the `vfs`
//! driver), and the rpm-ostree stand-in over a real ostree sysroot. The registry needs
//! credentials the node does not have (a disconnected node): the image podman holds is rebased
//! to all the same, from `containers-storage`, where no registry is asked. The temporary
//! signature policy of that rebase is checked with the **real skopeo**, whose policy code
//! (containers/image) is the one rpm-ostreed's image proxy runs.

mod common;
mod os_env;

use std::path::{Path, PathBuf};
use std::process::Command;

use mco_agent::engine::os_image::{self, ImageHost};
use mco_agent::host::command::{HostCommands, ProcessCommands};
use mco_agent::os::{OsImage, OsUpdater};
use mco_agent::rootfs::Root;
use os_env::{Env, EnvOptions};

const HELD: &str = "registry.example/openshift/os:4.18";
const NOT_HELD: &str = "registry.example/openshift/os:4.19";

/// The storage configuration of the private containers-storage in `dir`.
fn storage_conf(dir: &Path) -> PathBuf {
    dir.join("storage.conf")
}

/// A podman whose storage lives in `dir`, holding one image for each of `names`.
fn podman_with_images(dir: &Path, names: &[&str]) -> ProcessCommands {
    let conf = storage_conf(dir);
    std::fs::write(
        &conf,
        format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
            dir.join("root").display(),
            dir.join("run").display()
        ),
    )
    .unwrap();
    for name in names {
        podman_import(dir, name, &format!("ID=rhcos\nIMAGE={name}\n"));
    }
    ProcessCommands::default().with_env("CONTAINERS_STORAGE_CONF", conf.to_str().unwrap())
}

/// Imports into the storage in `dir` an image named `name` (a name another image had moves to
/// it) whose one layer holds `os-release` with `content`: other content, another image ID.
fn podman_import(dir: &Path, name: &str, content: &str) {
    let scratch = tempfile::tempdir_in(dir).unwrap();
    std::fs::write(scratch.path().join("os-release"), content).unwrap();
    let tar = scratch.path().join("layer.tar");
    let status = Command::new("tar")
        .arg("-C")
        .arg(scratch.path())
        .arg("-cf")
        .arg(&tar)
        .arg("os-release")
        .status()
        .expect("tar");
    assert!(status.success(), "tar");
    let out = Command::new("podman")
        .env("CONTAINERS_STORAGE_CONF", storage_conf(dir))
        .arg("import")
        .arg(&tar)
        .arg(name)
        .output()
        .unwrap_or_else(|e| {
            panic!("podman is needed for this test (tests/setup.sh installs it): {e}")
        });
    assert!(
        out.status.success(),
        "podman import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_podman_holds_is_rebased_from_containers_storage_without_credentials() {
    let storage = tempfile::tempdir().unwrap();
    let podman = podman_with_images(storage.path(), &[HELD]);
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

/// A hardened node's `/etc/containers/policy.json`: anything it does not name is refused,
/// and the registry's images must be signed.
const HARDENED_POLICY: &str = r#"{
    "default": [{"type": "reject"}],
    "transports": {
        "docker": {
            "registry.example": [{
                "type": "signedBy",
                "keyType": "GPGKeys",
                "keyPath": "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"
            }]
        }
    }
}"#;

/// What rpm-ostreed does with `image`'s refspec under `policy`, with the real skopeo: for
/// `ostree-unverified-image:containers-storage:<reference>` it opens
/// `containers-storage:<reference>` through skopeo's image proxy (in podman's default store,
/// here the one `CONTAINERS_STORAGE_CONF` names), which refuses what the policy refuses before
/// reading anything else. `skopeo copy` makes the same policy check on the same reference.
/// `Ok`: the directory the image was copied to; `Err`: skopeo's complaint.
fn skopeo_opens(
    storage: &Path,
    policy: &serde_json::Value,
    image: &OsImage,
) -> Result<tempfile::TempDir, String> {
    let refspec = image.refspec();
    let source = refspec
        .strip_prefix("ostree-unverified-image:")
        .unwrap_or_else(|| panic!("{refspec} is not an image of local storage"));
    let scratch = tempfile::tempdir().unwrap();
    let policy_file = scratch.path().join("policy.json");
    std::fs::write(&policy_file, serde_json::to_vec_pretty(policy).unwrap()).unwrap();
    let copied = scratch.path().join("copied");
    let out = Command::new("skopeo")
        .env("CONTAINERS_STORAGE_CONF", storage_conf(storage))
        .arg("copy")
        .arg("--policy")
        .arg(&policy_file)
        .arg(source)
        .arg(format!("dir:{}", copied.display()))
        .output()
        .unwrap_or_else(|e| {
            panic!("skopeo is needed for this test (tests/setup.sh installs it): {e}")
        });
    if out.status.success() {
        Ok(scratch)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// skopeo's complaint when `policy` refuses `image`, as it must.
fn skopeo_refuses(storage: &Path, policy: &serde_json::Value, image: &OsImage) -> String {
    match skopeo_opens(storage, policy, image) {
        Ok(_) => panic!(
            "skopeo opened {} under a policy that must refuse it:\n{policy:#}",
            image.refspec()
        ),
        Err(refused) => refused,
    }
}

#[tokio::test]
async fn the_temporary_policy_lets_skopeo_open_the_held_image_and_no_other() {
    let storage = tempfile::tempdir().unwrap();
    let podman = podman_with_images(storage.path(), &[HELD, NOT_HELD]);
    let node_policy: serde_json::Value = serde_json::from_str(HARDENED_POLICY).unwrap();
    assert!(
        !os_image::policy_accepts_storage(&node_policy),
        "the agent patches a policy whose default is reject"
    );

    // everything the rule is made of, read as the agent reads it: podman's images and store
    let held = os_image::local_image(&podman, HELD).await.unwrap();
    let held = held.expect("podman lists the image it imported");
    let other = os_image::local_image(&podman, NOT_HELD).await.unwrap();
    let other = other.expect("podman lists the image it imported");
    let store = os_image::local_store(&podman).await.unwrap();
    assert_eq!(
        (store.driver.as_str(), Path::new(&store.graph_root)),
        ("vfs", storage.path().join("root").as_path())
    );

    // By tag, and by digest as OpenShift names an OS image. (Debian's podman 4.3 lists no
    // image for a digest filter, so the digest comes from the image podman listed by tag.)
    let by_digest = held.repo_digests.first().expect("a repo digest").clone();
    for image in [HELD, by_digest.as_str()] {
        let reference = os_image::storage_reference(image, &held);
        assert_eq!(reference, image, "the reference rebased to");
        let rebase = OsImage::ContainersStorage(reference.clone());

        // the node's policy refuses it, naming the image as containers/image resolved it
        let refused = skopeo_refuses(storage.path(), &node_policy, &rebase);
        eprintln!("{image} under the node's policy: {refused}");
        assert!(
            refused.contains("Source image rejected")
                && refused.contains(&format!("]{reference}@{} is rejected by policy", held.id)),
            "{refused}"
        );

        // the agent's patched copy accepts it: skopeo copies the image podman holds
        let patched = os_image::patched_policy(
            node_policy.clone(),
            &store.driver,
            &store.graph_root,
            &reference,
            &held.id,
        )
        .unwrap();
        let copied = skopeo_opens(storage.path(), &patched, &rebase)
            .unwrap_or_else(|e| panic!("the patched policy refuses {reference}: {e}\n{patched:#}"));
        // the dir transport names the config blob by its digest, the image's ID
        assert!(
            copied.path().join("copied").join(&held.id).is_file(),
            "skopeo copied another image than {}",
            held.id
        );

        // and refuses any other image of the same store
        let other_image = OsImage::ContainersStorage(NOT_HELD.into());
        let refused = skopeo_refuses(storage.path(), &patched, &other_image);
        assert!(
            refused.contains(&format!("]{NOT_HELD}@{} is rejected by policy", other.id)),
            "{refused}"
        );
    }

    // The rule names the image by ID too: once the tag has moved to another image (pushed
    // over it between podman's answer and the rebase), what the tag names is refused.
    let patched = os_image::patched_policy(
        node_policy,
        &store.driver,
        &store.graph_root,
        HELD,
        &held.id,
    )
    .unwrap();
    podman_import(storage.path(), HELD, "ID=rhcos\nIMAGE=pushed over\n");
    let moved = os_image::local_image(&podman, HELD).await.unwrap();
    let moved = moved.expect("podman lists the image it imported");
    assert_ne!(moved.id, held.id, "the tag names another image");
    let rebase = OsImage::ContainersStorage(HELD.into());
    let refused = skopeo_refuses(storage.path(), &patched, &rebase);
    assert!(
        refused.contains(&format!("]{HELD}@{} is rejected by policy", moved.id)),
        "{refused}"
    );
}
