//! One table per rule for spec 2.2 configs, against the MCO's path for them: Ignition's 2.2
//! validator (`config/v2_2/types`, branch `spec2x`), the MCO's de-duplication
//! (`removeIgnDuplicateFilesUnitsUsers` in `pkg/controller/common/helpers.go`), Ignition's
//! 2.2 → 2.3 translation, ign-converter's `v23tov30` with `{"root": "/"}`, then Ignition's
//! validator at 3.5 in the MCD. Problems found after translation end with
//! `(in the config translated to spec 3)`.

mod common;

use common::{Want::*, case, check};
use serde_json::json;

fn v22(mut section: serde_json::Value) -> serde_json::Value {
    section["ignition"]["version"] = json!("2.2.0");
    section
}

fn file(f: serde_json::Value) -> serde_json::Value {
    v22(json!({"storage": {"files": [f]}}))
}

/// `ignition.config`: `replace` may have no source (Ignition 2.2 takes an empty URL as none; the
/// translation keeps it as `""`, valid at 3.5); `append` becomes `merge`, whose sources the
/// MCD requires; remote sources are accepted (never fetched). 2.2 knows only `sha512-` hashes
/// and neither `gs://` nor `arn:` sources.
#[test]
fn config_references() {
    let config = |c: serde_json::Value| v22(json!({"ignition": {"config": c}}));
    check(vec![
        case(
            "replace with only an empty verification (a real export)",
            config(json!({"replace": {"verification": {}}})),
            Yields("/ignition/config/replace", json!({"source": ""})),
        ),
        case(
            "remote replace and append",
            config(
                json!({"replace": {"source": "https://x/r.ign"}, "append": [{"source": "https://x/a.ign"}]}),
            ),
            Yields("/ignition/config/merge/0/source", json!("https://x/a.ign")),
        ),
        case(
            "append without source",
            config(json!({"append": [{"verification": {}}]})),
            Refused(&[
                "$.ignition.config.merge.0.source: merged config 0: source is required (in the config translated to spec 3)",
            ]),
        ),
        case(
            "a sha256 hash",
            config(
                json!({"append": [{"source": "https://x/a.ign", "verification": {"hash": format!("sha256-{}", "0".repeat(64))}}]}),
            ),
            Refused(&[
                "$.ignition.config.append.0.verification.hash: a sha256 hash is not supported by spec 2.2.0 (it needs spec 3.1.0 or later)",
            ]),
        ),
        case(
            "a gs:// source",
            config(json!({"replace": {"source": "gs://bucket/r.ign"}})),
            Refused(&[
                "$.ignition.config.replace.source: a gs:// source is not supported by spec 2.2.0 (it needs spec 3.2.0 or later)",
            ]),
        ),
        case(
            "a CA without source",
            v22(
                json!({"ignition": {"security": {"tls": {"certificateAuthorities": [{"source": ""}]}}}}),
            ),
            Refused(&[
                "$.ignition.security.tls.certificateAuthorities.0.source: certificate authority 0: source is required (in the config translated to spec 3)",
            ]),
        ),
        case(
            "timeouts",
            v22(json!({"ignition": {"timeouts": {"httpResponseHeaders": 10, "httpTotal": 60}}})),
            Yields(
                "/ignition/timeouts",
                json!({"httpResponseHeaders": 10, "httpTotal": 60}),
            ),
        ),
    ]);
}

/// Filesystems: only `root` maps to spec 3. The MCO refuses a declared other filesystem
/// (`NoFilesystemError`), drops a declared `root` once Ignition's checks pass, and takes a node
/// on an undeclared filesystem as a root path (Ignition 2.2 would fail on it: the MCO wins, with
/// a warning).
#[test]
fn filesystems() {
    check(vec![
        case(
            "root",
            file(json!({"filesystem": "root", "path": "/etc/a/../b"})),
            Yields("/storage/files/0/path", json!("/etc/b")),
        ),
        case(
            "an undeclared filesystem",
            file(json!({"filesystem": "var", "path": "/etc/a"})),
            Warns(&[
                "$.storage.files.0.filesystem: file \"/etc/a\": references nonexistent filesystem \"var\"; the path is taken on the root filesystem, as the MCO takes it",
            ]),
        ),
        case(
            "a declared other filesystem",
            v22(
                json!({"storage": {"filesystems": [{"name": "var", "mount": {"device": "/dev/vdb", "format": "xfs"}}],
                "files": [{"filesystem": "var", "path": "/a"}]}}),
            ),
            Refused(&[
                "$.storage.filesystems.0.name: filesystem \"var\": cannot be translated to spec 3: only the \"root\" filesystem is supported (the MCO has no mount point for another)",
            ]),
        ),
        case(
            "root redefined with a mount",
            v22(
                json!({"storage": {"filesystems": [{"name": "root", "mount": {"device": "/dev/vda4", "format": "xfs", "create": {"force": true}}}]}}),
            ),
            Warns(&[
                "$.storage.filesystems.0: filesystem \"root\": the root filesystem is implied; this definition is dropped, as the MCO drops it",
            ]),
        ),
        case(
            "root with neither mount nor path",
            v22(json!({"storage": {"filesystems": [{"name": "root"}]}})),
            Refused(&[
                "$.storage.filesystems.0: filesystem \"root\": filesystem is missing mount or path",
            ]),
        ),
        case(
            "root with a bad mount",
            v22(
                json!({"storage": {"filesystems": [{"name": "root", "mount": {"device": "vda4", "format": "ntfs", "label": "x",
                "wipeFilesystem": true, "create": {}}}]}}),
            ),
            Refused(&[
                "$.storage.filesystems.0.mount.format: filesystem \"root\": invalid filesystem format \"ntfs\"",
                "$.storage.filesystems.0.mount.device: filesystem \"root\": device \"vda4\": path not absolute",
                "$.storage.filesystems.0.mount.create: filesystem \"root\": cannot use both create object and wipeFilesystem field",
            ]),
        ),
        case(
            "no filesystem",
            file(json!({"path": "/etc/a"})),
            Refused(&["$.storage.files.0.filesystem: file \"/etc/a\": no filesystem specified"]),
        ),
    ]);
}

