//! One table per Ignition rule about what the node writes (files' modes, directories, links,
//! units and drop-ins), for spec 3.x configs; see `rules_v3.rs`.

mod common;

use common::{Want::*, case, check};
use machine_config::Config;
use serde_json::json;

fn v32(section: serde_json::Value) -> serde_json::Value {
    let mut c = section;
    c["ignition"] = json!({"version": "3.2.0"});
    c
}

/// Modes: Ignition refuses a mode outside 0..=07777 (`illegal file mode`) and only warns about
/// setuid/setgid/sticky bits; the MCO refuses a file mode above 0777 (`invalid mode ... cannot
/// exceed 0777`), not a directory's. Before spec 3.6.0 Ignition ignores a directory's special
/// bits on disk, and so does the agent (`mode_or_default`).
#[test]
fn modes() {
    check(vec![
        case(
            "file 0644",
            v32(json!({"storage": {"files": [{"path": "/etc/a", "mode": 0o644}]}})),
            Accepted,
        ),
        case(
            "file 04755 (the MCO's rule)",
            v32(json!({"storage": {"files": [{"path": "/usr/local/bin/x", "mode": 0o4755}]}})),
            Refused(&[
                "$.storage.files.0.mode: invalid mode 04755 for /usr/local/bin/x, cannot exceed 0777",
            ]),
        ),
        case(
            "file 010000",
            v32(json!({"storage": {"files": [{"path": "/etc/a", "mode": 0o10000}]}})),
            Refused(&[
                "$.storage.files.0.mode: file \"/etc/a\": illegal file mode 4096 (octal 010000)",
            ]),
        ),
        case(
            "negative directory mode",
            v32(json!({"storage": {"directories": [{"path": "/d", "mode": -1}]}})),
            Refused(&[
                "$.storage.directories.0.mode: directory \"/d\": illegal file mode -1 (octal -01)",
            ]),
        ),
        case(
            "sticky directory",
            v32(json!({"storage": {"directories": [{"path": "/var/shared", "mode": 0o1777}]}})),
            Warns(&[
                "$.storage.directories.0.mode: directory \"/var/shared\": setuid/setgid/sticky bits are ignored before spec 3.6.0 (mode 01777 is applied as 0777)",
            ]),
        ),
    ]);
    let c = Config::parse(
        br#"{"ignition": {"version": "3.4.0"}, "storage": {
            "files": [{"path": "/a"}], "directories": [{"path": "/d"}, {"path": "/s", "mode": 1023}]}}"#,
    )
    .unwrap();
    let s = &c.storage;
    assert_eq!(
        (
            s.files[0].mode_or_default(),
            s.directories[0].mode_or_default(),
            s.directories[1].mode_or_default()
        ),
        (0o644, 0o755, 0o777)
    );
}

/// Links: a target is required (Ignition's `ErrLinkTargetRequired`, enforced at 3.5 by the MCD);
/// a hard link to a directory of the config is refused, a relative hard-link target being
/// resolved against the link's own path as Ignition does; nothing may live under a link.
#[test]
fn links() {
    check(vec![
        case(
            "symbolic, relative target",
            v32(json!({"storage": {"links": [{"path": "/etc/l", "target": "../usr/x"}]}})),
            Accepted,
        ),
        case(
            "hard, to a file",
            v32(
                json!({"storage": {"files": [{"path": "/etc/f"}], "links": [{"path": "/etc/h", "target": "/etc/f", "hard": true}]}}),
            ),
            Yields("/storage/links/0/hard", json!(true)),
        ),
        case(
            "no target",
            v32(json!({"storage": {"links": [{"path": "/etc/l", "target": ""}]}})),
            Refused(&["$.storage.links.0.target: link \"/etc/l\": link target is required"]),
        ),
        case(
            "hard, relative to the link's path, to a directory",
            v32(json!({"storage": {"directories": [{"path": "/etc/h/d"}],
                "links": [{"path": "/etc/h", "target": "d", "hard": true}]}})),
            Refused(&[
                "$.storage.directories.0: directory \"/etc/h/d\": directory path includes link in config (\"/etc/h\")",
                "$.storage.links.0: link \"/etc/h\": hard link target is a directory (\"d\")",
            ]),
        ),
        case(
            "a link under a link",
            v32(
                json!({"storage": {"links": [{"path": "/a", "target": "/b"}, {"path": "/a/c", "target": "/d"}]}}),
            ),
            Refused(&[
                "$.storage.links.1: link \"/a/c\": link path includes link in config (\"/a\")",
            ]),
        ),
    ]);
}

/// Directories share the path namespace of files and links; paths must be absolute and clean.
#[test]
fn directories() {
    check(vec![
        case(
            "nested",
            v32(
                json!({"storage": {"directories": [{"path": "/var/a"}, {"path": "/var/a/b", "mode": 0o700}]}}),
            ),
            Accepted,
        ),
        case(
            "trailing slash",
            v32(json!({"storage": {"directories": [{"path": "/var/a/"}]}})),
            Refused(&[
                "$.storage.directories.0.path: directory \"/var/a/\": path is not fully simplified",
            ]),
        ),
        case(
            "same path as a link",
            v32(
                json!({"storage": {"directories": [{"path": "/var/a"}], "links": [{"path": "/var/a", "target": "/x"}]}}),
            ),
            Refused(&[
                "$.storage.links.0.path: link \"/var/a\": duplicate entry defined: the path is already defined at $.storage.directories.0",
            ]),
        ),
    ]);
}

/// Units and drop-ins: empty or absent contents are allowed and occupy no path (Ignition's
/// `NilOrEmpty`); contents must parse as a unit file (go-systemd, `invalid unit content`), never
/// quoted in the error; names need a unit or `.conf` suffix.
#[test]
fn units_and_dropins() {
    check(vec![
        case(
            "empty contents, empty drop-in (a real export's shape)",
            v32(
                json!({"systemd": {"units": [{"name": "crio.service", "contents": "",
                "dropins": [{"name": "10-mco-default-env.conf", "contents": ""}, {"name": "20-x.conf"}]}]},
                "storage": {"files": [{"path": "/etc/systemd/system/crio.service.d/10-mco-default-env.conf"}]}}),
            ),
            Accepted,
        ),
        case(
            "enabled only",
            v32(json!({"systemd": {"units": [{"name": "kubelet.service", "enabled": true}]}})),
            Yields(
                "/systemd/units/0",
                json!({"enabled": true, "name": "kubelet.service"}),
            ),
        ),
        case(
            "an option line without =",
            v32(
                json!({"systemd": {"units": [{"name": "a.service", "contents": "[Service]\nPASSWORD hunter2\n"}]}}),
            ),
            Refused(&[
                "$.systemd.units.0.contents: unit \"a.service\": invalid unit content: unexpected newline encountered while parsing option name (line 2)",
            ]),
        ),
        case(
            "a drop-in with garbage after its section",
            v32(
                json!({"systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x.conf", "contents": "[Service] token\n"}]}]}}),
            ),
            Refused(&[
                "$.systemd.units.0.dropins.0.contents: drop-in \"x.conf\" of unit \"a.service\": invalid unit content: found garbage after section name (line 1)",
            ]),
        ),
        case(
            "a unit's contents at a file's path",
            v32(
                json!({"systemd": {"units": [{"name": "a.service", "contents": "[Unit]\n"}]},
                "storage": {"files": [{"path": "/etc/systemd/system/a.service"}]}}),
            ),
            Refused(&[
                "$.storage.files.0.path: file \"/etc/systemd/system/a.service\": path conflicts with systemd unit or dropin",
            ]),
        ),
    ]);
}
