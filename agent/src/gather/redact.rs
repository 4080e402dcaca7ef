//! What a support bundle leaves out of what it collects, and the note that says so.
//!
//! Two kinds of secret are recognised:
//! - in a MachineConfig (the update record's configs, `currentconfig`), every value of a field
//!   the model already classes as secret ([`machine_config::error::SECRET_FIELDS`]: file and
//!   unit contents, password hashes, HTTP headers, proxy URLs), whatever it holds, since file
//!   contents are where pull secrets and private keys travel;
//! - in any text (a journal, a configuration fragment, a string of a JSON document): a PEM
//!   private key block, a crypt(3) password hash, the credentials of a URL, the `auth` of a
//!   registry credential, a bearer token.
//!
//! Each is replaced by a marker that names what was there, and listed (where, what, why) in
//! the bundle's manifest.

use std::sync::LazyLock;

use machine_config::error::SECRET_FIELDS;
use regex::Regex;
use serde::Serialize;
use serde_json::Value as Json;

/// One thing left out of an item of the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// Where: a JSON path (`$.desired.spec.config.passwd.users[0].passwordHash`), a line
    /// (`line 3`), or a node's file that was not collected at all.
    pub at: String,
    /// Why it was left out.
    pub why: String,
}

/// Why a value of a MachineConfig's secret field is left out.
fn field_reason(key: &str) -> &'static str {
    match key {
        "passwordHash" => "a password hash",
        "httpHeaders" => "HTTP headers, which may carry tokens",
        "httpProxy" | "httpsProxy" => "a proxy URL, which may carry credentials",
        // contents, source, append
        _ => "file or unit contents, which may hold private keys, tokens or pull secrets",
    }
}

/// What is recognised in text, and why it is left out.
struct Pattern {
    regex: &'static LazyLock<Regex>,
    /// Text kept in front of the marker (the regex's group 1), e.g. `https://`.
    keeps_prefix: bool,
    why: &'static str,
}

static PRIVATE_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
    )
    .expect("private key pattern")
});
static CRYPT_HASH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\$(?:1|2[abxy]?|5|6|7|y|gy|sha1|md5)\$[A-Za-z0-9./$=,+-]{8,}")
        .expect("crypt pattern")
});
static URL_CREDENTIALS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s:@"']+:[^/\s@"']*@"#).expect("URL pattern")
});
static REGISTRY_AUTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"("(?:auth|identitytoken|password|registrytoken)"\s*:\s*)"[^"]*""#)
        .expect("registry auth pattern")
});
static BEARER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}").expect("bearer pattern"));

static PATTERNS: [Pattern; 5] = [
    Pattern {
        regex: &PRIVATE_KEY,
        keeps_prefix: false,
        why: "a private key",
    },
    Pattern {
        regex: &CRYPT_HASH,
        keeps_prefix: false,
        why: "a password hash",
    },
    Pattern {
        regex: &URL_CREDENTIALS,
        keeps_prefix: true,
        why: "the credentials of a URL",
    },
    Pattern {
        regex: &REGISTRY_AUTH,
        keeps_prefix: true,
        why: "a registry credential (pull secret)",
    },
    Pattern {
        regex: &BEARER,
        keeps_prefix: true,
        why: "a bearer token",
    },
];

/// The marker that replaces what was left out.
pub fn marker(why: &str) -> String {
    format!("<left out by mco-agent gather: {why}>")
}

/// `text` with every secret replaced by a marker, and what was left out (`at` is the line,
/// counted from 1, where each began).
pub fn text(input: &str) -> (String, Vec<LeftOut>) {
    let mut out = input.to_string();
    let mut left = Vec::new();
    for pattern in &PATTERNS {
        if !pattern.regex.is_match(&out) {
            continue;
        }
        let mut kept = String::with_capacity(out.len());
        let mut last = 0;
        for caps in pattern.regex.captures_iter(&out) {
            let whole = caps.get(0).expect("group 0");
            kept.push_str(&out[last..whole.start()]);
            if pattern.keeps_prefix {
                kept.push_str(caps.get(1).map_or("", |m| m.as_str()));
            }
            kept.push_str(&marker(pattern.why));
            let line = out[..whole.start()].matches('\n').count() + 1;
            left.push(LeftOut {
                at: format!("line {line}"),
                why: pattern.why.to_string(),
            });
            last = whole.end();
        }
        kept.push_str(&out[last..]);
        out = kept;
    }
    left.sort_by_key(|l| line_number(&l.at));
    (out, left)
}

