//! systemd preset policy (`systemd.preset(5)`) read from a root: which units `systemctl preset`
//! enables or disables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::rootfs::{FileKind, Root, RootError};

/// Preset directories, highest priority first; a file name in an earlier one masks the same name
/// in later ones.
const PRESET_DIRS: [&str; 5] = [
    "/etc/systemd/system-preset",
    "/run/systemd/system-preset",
    "/usr/local/lib/systemd/system-preset",
    "/usr/lib/systemd/system-preset",
    "/lib/systemd/system-preset",
];

/// What a preset says about a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresetAction {
    /// Enable the unit.
    Enable,
    /// Disable the unit.
    Disable,
    /// Leave the unit alone.
    Ignore,
}

/// The ordered preset rules of a root.
#[derive(Clone, Debug, Default)]
pub struct PresetPolicy {
    rules: Vec<(PresetAction, String)>,
}

impl PresetPolicy {
    /// Reads every `*.preset` file of the root in systemd's order (by file name across the
    /// preset directories).
    pub fn load(root: &Root) -> Result<Self, RootError> {
        let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
        for dir in PRESET_DIRS {
            let Some(entries) = root.read_dir(Path::new(dir))? else {
                continue;
            };
            for (name, kind) in entries {
                let name = name.to_string_lossy().into_owned();
                if kind == FileKind::Dir || !name.ends_with(".preset") {
                    continue;
                }
                files
                    .entry(name.clone())
                    .or_insert_with(|| Path::new(dir).join(name));
            }
        }
        let mut policy = PresetPolicy::default();
        for path in files.values() {
            if let Some(text) = root.read_to_string(path)? {
                policy.push_text(&text);
            }
        }
        Ok(policy)
    }

    /// Builds a policy from one preset file's text (tests and the fuzz targets read presets
    /// without a root).
    pub fn from_text(text: &str) -> Self {
        let mut p = PresetPolicy::default();
        p.push_text(text);
        p
    }

    fn push_text(&mut self, text: &str) {
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let mut words = line.split_whitespace();
            let action = match words.next() {
                Some("enable") => PresetAction::Enable,
                Some("disable") => PresetAction::Disable,
                Some("ignore") => PresetAction::Ignore,
                _ => continue,
            };
            if let Some(pattern) = words.next() {
                self.rules.push((action, pattern.to_string()));
            }
        }
    }

    /// The action for `unit`: the first matching rule, or `Enable` when none matches (systemd's
    /// default).
    pub fn action_for(&self, unit: &str) -> PresetAction {
        self.rules
            .iter()
            .find(|(_, pattern)| glob_match(pattern.as_bytes(), unit.as_bytes()))
            .map(|(action, _)| *action)
            .unwrap_or(PresetAction::Enable)
    }
}

