//! One table per Ignition rule about lists and resources, for spec 3.x configs: duplicate
//! entries, verification hashes, how a file's contents decode (compression, empty sources), and
//! the `ignition` section that the node never reads; see `rules_v3.rs`.

mod common;

use common::{Want::*, case, check};
use machine_config::{Config, MachineConfig, Plan, PolicyOptions};
use serde_json::json;

fn v(version: &str, mut section: serde_json::Value) -> serde_json::Value {
    section["ignition"] = json!({"version": version});
    section
}

/// Ignition refuses a repeated key in every list (`ValidateDups`): files, directories and links
/// by path (one namespace), units and drop-ins by name, users and groups by name, and every list
/// of strings (SSH keys, a user's groups, kernel arguments); disks and filesystems by device,
/// RAID arrays and LUKS volumes by name. (Spec 2.2 collapses repeated files, units and users
/// instead: `rules_v2_2.rs`.) An SSH key is not quoted: it is long and says nothing.
#[test]
fn duplicate_entries() {
    check(vec![
        case(
            "a file and a directory",
            v(
                "3.2.0",
                json!({"storage": {"files": [{"path": "/etc/x"}], "directories": [{"path": "/etc/x"}]}}),
            ),
            Refused(&[
                "$.storage.directories.0.path: directory \"/etc/x\": duplicate entry defined: the path is already defined at $.storage.files.0",
            ]),
        ),
        case(
            "users, keys and groups",
            v(
                "3.2.0",
                json!({"passwd": {"users": [
                {"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA k", "ssh-ed25519 AAAA k"], "groups": ["wheel", "wheel"]},
                {"name": "core"}], "groups": [{"name": "g"}, {"name": "g"}]}}),
            ),
            Refused(&[
                "$.passwd.users.0.sshAuthorizedKeys.1: user \"core\": duplicate entry defined: SSH key is already at $.passwd.users.0.sshAuthorizedKeys.0",
                "$.passwd.users.0.groups.1: user \"core\": duplicate entry defined: group \"wheel\" is already at $.passwd.users.0.groups.0",
                "$.passwd.users.1.name: user \"core\": duplicate entry defined: already defined at $.passwd.users.0",
                "$.passwd.groups.1.name: group \"g\": duplicate entry defined: already defined at $.passwd.groups.0",
            ]),
        ),
        case(
            "kernel arguments",
            v(
                "3.3.0",
                json!({"kernelArguments": {"shouldExist": ["nosmt", "nosmt"]}}),
            ),
            Refused(&[
                "$.kernelArguments.shouldExist.1: kernel arguments: duplicate entry defined: argument \"nosmt\" is already at $.kernelArguments.shouldExist.0",
            ]),
        ),
        case(
            "disks, filesystems, RAID, LUKS",
            v(
                "3.2.0",
                json!({"storage": {
                "disks": [{"device": "/dev/vdb"}, {"device": "/dev/vdb"}],
                "filesystems": [{"device": "/dev/md/a", "format": "xfs"}, {"device": "/dev/md/a", "format": "ext4"}],
                "raid": [{"name": "a", "level": "raid1", "devices": ["/dev/x", "/dev/y"]}, {"name": "a", "level": "raid0", "devices": ["/dev/z"]}],
                "luks": [{"name": "l", "device": "/dev/x"}, {"name": "l", "device": "/dev/y"}]}}),
            ),
            Refused(&[
                "$.storage.disks.1.device: disk \"/dev/vdb\": duplicate entry defined: already defined at $.storage.disks.0",
                "$.storage.filesystems.1.device: filesystem \"/dev/md/a\": duplicate entry defined: already defined at $.storage.filesystems.0",
                "$.storage.raid.1.name: RAID array \"a\": duplicate entry defined: already defined at $.storage.raid.0",
                "$.storage.luks.1.name: LUKS volume \"l\": duplicate entry defined: already defined at $.storage.luks.0",
            ]),
        ),
    ]);
}

/// `verification.hash`: `sha512-` in every spec, `sha256-` from 3.1; a hash needs a source.
#[test]
fn verification_hashes() {
    let hashed = |version: &str, hash: String| {
        v(
            version,
            json!({"storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,a", "verification": {"hash": hash}}}]}}),
        )
    };
    let sha512 = "sha512-1f40fc92da241694750979ee6cf582f2d5d7d28e18335de05abc54d0560e0f5302860c652bf08d560252aa5e74210546f369fbbbce8c12cfc7957b2652fe9a75".to_string();
    let sha256 =
        "sha256-ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb".to_string();
    check(vec![
        case("sha512 in 3.0", hashed("3.0.0", sha512.clone()), Accepted),
        case("sha256 in 3.1", hashed("3.1.0", sha256.clone()), Accepted),
        case(
            "sha256 in 3.0",
            hashed("3.0.0", sha256),
            Refused(&[
                "$.storage.files.0.contents.verification.hash: a sha256 hash requires spec version 3.1.0 or later, but the config declares 3.0.0",
            ]),
        ),
        case(
            "md5",
            hashed("3.2.0", "md5-0cc175b9c0f1b6a831c399e269772661".to_string()),
            Refused(&[
                "$.storage.files.0.contents.verification.hash: file \"/etc/a\": unrecognized hash function: \"md5-0cc175b9c0f1b6a831c399e269772661\"",
            ]),
        ),
    ]);
    let c = Config::parse(hashed("3.2.0", sha512).to_string().as_bytes()).unwrap();
    assert_eq!(c.storage.files[0].decoded_contents().unwrap(), b"a");
}

