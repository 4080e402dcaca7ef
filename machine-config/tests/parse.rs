//! Parsing of every supported spec version, translation of 2.2, version gating, validation.

use machine_config::{Config, ParseError, ParsedConfig, SpecVersion};
use serde_json::json;

fn parse(v: serde_json::Value) -> Result<ParsedConfig, ParseError> {
    ParsedConfig::parse(v.to_string().as_bytes())
}

fn issues(v: serde_json::Value) -> Vec<String> {
    match parse(v) {
        Ok(p) => panic!("expected an error, parsed {:?}", p.config),
        Err(e) => {
            let list: Vec<String> = e.issues().iter().map(ToString::to_string).collect();
            if list.is_empty() {
                vec![e.to_string()]
            } else {
                list
            }
        }
    }
}

/// A config of every 3.x version with a file, a directory, a link, a unit with a drop-in and
/// the core user parses into the same internal form.
#[test]
fn every_3x_version_parses_to_the_same_internal_form() {
    let body = |version: &str| {
        json!({
            "ignition": {"version": version},
            "storage": {
                "files": [{"path": "/etc/motd", "mode": 420, "overwrite": true,
                           "contents": {"source": "data:,hello%0A"}}],
                "directories": [{"path": "/etc/mydir", "mode": 493}],
                "links": [{"path": "/etc/mylink", "target": "/etc/motd"}]
            },
            "systemd": {"units": [{"name": "a.service", "enabled": true,
                                   "contents": "[Service]\nExecStart=/bin/true\n",
                                   "dropins": [{"name": "10-x.conf", "contents": "[Unit]\n"}]}]},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]}
        })
    };
    let expected = parse(body("3.5.0")).unwrap().config;
    assert_eq!(expected.ignition.version, "3.5.0");
    assert_eq!(
        expected.storage.files[0].decoded_contents().unwrap(),
        b"hello\n"
    );
    for (v, sv) in [
        ("3.0.0", SpecVersion::V3_0),
        ("3.1.0", SpecVersion::V3_1),
        ("3.2.0", SpecVersion::V3_2),
        ("3.3.0", SpecVersion::V3_3),
        ("3.4.0", SpecVersion::V3_4),
        ("3.5.0", SpecVersion::V3_5),
    ] {
        let p = parse(body(v)).unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(p.source_version, sv, "{v}");
        assert_eq!(p.config, expected, "{v}");
        assert!(p.warnings.is_empty(), "{v}: {:?}", p.warnings);
    }
}

#[test]
fn internal_form_round_trips_through_json() {
    let cfg = parse(json!({
        "ignition": {"version": "3.4.0", "timeouts": {"httpTotal": 10},
                     "proxy": {"httpsProxy": "https://proxy:3128", "noProxy": ["a", "b"]},
                     "security": {"tls": {"certificateAuthorities": [{"source": "data:,CA"}]}}},
        "kernelArguments": {"shouldExist": ["a=1"], "shouldNotExist": ["b"]},
        "storage": {
            "files": [{"path": "/f", "user": {"name": "core"}, "group": {"id": 0},
                       "contents": {"source": "data:,x", "compression": "",
                                    "verification": {"hash": format!("sha256-{}", "a".repeat(64))}}}],
            "disks": [{"device": "/dev/vdb", "wipeTable": true}],
            "filesystems": [{"device": "/dev/vdb1", "format": "xfs", "path": "/var"}],
            "raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/a", "/dev/b"]}],
            "luks": [{"name": "l", "device": "/dev/vdc", "discard": true}]
        },
        "systemd": {"units": [{"name": "m.service", "mask": true}]}
    }))
    .unwrap()
    .config;
    let json = cfg.to_json();
    assert!(
        json.contains("\"kernelArguments\":{\"shouldExist\":[\"a=1\"]"),
        "{json}"
    );
    assert!(
        json.contains("\"httpsProxy\":\"https://proxy:3128\""),
        "{json}"
    );
    let again = Config::parse(json.as_bytes()).unwrap();
    assert_eq!(again, cfg);
}

