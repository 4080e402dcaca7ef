use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use machine_config::controller_config::{ControllerConfigSpec, ImageRegistryBundle};
use machine_config::mco::paths::{
    BOOTSTRAP_KUBECONFIG, CLOUD_CA_BUNDLE, KUBELET_CA, KUBELET_KUBECONFIG, MERGED_PULL_SECRET,
};
use mco_test_support::tls::TestCa;

use super::server_ca::{self, certificate_name};
use super::*;

fn host(dir: &Path, path: &str) -> PathBuf {
    dir.join(path.trim_start_matches('/'))
}

fn mode(dir: &Path, path: &str) -> u32 {
    fs::symlink_metadata(host(dir, path))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn bundle(file: &str, data: &str) -> ImageRegistryBundle {
    ImageRegistryBundle {
        file: file.into(),
        data: data.as_bytes().to_vec(),
    }
}

fn spec() -> ControllerConfigSpec {
    ControllerConfigSpec {
        kube_api_server_serving_ca_data: b"kubelet-ca".to_vec(),
        cloud_provider_ca_data: Vec::new(),
        image_registry_bundle_data: vec![bundle("image-registry.svc..5000", "internal\n")],
        image_registry_bundle_user_data: vec![bundle("quay.example", "user")],
        internal_registry_pull_secret: br#"{"auths":{}}"#.to_vec(),
    }
}

fn certs_dir(dir: &Path) -> PathBuf {
    host(dir, "/etc/docker/certs.d")
}

/// The MCD's rules: a newline appended (empty data is "\n"), new files 0644 (the pull secret
/// 0600), registry directories from `..` → `:`, CA files written as they are.
#[test]
fn writes_every_file_with_the_mcd_rules() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    let written = write_certificates(&root, &spec(), BTreeSet::new).unwrap();
    for (path, contents, file_mode) in [
        (MERGED_PULL_SECRET, "{\"auths\":{}}\n", 0o600),
        (KUBELET_CA, "kubelet-ca\n", 0o644),
        (CLOUD_CA_BUNDLE, "\n", 0o644),
        (
            "/etc/docker/certs.d/image-registry.svc:5000/ca.crt",
            "internal\n",
            0o644,
        ),
        ("/etc/docker/certs.d/quay.example/ca.crt", "user", 0o644),
    ] {
        assert_eq!(
            fs::read_to_string(host(dir.path(), path)).unwrap(),
            contents,
            "{path}"
        );
        assert_eq!(mode(dir.path(), path), file_mode, "{path}");
        assert!(written.files.contains(&PathBuf::from(path)), "{path}");
    }
    assert_eq!(mode(dir.path(), "/etc/docker/certs.d"), 0o755);
    assert_eq!(mode(dir.path(), "/etc/kubernetes"), 0o755);
    assert!(written.removed.is_empty());
}

/// A second sync of the same data writes nothing (no file is replaced), a registry with a port
/// included; an existing file keeps its mode; changed data is rewritten.
#[test]
fn unchanged_files_are_left_alone_and_modes_kept() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::open(dir.path()).unwrap();
    write_certificates(&root, &spec(), BTreeSet::new).unwrap();
    let port_ca = host(
        dir.path(),
        "/etc/docker/certs.d/image-registry.svc:5000/ca.crt",
    );
    let inode = fs::metadata(&port_ca).unwrap().ino();
    fs::set_permissions(
        host(dir.path(), KUBELET_CA),
        fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    let again = write_certificates(&root, &spec(), BTreeSet::new).unwrap();
    assert!(!again.changed(), "{again:?}");
    assert_eq!(fs::metadata(&port_ca).unwrap().ino(), inode);

    let mut rotated = spec();
    rotated.kube_api_server_serving_ca_data = b"new-ca\n".to_vec();
    let written = write_certificates(&root, &rotated, BTreeSet::new).unwrap();
    assert_eq!(written.files, vec![PathBuf::from(KUBELET_CA)]);
    assert_eq!(
        fs::read_to_string(host(dir.path(), KUBELET_CA)).unwrap(),
        "new-ca\n"
    );
    assert_eq!(mode(dir.path(), KUBELET_CA), 0o640);
}

