use super::*;
use serde_json::json;

fn files_and_units() -> Value {
    json!({
        "ignition": {"version": "3.5.0"},
        "storage": {"files": [{
            "path": "/etc/a.conf", "mode": 420, "overwrite": true,
            "contents": {"source": "data:,hello"}
        }]},
        "systemd": {"units": [{"name": "a.service", "enabled": true, "contents": "[Unit]\n"}]}
    })
}

#[test]
fn every_3x_target_keeps_fields_and_sets_version() {
    for target in SpecVersion::ALL
        .into_iter()
        .filter(|t| *t != SpecVersion::V2_2)
    {
        let out = translate(&files_and_units(), target).unwrap();
        let mut expected = files_and_units();
        expected["ignition"]["version"] = json!(target.to_string());
        assert_eq!(out, expected, "{target}");
    }
}

/// (config, target, Ok(expected output minus version) | Err(problem substrings))
#[test]
fn gated_fields_and_values() {
    type Case = (
        &'static str,
        Value,
        SpecVersion,
        Result<Value, Vec<&'static str>>,
    );
    let luks = json!({"ignition": {"version": "3.5.0"},
        "storage": {"luks": [{"name": "root", "device": "/dev/sda4", "discard": true}]}});
    let cases: Vec<Case> = vec![
        (
            "luks discard needs 3.4",
            luks.clone(),
            SpecVersion::V3_3,
            Err(vec![
                "$.storage.luks.0.discard: not supported before spec 3.4.0",
            ]),
        ),
        (
            "luks discard in 3.4",
            luks.clone(),
            SpecVersion::V3_4,
            Ok(luks.clone()),
        ),
        (
            "luks needs 3.2",
            luks.clone(),
            SpecVersion::V3_1,
            Err(vec!["$.storage.luks: not supported before spec 3.2.0"]),
        ),
        (
            "discard false is dropped",
            json!({"ignition": {"version": "3.5.0"},
                "storage": {"luks": [{"name": "r", "device": "/dev/a", "discard": false, "openOptions": []}]}}),
            SpecVersion::V3_3,
            Ok(json!({"ignition": {"version": "3.5.0"},
                "storage": {"luks": [{"name": "r", "device": "/dev/a"}]}})),
        ),
        (
            "shouldExist true is dropped below 3.2",
            json!({"ignition": {"version": "3.5.0"},
                "passwd": {"users": [{"name": "core", "shouldExist": true}]}}),
            SpecVersion::V3_1,
            Ok(json!({"ignition": {"version": "3.5.0"}, "passwd": {"users": [{"name": "core"}]}})),
        ),
        (
            "shouldExist false is refused below 3.2",
            json!({"ignition": {"version": "3.5.0"},
                "passwd": {"users": [{"name": "old", "shouldExist": false}]}}),
            SpecVersion::V3_0,
            Err(vec![
                "$.passwd.users.0.shouldExist: user \"old\": not supported before spec 3.2.0",
            ]),
        ),
        (
            "sha256 hash needs 3.1",
            json!({"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/a",
                "contents": {"source": "data:,x", "verification": {"hash": format!("sha256-{}", "0".repeat(64))}}}]}}),
            SpecVersion::V3_0,
            Err(vec![
                "$.storage.files.0.contents.verification.hash: file \"/a\": sha256 hashes",
            ]),
        ),
        (
            "gs:// needs 3.2",
            json!({"ignition": {"version": "3.5.0", "config": {"merge": [{"source": "gs://b/o"}]}}}),
            SpecVersion::V3_1,
            Err(vec!["$.ignition.config.merge.0.source: gs:// sources"]),
        ),
        (
            "format none needs 3.3",
            json!({"ignition": {"version": "3.5.0"},
                "storage": {"filesystems": [{"device": "/dev/b", "format": "none"}]}}),
            SpecVersion::V3_2,
            Err(vec![
                "$.storage.filesystems.0.format: filesystem format \"none\"",
            ]),
        ),
        (
            "proxy and mountOptions need 3.1, all reported",
            json!({"ignition": {"version": "3.5.0", "proxy": {"httpProxy": "http://p:3128"}},
                "storage": {"filesystems": [{"device": "/dev/b", "format": "xfs", "mountOptions": ["ro"]}]}}),
            SpecVersion::V3_0,
            Err(vec![
                "$.ignition.proxy: not supported before spec 3.1.0",
                "$.storage.filesystems.0.mountOptions: not supported before spec 3.1.0",
            ]),
        ),
        (
            "kernelArguments need 3.3",
            json!({"ignition": {"version": "3.5.0"}, "kernelArguments": {"shouldExist": ["a=1"]}}),
            SpecVersion::V3_2,
            Err(vec!["$.kernelArguments: not supported before spec 3.3.0"]),
        ),
        (
            "empty kernelArguments are dropped",
            json!({"ignition": {"version": "3.5.0"}, "kernelArguments": {"shouldExist": []}}),
            SpecVersion::V3_2,
            Ok(json!({"ignition": {"version": "3.5.0"}})),
        ),
    ];
    for (name, config, target, expected) in cases {
        let got = translate(&config, target);
        match expected {
            Ok(mut want) => {
                want["ignition"]["version"] = json!(target.to_string());
                assert_eq!(got.unwrap(), want, "{name}");
            }
            Err(needles) => {
                let err = got.expect_err(name);
                let DownTranslateError::Unsupported {
                    problems,
                    target: t,
                } = &err
                else {
                    panic!("{name}: unexpected error {err}");
                };
                assert_eq!(*t, target);
                assert_eq!(problems.len(), needles.len(), "{name}: {problems:?}");
                for needle in needles {
                    assert!(
                        err.to_string().contains(needle),
                        "{name}: {err} lacks {needle}"
                    );
                }
            }
        }
    }
}