/// A file's contents, as the node decodes them: no source is an empty file whatever the
/// compression says (Ignition and the MCD); an empty source passes validation (Ignition) but
/// does not decode, because the MCD's decoder refuses it (`missing data prefix`): the MCD wins.
#[test]
fn contents_with_empty_or_absent_sources() {
    let file = |contents: serde_json::Value| {
        let c = v(
            "3.2.0",
            json!({"storage": {"files": [{"path": "/etc/a", "contents": contents}]}}),
        );
        Config::parse(c.to_string().as_bytes())
            .unwrap()
            .storage
            .files[0]
            .decoded_contents()
    };
    assert_eq!(file(json!({})).unwrap(), b"");
    assert_eq!(file(json!({"compression": "gzip"})).unwrap(), b"");
    assert_eq!(
        file(json!({"source": "data:,", "compression": ""})).unwrap(),
        b""
    );
    for contents in [
        json!({"source": ""}),
        json!({"source": "", "compression": "gzip"}),
    ] {
        assert_eq!(
            file(contents).unwrap_err().to_string(),
            "couldn't decode file \"/etc/a\": empty source: not a data URL (the MCD refuses it too; use \"data:,\" for an empty file)"
        );
    }
}

fn machine_config(name: &str, config: serde_json::Value) -> MachineConfig {
    MachineConfig::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": config}
    }))
    .unwrap()
}

/// Remote references in the `ignition` section of a MachineConfig are accepted and ignored, as
/// the MCO accepts them and the MCD never reads that section: a change that only adds them needs
/// nothing on the node.
#[test]
fn remote_ignition_references_are_accepted_and_ignored() {
    let files =
        json!({"files": [{"path": "/etc/a", "mode": 420, "contents": {"source": "data:,a"}}]});
    let old = machine_config(
        "old",
        json!({"ignition": {"version": "3.2.0"}, "storage": files}),
    );
    let new = machine_config(
        "new",
        json!({"ignition": {"version": "3.2.0",
            "config": {"merge": [{"source": "https://example.com/extra.ign"}],
                       "replace": {"source": "s3://bucket/worker.ign"}},
            "security": {"tls": {"certificateAuthorities": [{"source": "https://example.com/ca.pem"}]}},
            "proxy": {"httpsProxy": "https://proxy:3129"},
            "timeouts": {"httpTotal": 30}},
            "storage": files}),
    );
    let options = PolicyOptions {
        arch: "x86_64".into(),
        ..PolicyOptions::default()
    };
    let plan = Plan::new(&old, &new, &options).unwrap();
    assert!(plan.reconcilable, "{}", plan.to_json());
    let nothing = plan.actions.iter().all(|a| a.type_name() == "None");
    assert!(nothing && !plan.drain && !plan.reboot, "{}", plan.to_json());
    assert!(plan.files.is_empty(), "{}", plan.to_json());
}

/// `deferring_contents_base64` (for a caller that decodes every file's contents itself) leaves
/// only the base64 data of files' contents unchecked: their data URL's header, percent-encoded
/// contents, appended fragments and the `ignition` section's sources are checked as always,
/// and a parse after it checks everything again.
#[test]
fn deferred_contents_base64_is_only_that() {
    let file = |source: &str| json!({"path": "/etc/x", "contents": {"source": source}});
    let parse = |config: &serde_json::Value| Config::parse(config.to_string().as_bytes());
    let deferred =
        |config: &serde_json::Value| machine_config::deferring_contents_base64(|| parse(config));
    let short_quantum = v(
        "3.2.0",
        json!({"storage": {"files": [file("data:;base64,aGVsbG8")]}}),
    );
    let padded_inside = v(
        "3.2.0",
        json!({"storage": {"files": [file("data:;base64,QQ==QQ==")]}}),
    );
    for config in [&short_quantum, &padded_inside] {
        let err = parse(config).unwrap_err().to_string();
        assert!(err.contains("invalid data URL: bad base64 data"), "{err}");
        assert!(deferred(config).is_ok(), "{config}");
    }
    assert!(parse(&short_quantum).is_err(), "the scope ended");
    let still_checked = [
        file("data:text;base64,aGVsbG8="),
        file("data:,hello world"),
        json!({"path": "/etc/x", "append": [{"source": "data:;base64,aGVsbG8"}]}),
    ];
    for f in still_checked {
        let config = v("3.2.0", json!({"storage": {"files": [f]}}));
        let (full, deferred) = (parse(&config), deferred(&config));
        assert!(full.is_err(), "{config}");
        assert_eq!(
            full.unwrap_err().to_string(),
            deferred.unwrap_err().to_string()
        );
    }
    let ca = json!({"ignition": {"version": "3.2.0", "security": {"tls": {"certificateAuthorities": [{"source": "data:;base64,aGVsbG8"}]}}}});
    assert!(deferred(&ca).is_err());
}
