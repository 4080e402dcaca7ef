//! The MachineConfigs under `tests/corpus/real/`, in the shape real OpenShift clusters export
//! them (spec 2.2 and 3.2; see its README): `once-from` applies each to a fresh seeded root
//! (without the OS change, which needs rpm-ostree) and `validate` then finds the root matching.
//! Real: the agent binary and its files, units and SSH keys on a temp root. Stand-in: the root
//! is a directory, not a booted node.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{data_dir, run, seed_root, text};

/// A seeded root with the vendor units the exports add drop-ins to, so that their presets apply.
fn node_root(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    fs::create_dir(&root).unwrap();
    seed_root(&root);
    let vendor = root.join("usr/lib/systemd/system");
    fs::create_dir_all(&vendor).unwrap();
    for unit in [
        "crio.service",
        "docker.socket",
        "rpm-ostreed.service",
        "zincati.service",
    ] {
        let install = if unit.ends_with(".socket") {
            "sockets.target"
        } else {
            "multi-user.target"
        };
        let body = format!("[Unit]\nDescription=vendor {unit}\n\n[Install]\nWantedBy={install}\n");
        fs::write(vendor.join(unit), body).unwrap();
    }
    root
}

fn exports() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(data_dir().join("corpus/real"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    v
}

#[test]
fn real_exports_apply_and_validate() {
    let exports = exports();
    assert_eq!(exports.len(), 8, "{exports:?}");
    let mut failures = Vec::new();
    for export in &exports {
        let tmp = tempfile::tempdir().unwrap();
        let root = node_root(tmp.path());
        let (file, root_arg) = (export.display().to_string(), root.display().to_string());
        let (stdout, stderr, code) = text(&run(&[
            "once-from",
            &file,
            "--root",
            &root_arg,
            "--skip-os",
            "--skip-reboot",
        ]));
        if code != 0 || !stderr.is_empty() {
            failures.push(format!("once-from {file}: exit {code}\n{stdout}{stderr}"));
            continue;
        }
        let (stdout, stderr, code) =
            text(&run(&["validate", "--config", &file, "--root", &root_arg]));
        if code != 0 {
            failures.push(format!("validate {file}: exit {code}\n{stdout}{stderr}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The 2.2 `00-worker` export writes what its 3.2 counterpart writes for the files both have
/// (same contents, mode and owner), and both enable their units and drop-ins the same way.
#[test]
fn the_same_file_from_2_2_and_3_2_lands_the_same() {
    let apply = |name: &str| {
        let tmp = tempfile::tempdir().unwrap();
        let root = node_root(tmp.path());
        let file = data_dir().join("corpus/real").join(name);
        let (file, root_arg) = (file.display().to_string(), root.display().to_string());
        let args = [
            "once-from",
            &file,
            "--root",
            &root_arg,
            "--skip-os",
            "--skip-reboot",
        ];
        let (stdout, stderr, code) = text(&run(&args));
        assert_eq!(code, 0, "{stdout}{stderr}");
        let snap = common::snapshot(&root);
        (tmp, snap)
    };
    let (_a, v22) = apply("2.2-00-worker.yaml");
    let (_b, v32) = apply("3.2-00-worker.yaml");
    for path in [
        "etc/NetworkManager/conf.d/99-keyfiles.conf",
        "etc/containers/storage.conf",
        "etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
        "etc/systemd/system/machine-config-daemon-firstboot.service",
        "etc/systemd/system/crio.service.d/10-mco-default-madv.conf",
    ] {
        assert!(
            v22.contains_key(path),
            "{path} missing after the 2.2 export"
        );
        assert_eq!(v22.get(path), v32.get(path), "{path}");
    }
    let madv = "etc/systemd/system/crio.service.d/10-mco-default-env.conf";
    assert!(
        !v22.contains_key(madv) && !v32.contains_key(madv),
        "an empty drop-in is not written"
    );
}
