//! Errors name their culprit (the file, unit or user, and the offending value) and never echo a
//! secret: contents, sources, password hashes, HTTP header values or proxy URLs, even when the
//! value has the wrong type (serde would quote it) or is hostile.

use machine_config::{MachineConfig, ParsedConfig};
use serde_json::{Value, json};

const SECRET: &str = "hunter2-TOPSECRET";

fn error_of(config: Value) -> String {
    match ParsedConfig::parse(config.to_string().as_bytes()) {
        Ok(p) => panic!("accepted {config}: {:?}", p.config),
        Err(e) => e.to_string(),
    }
}

/// (config, the whole message)
#[test]
fn wrong_types_in_secret_fields_are_described_not_quoted() {
    let cases = [
        (
            json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/pki/key.pem", "contents": SECRET}]}}),
            "$.storage.files.0.contents: file \"/etc/pki/key.pem\": invalid type: a string of 17 bytes (not shown: the field may hold a secret), expected struct Resource",
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/a", "contents": {"source": [SECRET]}}]}}),
            "$.storage.files.0.contents.source: file \"/etc/a\": invalid type: a list of 1 items (not shown: the field may hold a secret), expected a string",
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "passwd": {"users": [{"name": "core", "passwordHash": {"x": SECRET}}]}}),
            "$.passwd.users.0.passwordHash: user \"core\": invalid type: an object with 1 keys (not shown: the field may hold a secret), expected a string",
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x.conf", "contents": [SECRET]}]}]}}),
            "$.systemd.units.0.dropins.0.contents: drop-in \"x.conf\" of unit \"a.service\": invalid type: a list of 1 items (not shown: the field may hold a secret), expected a string",
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "systemd": {"units": [{"name": "a.service", "contents": 7}]}}),
            "$.systemd.units.0.contents: unit \"a.service\": invalid type: a number (not shown: the field may hold a secret), expected a string",
        ),
        (
            json!({"ignition": {"version": "3.1.0", "config": {"merge": [{"source": "https://x/a", "httpHeaders": [{"name": "Authorization", "value": [SECRET]}]}]}}}),
            "$.ignition.config.merge.0.httpHeaders.0.value: invalid type: a list of 1 items (not shown: the field may hold a secret), expected a string",
        ),
        (
            json!({"ignition": {"version": "3.1.0", "proxy": {"httpsProxy": [SECRET]}}}),
            "$.ignition.proxy.httpsProxy: invalid type: a list of 1 items (not shown: the field may hold a secret), expected a string",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "passwd": {"users": [{"name": "core", "passwordHash": 5}]}}),
            "$.passwd.users.0.passwordHash: user \"core\": invalid type: a number (not shown: the field may hold a secret), expected a string",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [{"filesystem": "root", "path": "/etc/a", "contents": {"source": {"k": SECRET}}}]}}),
            "$.storage.files.0.contents.source: file \"/etc/a\": invalid type: an object with 1 keys (not shown: the field may hold a secret), expected a string",
        ),
    ];
    for (config, want) in cases {
        let got = error_of(config.clone());
        assert_eq!(got, want, "{config}");
        assert!(!got.contains(SECRET));
    }
}

/// A value where a list or an object is expected, in any field, is described, never quoted: it
/// may hold what the container would (a drop-in's text, a key, a file's contents).
#[test]
fn a_value_in_place_of_a_list_or_object_is_described_not_quoted() {
    let cases = [
        (
            json!({"ignition": {"version": "3.2.0"}, "systemd": {"units": [{"name": "a.service", "dropins": SECRET}]}}),
            "$.systemd.units.0.dropins: unit \"a.service\": invalid type: a string of 17 bytes (not shown: it may hold what the list or object would, a file or a key), expected a sequence",
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": SECRET}]}}),
            "$.passwd.users.0.sshAuthorizedKeys: user \"core\": invalid type: a string of 17 bytes (not shown: it may hold what the list or object would, a file or a key), expected a sequence",
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "storage": {"files": SECRET}}),
            "$.storage.files: invalid type: a string of 17 bytes (not shown: it may hold what the list or object would, a file or a key), expected a sequence",
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [SECRET]}}),
            "$.storage.files.0: invalid type: a string of 17 bytes (not shown: it may hold what the list or object would, a file or a key), expected struct File",
        ),
        (
            json!({"ignition": {"version": "2.2.0"}, "systemd": {"units": [{"name": "a.service", "dropins": SECRET}]}}),
            "$.systemd.units.0.dropins: unit \"a.service\": invalid type: a string of 17 bytes (not shown: it may hold what the list or object would, a file or a key), expected a sequence",
        ),
    ];
    for (config, want) in cases {
        let got = error_of(config.clone());
        assert_eq!(got, want, "{config}");
        assert!(!got.contains(SECRET));
    }
}