/// Directories under certs.d that no bundle names go with their contents; plain files, links
/// and the directories the current MachineConfig writes into stay.
#[test]
fn stale_registry_directories_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certs_dir(dir.path());
    fs::create_dir_all(certs.join("old.example/nested")).unwrap();
    fs::write(certs.join("old.example/ca.crt"), "old").unwrap();
    fs::write(certs.join("old.example/nested/x"), "x").unwrap();
    fs::create_dir_all(certs.join("from-a-machineconfig")).unwrap();
    fs::write(certs.join("from-a-machineconfig/ca.crt"), "mc").unwrap();
    fs::write(certs.join(".create"), "").unwrap();
    std::os::unix::fs::symlink("/etc", certs.join("a-link")).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let keep = BTreeSet::from(["from-a-machineconfig".to_string()]);
    let written = write_certificates(&root, &spec(), || keep.clone()).unwrap();
    assert_eq!(written.removed, vec!["old.example".to_string()]);
    let mut left: Vec<String> = fs::read_dir(&certs)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            ".create",
            "a-link",
            "from-a-machineconfig",
            "image-registry.svc:5000",
            "quay.example"
        ]
    );
    // The link's target was not touched.
    assert!(dir.path().join("etc/docker").is_dir());

    // A bundle removed from the ControllerConfig takes its directory with it.
    let mut fewer = spec();
    fewer.image_registry_bundle_user_data.clear();
    let written = write_certificates(&root, &fewer, || keep.clone()).unwrap();
    assert_eq!(written.removed, vec!["quay.example".to_string()]);
    assert!(!certs.join("quay.example").exists());
}

/// A registry name that is not one directory name is refused before anything is written,
/// naming the value.
#[test]
fn a_hostile_registry_name_changes_nothing() {
    for (file, why) in [
        ("../../etc/shadow", "contains \"/\""),
        ("", "empty"),
        (".", "\".\""),
        ("a/b", "contains \"/\""),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let mut bad = spec();
        bad.image_registry_bundle_user_data.push(bundle(file, "x"));
        let err = write_certificates(&root, &bad, BTreeSet::new).unwrap_err();
        let message = err.to_string();
        assert!(message.contains(&format!("{file:?}")), "{message}");
        assert!(message.contains(why), "{message}");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{file}: something was written"
        );
    }
}

/// A write that fails names the file.
#[test]
fn a_failed_write_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(host(dir.path(), KUBELET_CA)).unwrap();
    fs::write(host(dir.path(), KUBELET_CA).join("x"), "").unwrap();
    let root = Root::open(dir.path()).unwrap();
    let err = write_certificates(&root, &spec(), BTreeSet::new).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("could not write /etc/kubernetes/kubelet-ca.crt: "),
        "{err}"
    );
}

#[test]
fn registry_directories_of_a_config() {
    let config: machine_config::Config = serde_json::from_value(serde_json::json!({
        "ignition": {"version": "3.5.0"},
        "storage": {"files": [
            {"path": "/etc/docker/certs.d/mirror.example:443/ca.crt"},
            {"path": "/etc/docker/certs.d/x/sub/client.cert"},
            {"path": "/etc/docker/certs.d/.create"},
            {"path": "/etc/other/ca.crt"}
        ]}
    }))
    .unwrap();
    assert_eq!(
        registry_dirs_of(&config),
        BTreeSet::from(["mirror.example:443".to_string(), "x".to_string()])
    );
}

fn kubeconfig(ca: &[u8]) -> String {
    use base64::Engine as _;
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://api-int.example:6443\n    certificate-authority-data: {}\nusers:\n- name: kubelet\n  user:\n    token: secret\n",
        base64::engine::general_purpose::STANDARD.encode(ca)
    )
}

fn ca_of(kubeconfig: &[u8]) -> String {
    let doc: serde_json::Value =
        serde_saphyr::from_str(std::str::from_utf8(kubeconfig).unwrap()).unwrap();
    let data: k8s_openapi::ByteString =
        serde_json::from_value(doc["clusters"][0]["cluster"]["certificate-authority-data"].clone())
            .unwrap();
    String::from_utf8(data.0).unwrap()
}

fn ca(cn: &str) -> String {
    TestCa::new(cn).unwrap().cert_pem().trim().to_string()
}