/// `overwrite` defaults to true for 2.x files (ign-converter), stays absent for directories and
/// links; `append: true` becomes an append fragment with `overwrite: false`, and Ignition 2.2
/// refuses it with `overwrite: true`.
#[test]
fn overwrite_and_append() {
    check(vec![
        case(
            "file default",
            file(
                json!({"filesystem": "root", "path": "/etc/a", "contents": {"source": "data:,a"}}),
            ),
            Yields("/storage/files/0/overwrite", json!(true)),
        ),
        case(
            "explicit false",
            file(json!({"filesystem": "root", "path": "/etc/a", "overwrite": false})),
            Yields("/storage/files/0/overwrite", json!(false)),
        ),
        case(
            "directory default",
            v22(json!({"storage": {"directories": [{"filesystem": "root", "path": "/d"}]}})),
            Yields("/storage/directories/0", json!({"path": "/d"})),
        ),
        case(
            "append",
            file(
                json!({"filesystem": "root", "path": "/etc/a", "append": true, "contents": {"source": "data:,b"}}),
            ),
            Yields(
                "/storage/files/0",
                json!({"overwrite": false, "path": "/etc/a", "append": [{"source": "data:,b"}]}),
            ),
        ),
        case(
            "append and overwrite",
            file(
                json!({"filesystem": "root", "path": "/etc/a", "append": true, "overwrite": true}),
            ),
            Refused(&[
                "$.storage.files.0: file \"/etc/a\": cannot set both append and overwrite to true",
            ]),
        ),
    ]);
}

/// Users: only `core` (the MCO); the deprecated `create` is dropped (ign-converter ignores it)
/// unless combined with the user-level field it duplicates (Ignition 2.2). Owners: an empty
/// name is no name. Groups keep an empty password hash as none.
#[test]
fn users_groups_and_owners() {
    check(vec![
        case(
            "create",
            v22(
                json!({"passwd": {"users": [{"name": "core", "create": {"shell": "/bin/sh"}, "sshAuthorizedKeys": ["k"]}]}}),
            ),
            Warns(&[
                "$.passwd.users.0.create: user \"core\": the deprecated create object is dropped, as the MCO drops it",
            ]),
        ),
        case(
            "create and uid",
            v22(json!({"passwd": {"users": [{"name": "core", "create": {}, "uid": 1000}]}})),
            Refused(&[
                "$.passwd.users.0.uid: user \"core\": cannot use both the create object and the user-level uid field",
            ]),
        ),
        case(
            "another user",
            v22(json!({"passwd": {"users": [{"name": "core"}, {"name": "admin"}]}})),
            Refused(&[
                "$.passwd.users.1.name: unexpected user with name: admin. Only core user is supported",
            ]),
        ),
        case(
            "group with an empty password hash",
            v22(
                json!({"passwd": {"groups": [{"name": "docker", "gid": 990, "passwordHash": ""}]}}),
            ),
            Yields("/passwd/groups/0", json!({"gid": 990, "name": "docker"})),
        ),
        case(
            "owner id with an empty name",
            file(
                json!({"filesystem": "root", "path": "/etc/a", "user": {"id": 1000, "name": ""}, "group": {"name": "core"}}),
            ),
            Yields("/storage/files/0/user", json!({"id": 1000})),
        ),
    ]);
}