/// Why `input` must not be shown, when it holds a secret [`text`] would leave out (a private
/// key, a password hash, a URL's credentials, a registry credential, a bearer token): the first
/// kind found. `validate --show-contents` and `diff --show-contents` show no such contents.
pub fn secret_in(input: &str) -> Option<&'static str> {
    PATTERNS
        .iter()
        .find(|p| p.regex.is_match(input))
        .map(|p| p.why)
}

fn line_number(at: &str) -> usize {
    at.trim_start_matches("line ").parse().unwrap_or(0)
}

/// Leaves the secrets out of a MachineConfig (or anything holding one) at JSON path `at`:
/// the value of every secret field, and secrets in any other string ([`text`]).
pub fn machine_config(value: &mut Json, at: &str, left: &mut Vec<LeftOut>) {
    walk(value, at, true, left);
}

/// Leaves the secrets out of the strings of a JSON document that holds no MachineConfig (a
/// status, rpm-ostree's deployments), where a field named `source` is no file's contents.
pub fn strings(value: &mut Json, at: &str, left: &mut Vec<LeftOut>) {
    walk(value, at, false, left);
}

fn walk(value: &mut Json, at: &str, fields: bool, left: &mut Vec<LeftOut>) {
    match value {
        Json::Object(map) => {
            for (key, v) in map.iter_mut() {
                let path = format!("{at}.{key}");
                if fields && SECRET_FIELDS.contains(&key.as_str()) && !is_empty(v) {
                    let why = field_reason(key);
                    *v = Json::String(marker(why));
                    left.push(LeftOut {
                        at: path,
                        why: why.to_string(),
                    });
                } else {
                    walk(v, &path, fields, left);
                }
            }
        }
        Json::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                walk(v, &format!("{at}[{i}]"), fields, left);
            }
        }
        Json::String(s) => {
            let (kept, found) = text(s);
            if !found.is_empty() {
                *s = kept;
                left.extend(found.into_iter().map(|f| LeftOut {
                    at: at.to_string(),
                    why: f.why,
                }));
            }
        }
        _ => {}
    }
}