/// Which rotations change the kubeconfig and which restart the kubelet.
#[test]
fn server_ca_rotation_rules() {
    let old = ca("kube-apiserver-service-network-signer");
    let lb = ca("kube-apiserver-lb-signer");
    let localhost = ca("openshift-kube-apiserver-operator_localhost-recovery-serving-signer");
    let new = ca("openshift-kube-apiserver-operator_kube-apiserver-to-kubelet-signer@1");
    let garbage = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----";
    let join = |certs: &[&str]| certs.join("\n") + "\n";
    struct Case<'a> {
        name: &'a str,
        disk: String,
        bundle: String,
        written: Option<String>,
        restart: bool,
    }
    for case in [
        Case {
            name: "the same bundle",
            disk: join(&[&old]),
            bundle: join(&[&old]),
            written: None,
            restart: false,
        },
        Case {
            name: "the same bundle, other whitespace around it",
            disk: join(&[&old]),
            bundle: format!("\n\n{old}"),
            written: None,
            restart: false,
        },
        Case {
            name: "a load-balancer signer added",
            disk: join(&[&old]),
            bundle: join(&[&old, &lb]),
            written: Some(format!("{old}\n{lb}")),
            restart: false,
        },
        Case {
            name: "a localhost recovery signer added",
            disk: join(&[&old]),
            bundle: join(&[&localhost, &old]),
            written: Some(format!("{localhost}\n{old}")),
            restart: false,
        },
        Case {
            name: "another signer added",
            disk: join(&[&old]),
            bundle: join(&[&old, &new]),
            written: Some(format!("{old}\n{new}")),
            restart: true,
        },
        Case {
            name: "a certificate removed only",
            disk: join(&[&old, &new]),
            bundle: join(&[&new]),
            written: None,
            restart: false,
        },
        Case {
            name: "a malformed certificate dropped, those after it kept",
            disk: join(&[&old]),
            bundle: join(&[&old, garbage, &new]),
            written: Some(format!("{old}\n{new}")),
            restart: true,
        },
    ] {
        let plan = server_ca::plan(
            kubeconfig(case.disk.as_bytes()).as_bytes(),
            case.bundle.as_bytes(),
            BOOTSTRAP_KUBECONFIG,
        )
        .unwrap();
        let written = plan.kubeconfig.as_deref().map(ca_of);
        assert_eq!(written, case.written, "{}", case.name);
        assert_eq!(plan.restart_kubelet, case.restart, "{}", case.name);
        if let Some(k) = &plan.kubeconfig {
            let doc: serde_json::Value =
                serde_saphyr::from_str(std::str::from_utf8(k).unwrap()).unwrap();
            assert_eq!(doc["users"][0]["user"]["token"], "secret", "{}", case.name);
            assert_eq!(
                doc["clusters"][0]["cluster"]["server"], "https://api-int.example:6443",
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn server_ca_rotation_refuses_what_it_cannot_use() {
    let good = ca("x-signer");
    let garbage = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n";
    for (kubeconfig_text, bundle, message) in [
        (
            "apiVersion: v1\nkind: Config\n".to_string(),
            good.clone(),
            "has no clusters[0].cluster",
        ),
        ("{not yaml".to_string(), good.clone(), "not a kubeconfig"),
        (
            kubeconfig(b"old"),
            garbage.to_string(),
            "holds no valid certificate",
        ),
    ] {
        let err = server_ca::plan(
            kubeconfig_text.as_bytes(),
            bundle.as_bytes(),
            BOOTSTRAP_KUBECONFIG,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with(BOOTSTRAP_KUBECONFIG), "{text}");
        assert!(text.contains(message), "{text}");
    }
}

#[test]
fn certificate_names() {
    assert_eq!(
        certificate_name(&ca("kube-apiserver-lb-signer")).as_deref(),
        Some("kube-apiserver-lb-signer")
    );
    assert_eq!(certificate_name("no certificate here"), None);
    assert_eq!(
        certificate_name(
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----"
        ),
        None
    );
}

/// A rotation on a root: both kubeconfigs take the CA, keep their modes and everything else.
#[test]
fn rotate_writes_both_kubeconfigs() {
    let dir = tempfile::tempdir().unwrap();
    let old = ca("old-signer");
    let new = ca("new-signer");
    for path in [BOOTSTRAP_KUBECONFIG, KUBELET_KUBECONFIG] {
        let p = host(dir.path(), path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, kubeconfig(old.as_bytes())).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    }
    let root = Root::open(dir.path()).unwrap();
    let bundle = format!("{old}\n{new}\n");
    let rotation = server_ca::rotate(&root, bundle.as_bytes()).unwrap();
    assert!(rotation.changed && rotation.restart_kubelet, "{rotation:?}");
    assert_eq!(rotation.added, vec!["new-signer".to_string()]);
    for path in [BOOTSTRAP_KUBECONFIG, KUBELET_KUBECONFIG] {
        let text = fs::read(host(dir.path(), path)).unwrap();
        assert_eq!(ca_of(&text), format!("{old}\n{new}"), "{path}");
        assert_eq!(mode(dir.path(), path), 0o600, "{path}");
    }
    // Done once: the same bundle again changes nothing.
    let again = server_ca::rotate(&root, bundle.as_bytes()).unwrap();
    assert_eq!(again, server_ca::Rotation::default());
    // No bootstrap kubeconfig: an error naming it.
    fs::remove_file(host(dir.path(), BOOTSTRAP_KUBECONFIG)).unwrap();
    let err = server_ca::rotate(&root, bundle.as_bytes()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{BOOTSTRAP_KUBECONFIG}: does not exist")
    );
}