#[test]
fn kernel_arguments_move_into_the_machine_config_below_3_3() {
    let base = json!({"ignition": {"version": "3.5.0"},
        "kernelArguments": {"shouldExist": ["a=1", "b c"]}});
    for target in [SpecVersion::V2_2, SpecVersion::V3_0, SpecVersion::V3_2] {
        let mut config = base.clone();
        let mut kargs = vec!["existing".to_string()];
        migrate_kernel_arguments(&mut config, &mut kargs, target).unwrap();
        assert_eq!(kargs, ["existing", "a=1", "b c"]);
        assert!(config.get("kernelArguments").is_none());
        translate(&config, target).unwrap();
    }
    for target in [SpecVersion::V3_3, SpecVersion::V3_5] {
        let mut config = base.clone();
        let mut kargs = Vec::new();
        migrate_kernel_arguments(&mut config, &mut kargs, target).unwrap();
        assert!(kargs.is_empty());
        assert_eq!(config, base);
    }
    let mut config = json!({"ignition": {"version": "3.5.0"},
        "kernelArguments": {"shouldExist": ["a"], "shouldNotExist": ["quiet"]}});
    let err =
        migrate_kernel_arguments(&mut config, &mut Vec::new(), SpecVersion::V3_2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "can't serve version 3.2.0 with ignition kernelArguments.shouldNotExist populated ([\"quiet\"])"
    );
}

#[test]
fn spec_2_2_layout() {
    let config = json!({
        "ignition": {"version": "3.5.0",
            "config": {"merge": [{"source": "https://x/y", "verification": {"hash": format!("sha512-{}", "a".repeat(128))}}]},
            "security": {"tls": {"certificateAuthorities": [{"source": "data:,ca"}]}},
            "timeouts": {"httpTotal": 30}},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAA"], "system": false}]},
        "systemd": {"units": [{"name": "a.service", "enabled": true, "mask": false,
            "dropins": [{"name": "10-x.conf", "contents": "[Service]\n"}]}]},
        "storage": {
            "filesystems": [{"device": "/dev/disk/by-label/var", "format": "xfs", "path": "/var"}],
            "files": [
                {"path": "/etc/a", "mode": 420, "overwrite": true, "contents": {"source": "data:,a", "compression": ""},
                 "append": [{"source": "data:,b"}], "user": {"name": "core"}},
                {"path": "/var/lib/x", "contents": {"source": "data:;base64,H4sI", "compression": "gzip"}},
                {"path": "/etc/empty"}
            ],
            "directories": [{"path": "/var/d", "mode": 493}],
            "links": [{"path": "/etc/l", "target": "/etc/a", "hard": false}]
        }
    });
    let out = translate(&config, SpecVersion::V2_2).unwrap();
    let expected = json!({
        "ignition": {"version": "2.2.0",
            "config": {"append": [{"source": "https://x/y", "verification": {"hash": format!("sha512-{}", "a".repeat(128))}}]},
            "security": {"tls": {"certificateAuthorities": [{"source": "data:,ca", "verification": {}}]}},
            "timeouts": {"httpTotal": 30}},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAA"]}]},
        "systemd": {"units": [{"name": "a.service", "enabled": true,
            "dropins": [{"name": "10-x.conf", "contents": "[Service]\n"}]}]},
        "storage": {
            "filesystems": [{"name": "/var", "mount": {"device": "/dev/disk/by-label/var", "format": "xfs"}}],
            "files": [
                {"filesystem": "root", "path": "/etc/a", "overwrite": true, "mode": 420,
                 "user": {"name": "core"}, "contents": {"source": "data:,a", "verification": {}}},
                {"filesystem": "root", "path": "/etc/a", "overwrite": false, "append": true, "mode": 420,
                 "user": {"name": "core"}, "contents": {"source": "data:,b", "verification": {}}},
                {"filesystem": "/var", "path": "/lib/x", "overwrite": false,
                 "contents": {"compression": "gzip", "source": "data:;base64,H4sI", "verification": {}}},
                {"filesystem": "root", "path": "/etc/empty", "overwrite": false,
                 "contents": {"source": "data:,", "verification": {}}}
            ],
            "directories": [{"filesystem": "/var", "path": "/d", "mode": 493}],
            "links": [{"filesystem": "root", "path": "/etc/l", "target": "/etc/a"}]
        }
    });
    assert_eq!(out, expected);
}