#[test]
fn fields_newer_than_the_declared_version_are_errors() {
    let cases = [
        (
            json!({"ignition": {"version": "3.2.0"}, "kernelArguments": {"shouldExist": ["x"]}}),
            "$.kernelArguments: field \"kernelArguments\" requires spec version 3.3.0 or later, but the config declares 3.2.0",
        ),
        (
            json!({"ignition": {"version": "3.0.0", "proxy": {"httpProxy": "http://p"}}}),
            "$.ignition.proxy: field \"proxy\" requires spec version 3.1.0 or later, but the config declares 3.0.0",
        ),
        (
            json!({"ignition": {"version": "3.1.0"}, "storage": {"luks": [{"name": "x"}]}}),
            "$.storage.luks: field \"luks\" requires spec version 3.2.0 or later",
        ),
        (
            json!({"ignition": {"version": "3.3.0"}, "storage": {"luks": [{"name": "x", "discard": true}]}}),
            "$.storage.luks.0.discard: field \"discard\" requires spec version 3.4.0",
        ),
        (
            json!({"ignition": {"version": "3.4.0"}, "storage": {"luks": [{"name": "x", "cex": {"enabled": true}}]}}),
            "$.storage.luks.0.cex: field \"cex\" requires spec version 3.5.0",
        ),
        (
            json!({"ignition": {"version": "3.1.0"}, "passwd": {"users": [{"name": "core", "shouldExist": true}]}}),
            "$.passwd.users.0.shouldExist: field \"shouldExist\" requires spec version 3.2.0",
        ),
        (
            json!({"ignition": {"version": "3.0.0"}, "storage": {"files": [{"path": "/f",
                "contents": {"source": "data:,x", "verification": {"hash": format!("sha256-{}", "a".repeat(64))}}}]}}),
            "$.storage.files.0.contents.verification.hash: a sha256 hash requires spec version 3.1.0",
        ),
        (
            json!({"ignition": {"version": "3.0.0"}, "storage": {"files": [{"path": "/f",
                "contents": {"source": "data:,x", "httpHeaders": [{"name": "a", "value": "b"}]}}]}}),
            "$.storage.files.0.contents.httpHeaders: field \"httpHeaders\" requires spec version 3.1.0",
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "storage": {"filesystems": [{"device": "/dev/x", "format": "none"}]}}),
            "$.storage.filesystems.0.format: filesystem format \"none\" requires spec version 3.3.0",
        ),
        (
            json!({"ignition": {"version": "3.0.0", "config": {"merge": [{"source": "data:,{}", "compression": "gzip"}]}}}),
            "$.ignition.config.merge.0.compression: field \"compression\" requires spec version 3.1.0",
        ),
    ];
    for (input, want) in cases {
        let got = issues(input.clone());
        assert!(
            got.iter().any(|g| g.starts_with(want)),
            "input {input}: got {got:?}, want {want:?}"
        );
    }
}

#[test]
fn unknown_keys_are_warnings_and_dropped() {
    let p = parse(
        json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [
        {"path": "/f", "contents": {"source": "data:,x"}, "colour": "blue", "overwrte": true}]},
        "extra": 1, "sytemd": {}}),
    )
    .unwrap();
    let w: Vec<String> = p.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        w,
        vec![
            "$.storage.files.0.colour: unused key colour".to_string(),
            "$.storage.files.0.overwrte: unused key overwrte (did you mean overwrite?)".to_string(),
            "$.extra: unused key extra".to_string(),
            "$.sytemd: unused key sytemd (did you mean systemd?)".to_string(),
        ]
    );
}

#[test]
fn versions_are_checked() {
    let cases = [
        (json!({}), "$.ignition.version: missing config version"),
        (
            json!({"ignition": {"version": 3}}),
            "$.ignition.version: config version must be a string, got a number",
        ),
        (
            json!({"ignition": {"version": "x"}}),
            "$.ignition.version: invalid config version (couldn't parse) \"x\"",
        ),
        (
            json!({"ignition": {"version": "3.6.0"}}),
            "$.ignition.version: unsupported config version \"3.6.0\"",
        ),
        (
            json!({"ignition": {"version": "2.1.0"}}),
            "$.ignition.version: unsupported config version \"2.1.0\"",
        ),
        (
            json!({"ignition": {"version": "3.5.0-experimental"}}),
            "$.ignition.version: unsupported config version",
        ),
        (json!([1]), "$: an Ignition config must be a JSON object"),
    ];
    for (input, want) in cases {
        let got = issues(input.clone());
        assert!(got[0].starts_with(want), "input {input}: got {got:?}");
    }
    let syntax = ParsedConfig::parse(b"{\"ignition\": ")
        .unwrap_err()
        .to_string();
    assert!(
        syntax.starts_with("invalid JSON: EOF while parsing"),
        "{syntax}"
    );
}

