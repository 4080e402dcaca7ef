//! Real libselinux lookups against a file_contexts file written here (this machine runs no
//! SELinux kernel, so setting a label is exercised in the VM scenarios, not here).

use super::*;

const FILE_CONTEXTS: &str = "\
/etc(/.*)?\tsystem_u:object_r:etc_t:s0
/etc/g?shadow.*\t--\tsystem_u:object_r:shadow_t:s0
/etc/pki(/.*)?\tsystem_u:object_r:cert_t:s0
/home/[^/]+/\\.ssh(/.*)?\tunconfined_u:object_r:ssh_home_t:s0
/run/ostree(/.*)?\t<<none>>
";

fn labels() -> (tempfile::TempDir, SelinuxLabels) {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("file_contexts");
    std::fs::write(&spec, FILE_CONTEXTS).unwrap();
    let labels = SelinuxLabels::from_file_contexts(&spec);
    (dir, labels)
}

const FILE: u32 = 0o100644;

#[test]
fn file_contexts_give_each_path_its_type() {
    let (_dir, labels) = labels();
    let lookup = |path: &str| labels.lookup(Path::new(path), FILE).unwrap();
    assert_eq!(
        lookup("/etc/shadow").as_deref(),
        Some("system_u:object_r:shadow_t:s0")
    );
    assert_eq!(
        lookup("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt").as_deref(),
        Some("system_u:object_r:cert_t:s0")
    );
    assert_eq!(
        lookup("/etc/containers/registries.conf").as_deref(),
        Some("system_u:object_r:etc_t:s0")
    );
    assert_eq!(
        lookup("/home/core/.ssh/authorized_keys.d/ignition").as_deref(),
        Some("unconfined_u:object_r:ssh_home_t:s0")
    );
    // <<none>> and paths without an entry: the file keeps what it inherits
    assert_eq!(lookup("/run/ostree/staged-deployment-locked"), None);
    assert_eq!(lookup("/srv/data"), None);
    // the `--` entry is for regular files only
    assert_eq!(
        labels
            .lookup(Path::new("/etc/shadow"), 0o040755)
            .unwrap()
            .as_deref(),
        Some("system_u:object_r:etc_t:s0")
    );
}

#[test]
fn a_missing_file_contexts_is_an_error_naming_the_lookup() {
    let labels = SelinuxLabels::from_file_contexts(Path::new("/nonexistent/file_contexts"));
    let err = labels.lookup(Path::new("/etc/shadow"), FILE).unwrap_err();
    assert!(
        err.starts_with("opening the SELinux file contexts"),
        "{err}"
    );
}

#[test]
fn the_file_keeps_its_selinux_user() {
    assert_eq!(
        keep_user(
            "unconfined_u:object_r:ssh_home_t:s0",
            Some("system_u:object_r:user_home_dir_t:s0")
        )
        .unwrap(),
        "system_u:object_r:ssh_home_t:s0"
    );
    assert_eq!(
        keep_user("system_u:object_r:shadow_t:s0", None).unwrap(),
        "system_u:object_r:shadow_t:s0"
    );
    assert!(keep_user("not a context", Some("system_u:object_r:etc_t:s0")).is_err());
}

#[test]
fn without_selinux_or_on_another_root_nothing_is_labelled() {
    assert!(for_root(Path::new("/tmp/some-root"), false).is_none());
    // this machine's kernel runs without SELinux
    if selinux::kernel_support() == KernelSupport::Unsupported {
        assert!(for_root(Path::new("/"), true).is_none());
    }
}