/// Files, units and users repeated in a 2.2 config are collapsed (the last wins, the MCO's
/// helper); directories, links and drop-ins are not, and ign-converter refuses them.
#[test]
fn duplicates() {
    check(vec![
        case(
            "files",
            v22(json!({"storage": {"files": [
                {"filesystem": "root", "path": "/etc/a", "contents": {"source": "data:,1"}},
                {"filesystem": "root", "path": "/etc/a", "contents": {"source": "data:,2"}}]}})),
            Yields(
                "/storage/files",
                json!([{"overwrite": true, "path": "/etc/a", "contents": {"source": "data:,2"}}]),
            ),
        ),
        case(
            "directories",
            v22(
                json!({"storage": {"directories": [{"filesystem": "root", "path": "/d"}, {"filesystem": "root", "path": "/d"}]}}),
            ),
            Refused(&[
                "$.storage.directories.1.path: directory \"/d\": duplicate entry defined: the path is already defined at $.storage.directories.0 (in the config translated to spec 3)",
            ]),
        ),
        case(
            "drop-ins of one unit entry",
            v22(
                json!({"systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x.conf"}, {"name": "x.conf"}]}]}}),
            ),
            Refused(&[
                "$.systemd.units.0.dropins.1.name: drop-in \"x.conf\" of unit \"a.service\": duplicate entry defined: already defined at $.systemd.units.0.dropins.0 (in the config translated to spec 3)",
            ]),
        ),
    ]);
}

/// Contents: an empty `compression` is none; a file without contents gets an empty source
/// (`v23tov30` keeps `""`), which the MCD cannot decode (see `rules_v3_lists.rs`); modes and
/// links follow the spec 3 rules once translated.
#[test]
fn contents_modes_and_links() {
    check(vec![
        case(
            "empty compression",
            file(
                json!({"filesystem": "root", "path": "/etc/a", "contents": {"source": "data:,a", "compression": ""}}),
            ),
            Yields("/storage/files/0/contents", json!({"source": "data:,a"})),
        ),
        case(
            "no contents",
            file(json!({"filesystem": "root", "path": "/etc/a", "mode": 420})),
            Yields("/storage/files/0/contents", json!({"source": ""})),
        ),
        case(
            "gzip with an empty source",
            file(
                json!({"filesystem": "root", "path": "/etc/a", "contents": {"compression": "gzip"}}),
            ),
            Yields(
                "/storage/files/0/contents",
                json!({"compression": "gzip", "source": ""}),
            ),
        ),
        case(
            "setuid file",
            file(
                json!({"filesystem": "root", "path": "/usr/local/bin/x", "mode": 2541, "contents": {"source": "data:,x"}}),
            ),
            Refused(&[
                "$.storage.files.0.mode: invalid mode 04755 for /usr/local/bin/x, cannot exceed 0777 (in the config translated to spec 3)",
            ]),
        ),
        case(
            "hard link",
            v22(
                json!({"storage": {"links": [{"filesystem": "root", "path": "/etc/h", "target": "/etc/motd", "hard": true},
                {"filesystem": "root", "path": "/etc/s", "target": "/etc/motd", "hard": false}]}}),
            ),
            Yields(
                "/storage/links",
                json!([{"path": "/etc/h", "hard": true, "target": "/etc/motd"}, {"path": "/etc/s", "target": "/etc/motd"}]),
            ),
        ),
        case(
            "link without target",
            v22(json!({"storage": {"links": [{"filesystem": "root", "path": "/etc/l"}]}})),
            Refused(&[
                "$.storage.links.0.target: link \"/etc/l\": link target is required (in the config translated to spec 3)",
            ]),
        ),
    ]);
}

/// Units: `enabled` wins over the deprecated `enable` (ign-converter); empty contents and
/// `mask: false` become absent; networkd units and partition sizes in sectors are refused.
#[test]
fn units_and_refused_sections() {
    check(vec![
        case(
            "enable, overridden by enabled false",
            v22(
                json!({"systemd": {"units": [{"name": "a.service", "enable": true, "enabled": false, "mask": false, "contents": "",
                "dropins": [{"name": "x.conf", "contents": ""}]}]}}),
            ),
            Yields(
                "/systemd/units/0",
                json!({"dropins": [{"name": "x.conf"}], "enabled": false, "name": "a.service"}),
            ),
        ),
        case(
            "enable",
            v22(json!({"systemd": {"units": [{"name": "a.service", "enable": true}]}})),
            Yields("/systemd/units/0/enabled", json!(true)),
        ),
        case(
            "networkd",
            v22(json!({"networkd": {"units": [{"name": "a.network", "contents": "[Match]\n"}]}})),
            Refused(&[
                "$.networkd.units: config includes deprecated networkd section - use Files instead",
            ]),
        ),
        case(
            "partition in sectors",
            v22(
                json!({"storage": {"disks": [{"device": "/dev/vdb", "partitions": [{"number": 1, "size": 2048}]}]}}),
            ),
            Refused(&[
                "$.storage.disks.0.partitions.0: partition 1 of disk \"/dev/vdb\": deprecated fields \"size\"/\"start\" (sectors) cannot be translated to spec 3",
            ]),
        ),
    ]);
}
