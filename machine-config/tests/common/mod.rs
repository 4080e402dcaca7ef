//! Table tests of parsing rules: each case is a config and what parsing must make of it.

#![allow(dead_code)] // each test binary uses the part it needs

use machine_config::ParsedConfig;
use serde_json::Value;

/// What parsing a case must give.
pub enum Want {
    /// Parsed, with no warning.
    Accepted,
    /// Parsed, and the internal form (serialized to JSON) has `value` at the JSON pointer.
    Yields(&'static str, Value),
    /// Parsed, with exactly these warnings.
    Warns(&'static [&'static str]),
    /// Refused with exactly these issues, in order.
    Refused(&'static [&'static str]),
}

pub struct Case {
    pub name: &'static str,
    pub config: Value,
    pub want: Want,
}

pub fn case(name: &'static str, config: Value, want: Want) -> Case {
    Case { name, config, want }
}

/// Runs every case and fails with every mismatch at once.
pub fn check(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in cases {
        let got = ParsedConfig::parse(c.config.to_string().as_bytes());
        let problem = match (&c.want, got) {
            (Want::Refused(want), Err(e)) => {
                let issues: Vec<String> = e.issues().iter().map(ToString::to_string).collect();
                let issues = if issues.is_empty() {
                    vec![e.to_string()]
                } else {
                    issues
                };
                (issues != *want).then(|| format!("refused with {issues:#?}, want {want:#?}"))
            }
            (_, Err(e)) => Some(format!("refused: {e}")),
            (Want::Refused(want), Ok(p)) => Some(format!(
                "accepted ({:?}), want refused with {want:#?}",
                p.config
            )),
            (want, Ok(p)) => {
                let warnings: Vec<String> = p.warnings.iter().map(ToString::to_string).collect();
                let want_warnings: &[&str] = match want {
                    Want::Warns(w) => w,
                    _ => &[],
                };
                if warnings != want_warnings {
                    Some(format!("warnings {warnings:#?}, want {want_warnings:#?}"))
                } else if let Want::Yields(pointer, value) = want {
                    let json = serde_json::to_value(&p.config).unwrap();
                    let found = json.pointer(pointer);
                    (found != Some(value)).then(|| format!("{pointer} is {found:?}, want {value}"))
                } else {
                    None
                }
            }
        };
        if let Some(p) = problem {
            failures.push(format!("{}: {p}", c.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
