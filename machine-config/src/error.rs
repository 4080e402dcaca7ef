//! Error types. Every message names the field (as a JSON path) and what is wrong with it.

use std::fmt;

/// One problem found in a document, located by a JSON path such as `$.storage.files.3.path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// JSON path of the offending field, `$` for the document root.
    pub path: String,
    /// What is wrong, e.g. `path not absolute`.
    pub message: String,
}

impl Issue {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The same issue with its path re-rooted under `prefix` (e.g. `$.spec.config`).
    pub fn under(mut self, prefix: &str) -> Self {
        self.path = rebase_path(&self.path, prefix);
        self
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Re-roots a `$`-path under `prefix` (itself a `$`-path).
pub(crate) fn rebase_path(path: &str, prefix: &str) -> String {
    match path.strip_prefix('$') {
        Some(rest) => format!("{prefix}{rest}"),
        None => format!("{prefix}.{path}"),
    }
}

/// Why a config, MachineConfig or other document could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The bytes are not well-formed JSON/YAML.
    #[error("invalid {format}: {message}")]
    Syntax {
        format: &'static str,
        message: String,
    },
    /// `ignition.version` is missing, malformed or not one we speak.
    #[error("{path}: {message}")]
    Version { path: String, message: String },
    /// The document is well-formed but wrong: every problem found, in document order.
    #[error("{}", join_issues(.0))]
    Invalid(Vec<Issue>),
}

impl ParseError {
    /// Every located problem (a syntax error has none: see its message).
    pub fn issues(&self) -> Vec<Issue> {
        match self {
            ParseError::Syntax { .. } => Vec::new(),
            ParseError::Version { path, message } => {
                vec![Issue::new(path.clone(), message.clone())]
            }
            ParseError::Invalid(issues) => issues.clone(),
        }
    }

    /// The same error with its paths re-rooted under `prefix` (e.g. `$.spec.config`).
    pub(crate) fn under(self, prefix: &str) -> Self {
        match self {
            ParseError::Syntax { format, message } => ParseError::Syntax {
                format,
                message: format!("{prefix}: {message}"),
            },
            ParseError::Version { path, message } => ParseError::Version {
                path: rebase_path(&path, prefix),
                message,
            },
            ParseError::Invalid(issues) => {
                ParseError::Invalid(issues.into_iter().map(|i| i.under(prefix)).collect())
            }
        }
    }
}

fn join_issues(issues: &[Issue]) -> String {
    let parts: Vec<String> = issues.iter().map(Issue::to_string).collect();
    parts.join("; ")
}

/// Fields whose values may be secrets (file and unit contents, password hashes, data URLs,
/// HTTP header values that carry tokens, proxy URLs with credentials): an error about such a
/// field, or about anything inside it, never shows the value (and `mco-agent gather` leaves
/// their values out of a support bundle).
pub const SECRET_FIELDS: [&str; 7] = [
    "contents",
    "source",
    "append",
    "passwordHash",
    "httpHeaders",
    "httpProxy",
    "httpsProxy",
];

/// Longest string value an error message quotes; longer ones are described by their length.
const MAX_QUOTED: usize = 64;

/// Converts a decoding error with its field path (from [`crate::tracked`]) into an [`Issue`].
/// `root` is the document that was decoded: serde's messages quote the offending value
/// (`invalid type: string "...", expected i64`), so for a secret field, or a value too long to
/// quote, the message is rebuilt from the value's JSON type and size instead.
pub(crate) fn serde_issue(err: crate::tracked::PathError, root: &serde_json::Value) -> Issue {
    use crate::tracked::{DisplayPath, Segment};
    let path = json_path_from_serde(&DisplayPath(&err.path).to_string());
    let mut secret = false;
    let mut value = Some(root);
    let mut list: Option<&str> = None;
    let mut subject: Option<String> = None;
    for segment in &err.path {
        value = match segment {
            Segment::Seq(index) => {
                let item = value.and_then(|v| v.get(index));
                if let (Some(list), Some(item)) = (list, item) {
                    subject = entry_subject(list, item, subject.as_deref()).or(subject);
                }
                item
            }
            Segment::Map(key) => {
                secret |= SECRET_FIELDS.contains(&key.as_str());
                list = Some(key.as_str());
                value.and_then(|v| v.get(key))
            }
            Segment::Enum(_) => None,
        };
    }
    let subject = subject.map_or_else(String::new, |s| format!("{s}: "));
    let message = err.error.to_string();
    let Some((kind, expected)) = value_complaint(&message) else {
        return Issue::new(path, format!("{subject}{message}"));
    };
    let long = value
        .and_then(serde_json::Value::as_str)
        .is_some_and(|s| s.len() > MAX_QUOTED);
    let container = expects_container(expected);
    if !secret && !container && !long {
        return Issue::new(path, format!("{subject}{message}"));
    }
    let what = value.map_or_else(|| "a value".to_string(), describe_value);
    let withheld = if secret {
        " (not shown: the field may hold a secret)"
    } else if container {
        " (not shown: it may hold what the list or object would, a file or a key)"
    } else {
        ""
    };
    Issue::new(
        path,
        format!("{subject}{kind}: {what}{withheld}, expected {expected}"),
    )
}

/// What an entry of a list is, by its path or name (`file "/etc/x"`, `unit "a.service"`), so
/// that an error inside it names it; `outer` is the entry holding the list (a drop-in's unit).
pub(crate) fn entry_subject(
    list: &str,
    item: &serde_json::Value,
    outer: Option<&str>,
) -> Option<String> {
    let field = |key: &str| item.get(key).and_then(serde_json::Value::as_str).map(named);
    Some(match list {
        "files" => format!("file {}", field("path")?),
        "directories" => format!("directory {}", field("path")?),
        "links" => format!("link {}", field("path")?),
        "units" => format!("unit {}", field("name")?),
        "dropins" => match outer {
            Some(unit) => format!("drop-in {} of {unit}", field("name")?),
            None => format!("drop-in {}", field("name")?),
        },
        "users" => format!("user {}", field("name")?),
        "groups" => format!("group {}", field("name")?),
        _ => return None,
    })
}

/// Whether serde's `expected` names a list or an object: a value found in its place (a unit's
/// `dropins` given as the drop-in's text, `sshAuthorizedKeys` as one key, `storage.files` as a
/// file's contents) may hold what the container would, so it is never quoted, whatever field.
fn expects_container(expected: &str) -> bool {
    expected.contains("sequence")
        || expected.contains("map")
        || expected.starts_with("struct ")
        || expected.starts_with("tuple")
}

/// `invalid type: X, expected Y` → (`invalid type`, `Y`). `Y` comes from the type being
/// decoded, never from the document, and is what follows the *last* `, expected `.
fn value_complaint(message: &str) -> Option<(&str, &str)> {
    let kind = ["invalid type", "invalid value", "invalid length"]
        .into_iter()
        .find(|k| message.starts_with(&format!("{k}: ")))?;
    let (_, expected) = message.rsplit_once(", expected ")?;
    Some((kind, expected))
}

/// A JSON value by its type and size, never its contents (`a string of 12 bytes`).
pub(crate) fn describe_value(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(_) => "a boolean".to_string(),
        Value::Number(_) => "a number".to_string(),
        Value::String(s) => format!("a string of {} bytes", s.len()),
        Value::Array(a) => format!("a list of {} items", a.len()),
        Value::Object(o) => format!("an object with {} keys", o.len()),
    }
}