/// Other fields keep serde's message, with their culprit; a hostile, long value is described.
#[test]
fn wrong_types_elsewhere_name_the_value() {
    let long = "0".repeat(5000);
    let cases = [
        (
            json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/a", "mode": "0644"}]}}),
            "$.storage.files.0.mode: file \"/etc/a\": invalid type: string \"0644\", expected i64".to_string(),
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "storage": {"links": [{"path": "/etc/l", "hard": "yes"}]}}),
            "$.storage.links.0.hard: link \"/etc/l\": invalid type: string \"yes\", expected a boolean".to_string(),
        ),
        (
            json!({"ignition": {"version": "3.2.0"}, "systemd": {"units": [{"name": "a.service", "enabled": long}]}}),
            "$.systemd.units.0.enabled: unit \"a.service\": invalid type: a string of 5000 bytes, expected a boolean".to_string(),
        ),
    ];
    for (config, want) in cases {
        assert_eq!(error_of(config.clone()), want, "{config}");
    }
}

/// Sources are named by scheme and length, never shown, whatever is wrong with them.
#[test]
fn bad_sources_are_never_shown() {
    let sources = [
        format!("data:;base64,{SECRET}!"),
        format!("data:,{SECRET} with a space"),
        format!("data:text/{SECRET}/x;charset={SECRET},x"),
        format!("data:{SECRET},x"),
        format!("data:;{SECRET};base64,eA=="),
        SECRET.to_string(),
        format!("ftp://user:{SECRET}@host/x"),
    ];
    for src in sources {
        for version in ["2.2.0", "3.2.0"] {
            let config = json!({"ignition": {"version": version}, "storage": {"files": [
                {"filesystem": "root", "path": "/etc/a", "contents": {"source": src}}]}});
            let got = error_of(config);
            assert!(!got.contains(SECRET), "{src}: {got}");
            assert!(got.contains("file \"/etc/a\""), "{src}: {got}");
            assert!(
                got.contains(&format!(" URL of {} bytes", src.len()))
                    || got.contains(&format!("source of {} bytes", src.len())),
                "{src}: {got}"
            );
        }
    }
}

/// Invalid unit contents: the error says where, not what.
#[test]
fn bad_unit_contents_are_never_shown() {
    let config = json!({"ignition": {"version": "3.2.0"}, "systemd": {"units": [
        {"name": "a.service", "contents": format!("[Service]\nEnvironment=A=b\n{SECRET}\n")}]}});
    assert_eq!(
        error_of(config),
        "$.systemd.units.0.contents: unit \"a.service\": invalid unit content: unexpected newline encountered while parsing option name (line 3)"
    );
}

/// The same in a MachineConfig read from YAML: paths are rebased under `$.spec.config`.
#[test]
fn machine_config_errors_too() {
    let yaml = format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {{name: x}}\nspec:\n  config:\n    ignition: {{version: 3.2.0}}\n    passwd:\n      users:\n      - name: core\n        passwordHash: [{SECRET}]\n"
    );
    let e = MachineConfig::from_slice(yaml.as_bytes())
        .and_then(|mc| mc.ignition().map(|_| mc))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "$.spec.config.passwd.users.0.passwordHash: user \"core\": invalid type: a list of 1 items (not shown: the field may hold a secret), expected a string"
    );
}
