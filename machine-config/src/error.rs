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
    pub(crate) fn under(mut self, prefix: &str) -> Self {
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

/// Converts a serde error with its field path (from `serde_path_to_error`) into an [`Issue`].
pub(crate) fn serde_issue(err: serde_path_to_error::Error<serde_json::Error>) -> Issue {
    let path = json_path_from_serde(&err.path().to_string());
    Issue::new(path, err.into_inner().to_string())
}

/// `storage.files[3].path` (serde_path_to_error's form) → `$.storage.files.3.path`.
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
}