#[test]
fn spec_2_2_refusals_name_every_path() {
    let config = json!({
        "ignition": {"version": "3.5.0", "proxy": {"httpsProxy": "http://p"}},
        "storage": {
            "disks": [{"device": "/dev/sda", "partitions": [{"number": 1, "sizeMiB": 100, "wipePartitionEntry": true}]}],
            "filesystems": [{"device": "/dev/sda1", "path": "/var"}]
        }
    });
    let err = translate(&config, SpecVersion::V2_2)
        .unwrap_err()
        .to_string();
    for needle in [
        "cannot translate the config to Ignition spec 2.2.0",
        "$.ignition.proxy: not supported before spec 3.1.0",
        "$.storage.disks.0.partitions.0.sizeMiB: spec 2.2 sizes partitions in sectors",
        "$.storage.disks.0.partitions.0.wipePartitionEntry: not supported by spec 2.2",
        "$.storage.filesystems.0.format: spec 2.2 requires a filesystem format",
    ] {
        assert!(err.contains(needle), "{err} lacks {needle}");
    }
}

#[test]
fn malformed_input_and_version_helpers() {
    let err = translate(&json!([1]), SpecVersion::V3_1).unwrap_err();
    assert!(matches!(err, DownTranslateError::Malformed { .. }), "{err}");
    assert_eq!(
        empty_config(SpecVersion::V3_1),
        json!({"ignition": {"version": "3.1.0"}})
    );
    assert!(SpecVersion::V2_2 < SpecVersion::V3_0 && SpecVersion::V3_4 < NEWEST);
}

/// Rules of ign-converter's down-translators that the MCS runs (`v35tov34` ... `v32tov22`):
/// (config, target, Ok(expected output minus version) | Err(every problem)).
#[test]
fn converter_rules() {
    type Case = (
        &'static str,
        Value,
        SpecVersion,
        Result<Value, Vec<&'static str>>,
    );
    let ign = |extra: Value| {
        let mut c = json!({"ignition": {"version": "3.5.0"}});
        if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
            c.extend(extra.clone());
        }
        c
    };
    let replace = |r: Value| json!({"ignition": {"version": "3.5.0", "config": {"replace": r}}});
    let sticky =
        ign(json!({"storage": {"directories": [{"path": "/var/shared", "mode": 0o1777}]}}));
    let cases: Vec<Case> = vec![
        (
            "replace without source is omitted in 2.2 (translateCfgRef)",
            replace(json!({"verification": {}})),
            SpecVersion::V2_2,
            Ok(json!({"ignition": {"version": "3.5.0"}})),
        ),
        (
            "replace with an empty source is kept in 2.2",
            replace(json!({"source": ""})),
            SpecVersion::V2_2,
            Ok(
                json!({"ignition": {"version": "3.5.0", "config": {"replace": {"source": "", "verification": {}}}}}),
            ),
        ),
        (
            "replace is kept as it is in 3.0",
            replace(json!({"verification": {}})),
            SpecVersion::V3_0,
            Ok(replace(json!({"verification": {}}))),
        ),
        (
            "special mode bits need 3.4 (v34tov33)",
            sticky.clone(),
            SpecVersion::V3_3,
            Err(vec![
                "$.storage.directories.0.mode: directory \"/var/shared\": setuid/setgid/sticky mode bits are not supported before spec 3.4.0",
            ]),
        ),
        (
            "special mode bits in 3.4",
            sticky.clone(),
            SpecVersion::V3_4,
            Ok(sticky),
        ),
        (
            "a unit's empty contents are kept",
            ign(
                json!({"systemd": {"units": [{"name": "a.service", "contents": "", "dropins": [{"name": "x.conf", "contents": ""}]}]}}),
            ),
            SpecVersion::V2_2,
            Ok(ign(
                json!({"systemd": {"units": [{"name": "a.service", "contents": "", "dropins": [{"name": "x.conf", "contents": ""}]}]}}),
            )),
        ),
    ];
    for (name, config, target, expected) in cases {
        let got = translate(&config, target);
        match expected {
            Ok(mut want) => {
                want["ignition"]["version"] = json!(target.to_string());
                assert_eq!(got.expect(name), want, "{name}");
            }
            Err(want) => match got {
                Err(DownTranslateError::Unsupported { problems, .. }) => {
                    assert_eq!(problems, want, "{name}");
                }
                other => panic!("{name}: {other:?}"),
            },
        }
    }
}