/// Shell-style glob (`*`, `?`, `[...]` with ranges and `!`/`^` negation), as `fnmatch(3)` without flags.
///
/// Iterative, in O(pattern × text) at worst: every element but `*` matches exactly one byte, so
/// on a mismatch only the last `*` needs to take one more byte; earlier stars never have to be
/// revisited. (A recursive matcher is exponential in the number of stars: a preset line like
/// `enable *a*a*a*a*a*a*a*a*b` would hang the agent on a long unit name.)
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: the pattern after it, and the text it stops at.
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        if let Some(next) = match_one(&pattern[p..], text[t]) {
            p += next;
            t += 1;
            continue;
        }
        if pattern.get(p) == Some(&b'*') {
            p += 1;
            resume = Some((p, t));
            continue;
        }
        match resume {
            Some((after_star, star_text)) => {
                p = after_star;
                t = star_text + 1;
                resume = Some((after_star, t));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// If the pattern's first element (not `*`) matches `c`, the length of that element.
fn match_one(pattern: &[u8], c: u8) -> Option<usize> {
    match *pattern.first()? {
        b'*' => None,
        b'?' => Some(1),
        b'[' => match class_end(pattern) {
            Some(end) => class_matches(&pattern[1..end], c).then_some(end + 1),
            None => (c == b'[').then_some(1),
        },
        p => (p == c).then_some(1),
    }
}

/// Index of the `]` closing the class that starts at `pattern[0] == b'['`.
fn class_end(pattern: &[u8]) -> Option<usize> {
    let mut i = 1;
    if matches!(pattern.get(i), Some(b'!') | Some(b'^')) {
        i += 1;
    }
    // A `]` right after the opening (or the negation) is a literal member.
    if pattern.get(i) == Some(&b']') {
        i += 1;
    }
    pattern[i..].iter().position(|&b| b == b']').map(|p| p + i)
}

fn class_matches(class: &[u8], c: u8) -> bool {
    let (negated, body) = match class.first() {
        Some(b'!') | Some(b'^') => (true, &class[1..]),
        _ => (false, class),
    };
    let mut found = false;
    let mut i = 0;
    while i < body.len() {
        if i + 2 < body.len() && body[i + 1] == b'-' {
            found |= body[i] <= c && c <= body[i + 2];
            i += 3;
        } else {
            found |= body[i] == c;
            i += 1;
        }
    }
    found != negated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "a.service", true),
            ("a.service", "a.service", true),
            ("a.service", "b.service", false),
            ("getty@*.service", "getty@tty1.service", true),
            ("?.service", "ab.service", false),
            ("[ab].service", "b.service", true),
            ("[!ab].service", "b.service", false),
            ("[a-c]x.*", "bx.socket", true),
            ("[]]", "]", true),
            ("x[", "x[", true),
            ("", "", true),
            ("", "a", false),
            ("**", "", true),
            ("*?", "", false),
            ("a*", "a", true),
            ("*a*b", "xayb", true),
            ("*a*b", "xaybz", false),
            ("*.service", ".service", true),
            ("*[", "x[", true),
            ("*[ab]c", "aabac", true),
            ("a*b*c", "abcbc", true),
            ("a*b?c", "abxbc", false),
        ];
        for (pattern, text, want) in cases {
            assert_eq!(
                glob_match(pattern.as_bytes(), text.as_bytes()),
                *want,
                "{pattern} vs {text}"
            );
        }
    }

    /// Many stars against a long name that almost matches: exponential for a recursive
    /// matcher (the one this replaced did not finish in 20 s), quadratic at worst here.
    #[test]
    fn many_stars_do_not_backtrack_exponentially() {
        let pattern = "*a".repeat(30) + "*b";
        let text = "a".repeat(200);
        assert!(!glob_match(pattern.as_bytes(), text.as_bytes()));
        assert!(glob_match(pattern.as_bytes(), (text + "b").as_bytes()));
    }

    #[test]
    fn first_match_wins_and_default_is_enable() {
        let p = PresetPolicy::from_text(
            "# x\nenable a.service\ndisable *\nenable b.service\nbogus line\n",
        );
        assert_eq!(p.action_for("a.service"), PresetAction::Enable);
        assert_eq!(p.action_for("b.service"), PresetAction::Disable);
        assert_eq!(
            PresetPolicy::default().action_for("z.service"),
            PresetAction::Enable
        );
    }

    #[test]
    fn etc_masks_usr_lib_file_of_same_name_and_order_is_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let w = |p: &str, t: &str| {
            let p = dir.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        };
        w(
            "usr/lib/systemd/system-preset/90-default.preset",
            "enable a.service\ndisable *\n",
        );
        w(
            "etc/systemd/system-preset/90-default.preset",
            "disable a.service\n",
        );
        w(
            "usr/lib/systemd/system-preset/10-first.preset",
            "enable c.service\n",
        );
        w("usr/lib/systemd/system-preset/99-last.preset", "enable *\n");
        let root = Root::open(dir.path()).unwrap();
        let p = PresetPolicy::load(&root).unwrap();
        assert_eq!(p.action_for("a.service"), PresetAction::Disable);
        assert_eq!(p.action_for("c.service"), PresetAction::Enable);
        assert_eq!(p.action_for("other.service"), PresetAction::Enable);
    }
}
