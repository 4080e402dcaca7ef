//! Rebase, package changes, cleanup and status through `DbusOsUpdater` against the rpm-ostree
//! stand-in over a real ostree sysroot, checked with libostree and the agent's own reader.

mod common;
mod os_env;

use mco_agent::os::{
    CleanupTarget, ClientConfig, KargsChange, OsError, OsImage, OsUpdater, PackageChange,
    SysrootReader, check_kernel_args, check_os_image,
};
use os_env::{BASE_KARGS, Env, EnvOptions};

const DIGEST: &str = "sha256:5a2b7e0b1f0c6c1c0a5e9b8d7c6f5e4d3c2b1a0918273645546372819a0b1c2d";

fn image() -> String {
    format!("quay.io/openshift-release-dev/ocp-v4.0-art-dev@{DIGEST}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebase_to_a_mapped_image_records_the_container_reference() {
    let env = Env::start(EnvOptions::default()).await;
    let v2 = env.sysroot.commit("fakeos/v2", "2.0").unwrap();
    env.map_image(&image(), "fakeos/v2");
    let os = env.client().await;

    let outcome = os.rebase(&OsImage::Registry(image())).await.unwrap();
    assert_eq!(outcome.method, "Rebase");
    let deps = env.deployments();
    assert_eq!(deps[0].checksum, v2);
    assert_eq!(
        deps[0].origin_value("origin", "container-image-reference"),
        Some(format!("ostree-unverified-registry:{}", image()))
    );
    assert_eq!(deps[0].origin_value("origin", "refspec"), None);
    assert_eq!(
        env.default_kargs(),
        BASE_KARGS,
        "kernel arguments carried over"
    );

    // rpm-ostree's view.
    let status = os.status().await.unwrap();
    let next = status.default_deployment().unwrap();
    assert_eq!(next.checksum, v2);
    assert_eq!(next.version.as_deref(), Some("2.0"));
    assert_eq!(next.image_url(), Some(image()));
    assert_eq!(next.kargs.as_deref(), Some(deps[0].options.as_str()));
    assert_eq!(
        status.deployments[1].origin.as_deref(),
        Some("fakeos/stable")
    );

    // The agent's libostree reader (the mco-sysroot-status helper) agrees, and the MCD checks
    // pass on it.
    let state = SysrootReader::new(common::sysroot_reader_bin())
        .read(env.sysroot.path())
        .await
        .unwrap();
    assert_eq!(state.status.deployments.len(), 2);
    for (a, b) in state.status.deployments.iter().zip(&status.deployments) {
        assert_eq!(
            (&a.id, &a.checksum, &a.kargs),
            (&b.id, &b.checksum, &b.kargs)
        );
        assert_eq!(a.container_image_reference, b.container_image_reference);
    }
    assert_eq!(state.booted(), None, "a test sysroot is not booted");
    let current = state.booted_or_default().unwrap();
    check_os_image(&image(), current).unwrap();
    check_kernel_args(&["rw".to_string()], current.kargs.as_deref().unwrap()).unwrap();
    assert_eq!(state.rollback().unwrap().checksum, deps[1].checksum);
    let e = check_os_image("quay.io/other@sha256:1", current).unwrap_err();
    assert!(e.to_string().starts_with("expected target osImageURL \"quay.io/other@sha256:1\", have \"quay.io/openshift-release-dev/"));

    // Already there: no transaction (rpm-ostree would refuse "Old and new refs are equal").
    let again = os.rebase(&OsImage::Registry(image())).await.unwrap();
    assert!(!again.started_here);
    assert_eq!(env.deployments().len(), 2);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebase_from_containers_storage_by_digest_ref_with_locked_finalization() {
    let env = Env::start(EnvOptions::default()).await;
    // No image map entry: the stand-in finds the commit by the digest-derived ref.
    let hex = DIGEST.trim_start_matches("sha256:");
    let v3 = env
        .sysroot
        .commit(&format!("mco-image/sha256/{hex}"), "3.0")
        .unwrap();
    // With lock-finalization configured the rebase goes through UpdateDeployment.
    let os = env
        .client_with(ClientConfig {
            lock_finalization: true,
            ..Default::default()
        })
        .await;
    let outcome = os
        .rebase(&OsImage::ContainersStorage(image()))
        .await
        .unwrap();
    assert_eq!(outcome.method, "UpdateDeployment");
    let deps = env.deployments();
    assert_eq!(deps[0].checksum, v3);
    assert_eq!(
        deps[0].origin_value("origin", "container-image-reference"),
        Some(format!(
            "ostree-unverified-image:containers-storage:{}",
            image()
        ))
    );
    assert_eq!(
        os.status().await.unwrap().deployments[0].image_url(),
        Some(image())
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_type_switch_revert_and_extensions_are_recorded_in_the_origin() {
    let env = Env::start(EnvOptions::default()).await;
    let os = env.client().await;
    let base = env.deployments()[0].checksum.clone();

    let rt = PackageChange::kernel_type("realtime").unwrap().unwrap();
    os.update_deployment(&rt).await.unwrap();
    let d = &env.deployments()[0];
    assert_eq!(d.checksum, base, "no new base pulled");
    assert_eq!(
        d.origin_value("origin", "baserefspec").as_deref(),
        Some("fakeos/stable")
    );
    assert_eq!(
        d.origin_value("packages", "requested").as_deref(),
        Some("kernel-rt-core;kernel-rt-modules;kernel-rt-modules-extra;")
    );
    assert_eq!(
        d.origin_value("overrides", "remove").as_deref(),
        Some("kernel;kernel-core;kernel-modules;kernel-modules-core;kernel-modules-extra;")
    );
    let status = os.status().await.unwrap();
    let next = status.default_deployment().unwrap();
    assert_eq!(next.requested_packages, rt.install);
    assert_eq!(next.requested_base_removals, rt.override_remove);

    // Doing it twice is refused with rpm-ostree's message.
    let err = os.update_deployment(&rt).await.unwrap_err();
    assert!(
        matches!(&err, OsError::Transaction { method, message }
            if method == "UpdateDeployment"
            && message == "Package/capability 'kernel-rt-core' is already requested"),
        "{err}"
    );

    // The MCD's revert, computed from what is deployed.
    let revert = PackageChange::revert_kernel(next).unwrap();
    os.update_deployment(&revert).await.unwrap();
    let d = &env.deployments()[0];
    assert_eq!(
        d.origin_value("origin", "refspec").as_deref(),
        Some("fakeos/stable")
    );
    assert_eq!(d.origin_value("packages", "requested"), None);
    assert_eq!(d.origin_value("overrides", "remove"), None);

    let ext = PackageChange::extensions(&["usbguard".into(), "kerberos".into()], &[]);
    os.update_deployment(&ext).await.unwrap();
    let status = os.status().await.unwrap();
    assert_eq!(
        status.default_deployment().unwrap().requested_packages,
        ["kerberos", "usbguard"]
    );
    let err = os
        .update_deployment(&PackageChange::extensions(&[], &["wireguard-tools".into()]))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("Package/capability 'wireguard-tools' is not currently requested"),
        "{err}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_rollback_and_pending() {
    let env = Env::start(EnvOptions::default()).await;
    let os = env.client().await;
    os.kernel_args(None, &KargsChange::from_argv(&["--append=a=1"]).unwrap())
        .await
        .unwrap();
    assert_eq!(env.deployments().len(), 2);
    // Not booted: "pending" is anchored at the merge deployment, so nothing is pending.
    let out = os.cleanup(&[CleanupTarget::Pending]).await.unwrap();
    assert_eq!(out.messages, ["Deployments unchanged."]);
    os.cleanup(&[CleanupTarget::Rollback, CleanupTarget::Base])
        .await
        .unwrap();
    let deps = env.deployments();
    assert_eq!(deps.len(), 1);
    assert!(deps[0].kargs().contains(&"a=1"), "{}", deps[0].options);
    assert_eq!(env.sysroot.bls_entries().unwrap().len(), 1);
    env.stop().await;
}