/// A field with nothing in it (`null`, `""`, `[]`, `{}`, `{"source": ""}`) hides nothing:
/// kept, so the bundle shows it was empty.
fn is_empty(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::String(s) => s.is_empty(),
        Json::Array(a) => a.iter().all(is_empty),
        Json::Object(o) => o.values().all(is_empty),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----";

    /// (input, what must be gone, what must stay, the reasons in line order)
    type Case<'a> = (
        &'a str,
        &'a [&'a str],
        &'a [&'a str],
        &'a [(&'a str, &'a str)],
    );

    #[test]
    fn secrets_in_text_are_replaced_and_named_by_line() {
        let with_key = format!("a\n{KEY}\nb");
        let cases: Vec<Case<'_>> = vec![
            ("nothing secret here\n", &[], &["nothing secret here"], &[]),
            (
                &with_key,
                &["b3BlbnNzaC1rZXktdjEAAAAA", "BEGIN OPENSSH"],
                &["a\n", "\nb"],
                &[("line 2", "a private key")],
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEcut off",
                &["MIIEcut"],
                &[],
                &[("line 1", "a private key")],
            ),
            (
                "-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----",
                &[],
                &["MIIBcert"],
                &[],
            ),
            (
                "core:$6$saltsalt$hashhashhashhash:19000::\n",
                &["saltsalt", "hashhash"],
                &["core:", ":19000::"],
                &[("line 1", "a password hash")],
            ),
            (
                "x\nyescrypt $y$j9T$abcdefgh$ijklmnop end",
                &["abcdefgh"],
                &["yescrypt ", " end"],
                &[("line 2", "a password hash")],
            ),
            ("costs $5 or $6 today", &[], &["costs $5 or $6 today"], &[]),
            (
                "url = \"https://admin:hunter2@lock.example/v1\"",
                &["admin", "hunter2"],
                &["https://", "lock.example/v1"],
                &[("line 1", "the credentials of a URL")],
            ),
            (
                "see https://lock.example:8443/v1",
                &[],
                &["https://lock.example:8443/v1"],
                &[],
            ),
            (
                r#"{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz","email":"a@b"}}}"#,
                &["dXNlcjpwYXNz"],
                &["quay.io", r#""auth":"#, "a@b"],
                &[("line 1", "a registry credential (pull secret)")],
            ),
            (
                "Authorization: Bearer sha256~tokentokentoken",
                &["tokentokentoken"],
                &["Authorization: Bearer "],
                &[("line 1", "a bearer token")],
            ),
        ];
        for (input, gone, kept, reasons) in cases {
            let (out, left) = text(input);
            for g in gone {
                assert!(!out.contains(g), "{input:?}: {g:?} still in {out:?}");
            }
            for k in kept {
                assert!(out.contains(k), "{input:?}: {k:?} lost from {out:?}");
            }
            let got: Vec<(&str, &str)> = left
                .iter()
                .map(|l| (l.at.as_str(), l.why.as_str()))
                .collect();
            assert_eq!(got, reasons, "{input:?}");
            for (_, why) in reasons {
                assert!(
                    out.contains(&marker(why)),
                    "{input:?}: no marker in {out:?}"
                );
            }
        }
    }

    #[test]
    fn secret_fields_of_a_machine_config_are_left_out_whatever_they_hold() {
        let mut mc = json!({
            "metadata": {"name": "rendered-worker-1"},
            "spec": {"config": {
                "passwd": {"users": [{"name": "core", "passwordHash": "$6$s$h",
                                      "sshAuthorizedKeys": ["ssh-ed25519 AAAApublic"]}]},
                "storage": {"files": [
                    {"path": "/var/lib/kubelet/config.json", "contents": {"source": "data:,%7B%22auths%22"}},
                    {"path": "/etc/empty", "contents": {"source": ""}},
                    {"path": "/etc/appended", "append": [{"source": "data:,x"}]}
                ]},
                "systemd": {"units": [{"name": "a.service", "contents": "[Service]\nExecStart=/bin/true"}]}
            }}
        });
        let mut left = Vec::new();
        machine_config(&mut mc, "$.desired", &mut left);
        let got: Vec<(&str, &str)> = left
            .iter()
            .map(|l| (l.at.as_str(), l.why.as_str()))
            .collect();
        let contents = "file or unit contents, which may hold private keys, tokens or pull secrets";
        assert_eq!(
            got,
            [
                (
                    "$.desired.spec.config.passwd.users[0].passwordHash",
                    "a password hash"
                ),
                ("$.desired.spec.config.storage.files[0].contents", contents),
                ("$.desired.spec.config.storage.files[2].append", contents),
                ("$.desired.spec.config.systemd.units[0].contents", contents),
            ]
        );
        let text = mc.to_string();
        for secret in ["$6$s$h", "auths", "data:,x", "ExecStart"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        // what helps support stays: names, paths, public keys, an empty field
        for kept in [
            "rendered-worker-1",
            "/var/lib/kubelet/config.json",
            "AAAApublic",
            r#""source":"""#,
        ] {
            assert!(text.contains(kept), "{kept} not in {text}");
        }
    }

    #[test]
    fn documents_without_a_machine_config_keep_their_fields_but_not_secret_strings() {
        let mut doc = json!({"deployments": {"source": "sysroot /"},
                             "origin": {"url": "https://u:p@mirror.example/os"}});
        let mut left = Vec::new();
        strings(&mut doc, "$", &mut left);
        assert_eq!(doc["deployments"]["source"], "sysroot /");
        assert!(!doc.to_string().contains("u:p@"));
        assert_eq!(
            left,
            [LeftOut {
                at: "$.origin.url".into(),
                why: "the credentials of a URL".into()
            }]
        );
    }
}