#[test]
fn type_errors_name_the_field() {
    let got = issues(
        json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [
        {"path": "/ok", "contents": {"source": "data:,x"}},
        {"path": "/f", "mode": "0644"}]}}),
    );
    assert_eq!(got.len(), 1);
    assert!(
        got[0]
            == "$.storage.files.1.mode: file \"/f\": invalid type: string \"0644\", expected i64",
        "{got:?}"
    );
}

#[test]
fn validation_collects_every_problem_with_its_path() {
    let long_hash = format!("sha512-{}", "0".repeat(127));
    let got = issues(json!({"ignition": {"version": "3.2.0"}, "storage": {
        "files": [
            {"path": "etc/relative", "contents": {"source": "data:,x"}},
            {"path": "/etc/../escape", "contents": {"source": "data:,x"}},
            {"path": "/etc/suid", "mode": 2541, "contents": {"source": "data:,x"}},
            {"path": "/etc/remote", "contents": {"source": "https://example.com/x"}},
            {"path": "/etc/s3", "contents": {"source": "s3://bucket/key"}},
            {"path": "/etc/hash", "contents": {"source": "data:,x", "verification": {"hash": long_hash}}},
            {"path": "/etc/xz", "contents": {"source": "data:,x", "compression": "xz"}},
            {"path": "/etc/dup", "contents": {"source": "data:,x"}},
            {"path": "/etc/dup", "contents": {"source": "data:,y"}},
            {"path": "/etc/owner", "user": {"id": 0, "name": "root"}, "contents": {"source": "data:,x"}},
            {"path": "/etc/badurl", "contents": {"source": "data:,a b"}},
            {"path": "/etc/huge", "mode": 8192, "contents": {"source": "data:,x"}}
        ],
        "directories": [{"path": "/etc/dup"}],
        "links": [{"path": "/etc/l"}]
    }, "systemd": {"units": [
        {"name": "../../etc/passwd.service", "contents": "x"},
        {"name": "noext", "contents": "x"},
        {"name": "a.service", "dropins": [{"name": "x.txt", "contents": "y"}, {"name": "x.txt"}]},
        {"name": "a.service"}
    ]}}));
    let hash = format!("sha512-{}", "0".repeat(127));
    let want = [
        "$.storage.files.0.path: file \"etc/relative\": path not absolute".to_string(),
        "$.storage.files.1.path: file \"/etc/../escape\": path is not fully simplified".to_string(),
        "$.storage.files.8.path: file \"/etc/dup\": duplicate entry defined: the path is already defined at $.storage.files.7".to_string(),
        "$.storage.directories.0.path: directory \"/etc/dup\": duplicate entry defined: the path is already defined at $.storage.files.7".to_string(),
        "$.storage.files.2.mode: invalid mode 04755 for /etc/suid, cannot exceed 0777".to_string(),
        "$.storage.files.3.contents.source: file \"/etc/remote\": remote source scheme \"https\" cannot be fetched on a node; only data: URLs are supported".to_string(),
        "$.storage.files.4.contents.source: file \"/etc/s3\": remote source scheme \"s3\" cannot be fetched on a node; only data: URLs are supported".to_string(),
        format!("$.storage.files.5.contents.verification.hash: file \"/etc/hash\": incorrect size for hash sum: \"{hash}\""),
        "$.storage.files.6.contents.compression: file \"/etc/xz\": invalid compression method \"xz\"".to_string(),
        "$.storage.files.9.user: file \"/etc/owner\": cannot set both id and name (id 0, name \"root\")".to_string(),
        "$.storage.files.10.contents.source: file \"/etc/badurl\": invalid data URL: invalid character at byte 1 of the percent-encoded data (data: URL of 9 bytes)".to_string(),
        "$.storage.files.11.mode: file \"/etc/huge\": illegal file mode 8192 (octal 020000)".to_string(),
        "$.storage.links.0.target: link \"/etc/l\": link target is required".to_string(),
        "$.systemd.units.0.name: unit \"../../etc/passwd.service\": name must be a single path segment (no '/', NUL, '.' or '..')".to_string(),
        "$.systemd.units.1.name: unit \"noext\": invalid systemd unit extension".to_string(),
        "$.systemd.units.2.dropins.0.name: drop-in \"x.txt\" of unit \"a.service\": invalid systemd drop-in extension".to_string(),
        "$.systemd.units.2.dropins.1.name: drop-in \"x.txt\" of unit \"a.service\": invalid systemd drop-in extension".to_string(),
        "$.systemd.units.2.dropins.1.name: drop-in \"x.txt\" of unit \"a.service\": duplicate entry defined: already defined at $.systemd.units.2.dropins.0".to_string(),
        "$.systemd.units.3.name: unit \"a.service\": duplicate entry defined: already defined at $.systemd.units.2".to_string(),
    ];
    assert_eq!(got, want);
}