/// A resource `source` named without its contents: its URL scheme and length
/// (`data: URL of 42 bytes`).
pub(crate) fn describe_source(source: &str) -> String {
    match crate::dataurl::scheme(source) {
        Some(scheme) if scheme.len() <= 16 => format!("{scheme}: URL of {} bytes", source.len()),
        _ => format!("source of {} bytes without a URL scheme", source.len()),
    }
}

/// A value quoted for an error message (Rust debug quoting), or described by its length when
/// longer than [`MAX_QUOTED`] bytes.
pub(crate) fn quoted(s: &str) -> String {
    if s.len() <= MAX_QUOTED {
        format!("{s:?}")
    } else {
        format!("a value of {} bytes", s.len())
    }
}

/// `storage.files[3].path` ([`crate::tracked::DisplayPath`]'s form) → `$.storage.files.3.path`.
fn json_path_from_serde(p: &str) -> String {
    if p == "." || p.is_empty() {
        return "$".to_string();
    }
    let mut out = String::from("$");
    for seg in p.split('.') {
        let mut rest = seg;
        if let Some(idx) = rest.find('[') {
            let (name, indices) = rest.split_at(idx);
            if !name.is_empty() {
                out.push('.');
                out.push_str(name);
            }
            rest = indices;
            for index in rest.split('[').filter(|s| !s.is_empty()) {
                out.push('.');
                out.push_str(index.trim_end_matches(']'));
            }
        } else if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
    }
    out
}

/// A path or name quoted for a message; a hostile, very long one is shortened (it is not a
/// secret, but a reason string must stay readable).
pub(crate) fn named(s: &str) -> String {
    const MAX: usize = 256;
    if s.len() <= MAX {
        return format!("{s:?}");
    }
    let mut end = MAX / 2;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &s[..end], s.len())
}

/// Text of an I/O error the way Go prints a syscall errno: the C library's message with a lower-case
/// first letter and no `(os error N)` suffix (`no such file or directory`). The agent's messages
/// follow the MCD's, and every binary's I/O errors read the same way.
pub fn go_error_text(err: &std::io::Error) -> String {
    let text = err.to_string();
    let text = match (err.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(at)) => &text[..at],
        _ => text.as_str(),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_paths_become_json_paths() {
        for (input, want) in [
            (".", "$"),
            ("storage.files[3].path", "$.storage.files.3.path"),
            ("a[0][1].b", "$.a.0.1.b"),
            ("ignition", "$.ignition"),
        ] {
            assert_eq!(json_path_from_serde(input), want, "{input}");
        }
    }

    #[test]
    fn issues_rebase_under_a_prefix() {
        let i = Issue::new("$.storage.files.0.path", "path not absolute").under("$.spec.config");
        assert_eq!(
            i.to_string(),
            "$.spec.config.storage.files.0.path: path not absolute"
        );
        let root = Issue::new("$", "x").under("$.spec.config");
        assert_eq!(root.path, "$.spec.config");
    }

    #[test]
    fn errno_text_matches_go() {
        let cases = [
            (
                std::io::Error::from_raw_os_error(2),
                "no such file or directory",
            ),
            (std::io::Error::from_raw_os_error(20), "not a directory"),
            (
                std::io::Error::from_raw_os_error(40),
                "too many levels of symbolic links",
            ),
            (std::io::Error::other("Custom thing"), "custom thing"),
        ];
        for (err, want) in cases {
            assert_eq!(go_error_text(&err), want);
        }
    }
}