#[test]
fn paths_conflicting_with_units_and_links_are_refused() {
    let got = issues(json!({"ignition": {"version": "3.1.0"},
        "storage": {"files": [
            {"path": "/etc/systemd/system/a.service", "contents": {"source": "data:,x"}},
            {"path": "/etc/link/inside", "contents": {"source": "data:,x"}}],
            "links": [{"path": "/etc/link", "target": "/tmp"}],
            "directories": [{"path": "/etc/d"}]},
        "systemd": {"units": [{"name": "a.service", "contents": "[Unit]\n"}]}}));
    assert_eq!(
        got,
        [
            "$.storage.files.1: file \"/etc/link/inside\": file path includes link in config (\"/etc/link\")",
            "$.storage.files.0.path: file \"/etc/systemd/system/a.service\": path conflicts with systemd unit or dropin",
        ]
    );
    let hard = issues(json!({"ignition": {"version": "3.1.0"}, "storage": {
        "directories": [{"path": "/etc/d"}],
        "links": [{"path": "/etc/h", "target": "/etc/d", "hard": true}]}}));
    assert_eq!(
        hard,
        vec!["$.storage.links.0: link \"/etc/h\": hard link target is a directory (\"/etc/d\")"]
    );
}

#[test]
fn spec_2_2_translates_like_the_mco() {
    let p = parse(json!({
        "ignition": {"version": "2.2.0", "config": {"append": [{"source": "data:,%7B%7D"}]}},
        "storage": {
            "filesystems": [{"name": "root", "path": "/"}],
            "files": [
                {"filesystem": "root", "path": "/etc/dup", "contents": {"source": "data:,first"}, "mode": 420},
                {"filesystem": "root", "path": "/etc/app", "append": true, "contents": {"source": "data:,more"}},
                {"filesystem": "root", "path": "/etc/noover", "overwrite": false, "contents": {"source": ""}},
                {"filesystem": "root", "path": "/etc/dup", "contents": {"source": "data:,second", "compression": ""}, "mode": 384,
                 "user": {"name": "core"}, "group": {"id": 1000}}
            ],
            "directories": [{"filesystem": "root", "path": "/var/d", "mode": 493}],
            "links": [{"filesystem": "root", "path": "/etc/l", "target": "/etc/app", "hard": false}]
        },
        "systemd": {"units": [
            {"name": "a.service", "enabled": true, "contents": "[Unit]\n",
             "dropins": [{"name": "1.conf", "contents": "x"}]},
            {"name": "b.service", "enable": true, "contents": "[Unit]\n"},
            {"name": "a.service", "enabled": false, "mask": true,
             "dropins": [{"name": "2.conf", "contents": "y"}]}
        ]},
        "passwd": {"users": [
            {"name": "core", "sshAuthorizedKeys": ["key-a", "key-b"]},
            {"name": "core", "sshAuthorizedKeys": ["key-c", "key-a"], "passwordHash": "$6$x$y"}
        ]}
    }))
    .unwrap();
    assert_eq!(p.source_version, SpecVersion::V2_2);
    let warnings: Vec<String> = p.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "$.storage.filesystems.0: filesystem \"root\": the root filesystem is implied; this definition is dropped, as the MCO drops it"
        ]
    );
    let c = p.config;
    assert_eq!(c.ignition.version, "3.5.0");
    assert_eq!(
        c.ignition.config.merge[0]
            .source
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("data:,%7B%7D")
    );
    let paths: Vec<&str> = c.storage.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["/etc/app", "/etc/noover", "/etc/dup"]);
    let app = &c.storage.files[0];
    assert_eq!(app.overwrite, Some(false));
    assert_eq!(app.append.len(), 1);
    assert!(app.contents.is_empty());
    assert_eq!(c.storage.files[1].overwrite, Some(false));
    assert_eq!(
        c.storage.files[1]
            .contents
            .source
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("")
    );
    let dup = &c.storage.files[2];
    assert_eq!(dup.overwrite, Some(true));
    assert_eq!(dup.mode, Some(0o600));
    assert_eq!(dup.user.name.as_deref(), Some("core"));
    assert_eq!(dup.group.id, Some(1000));
    assert_eq!(dup.contents.compression, None);
    assert_eq!(dup.decoded_contents().unwrap(), b"second");
    assert_eq!(c.storage.directories[0].mode, Some(0o755));
    assert_eq!(c.storage.links[0].hard, None);
    assert!(c.storage.filesystems.is_empty());
    let units: Vec<&str> = c.systemd.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(units, ["b.service", "a.service"]);
    assert_eq!(c.systemd.units[0].enabled, Some(true));
    let a = &c.systemd.units[1];
    assert_eq!(a.enabled, Some(false));
    assert_eq!(a.mask, Some(true));
    assert_eq!(a.contents, None);
    let dropins: Vec<&str> = a.dropins.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(dropins, ["2.conf", "1.conf"]);
    assert_eq!(c.passwd.users.len(), 1);
    assert_eq!(
        c.passwd.users[0].ssh_authorized_keys,
        ["key-c", "key-a", "key-b"]
    );
    assert_eq!(c.passwd.users[0].password_hash.as_deref(), Some("$6$x$y"));
}

#[test]
fn spec_2_2_refusals() {
    let cases = [
        (
            json!({"ignition": {"version": "2.2.0"}, "networkd": {"units": [{"name": "x.network", "contents": "y"}]}}),
            "$.networkd.units: config includes deprecated networkd section - use Files instead",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [{"path": "/f"}]}}),
            "$.storage.files.0.filesystem: file \"/f\": no filesystem specified",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [{"filesystem": "root", "path": "f"}]}}),
            "$.storage.files.0.path: file \"f\": path not absolute",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {"filesystems": [{"name": "data", "mount": {"device": "/dev/x", "format": "xfs"}}]}}),
            "$.storage.filesystems.0.name: filesystem \"data\": cannot be translated to spec 3: only the \"root\" filesystem is supported (the MCO has no mount point for another)",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "passwd": {"users": [{"name": "admin"}]}}),
            "$.passwd.users.0.name: unexpected user with name: admin. Only core user is supported",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [{"filesystem": "root", "path": "/f", "mode": 2541, "contents": {"source": "data:,x"}}]}}),
            "$.storage.files.0.mode: invalid mode 04755 for /f, cannot exceed 0777 (in the config translated to spec 3)",
        ),
    ];
    for (input, want) in cases {
        let got = issues(input.clone());
        assert!(
            got.iter().any(|g| g == want),
            "input {input}: got {got:?}, want {want:?}"
        );
    }
}

#[test]
fn spec_2_2_unknown_keys_are_warnings() {
    let p = parse(
        json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [
        {"filesystem": "root", "path": "/f", "contents": {"source": "data:,x"}, "label": "x"}]}}),
    )
    .unwrap();
    let w: Vec<String> = p.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(w, ["$.storage.files.0.label: unused key label"]);
    assert_eq!(p.config.storage.files[0].decoded_contents().unwrap(), b"x");
}
