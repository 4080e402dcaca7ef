//! The bundle's `manifest.json`: every item (collected, absent or failed, and why), what was
//! left out of each and why, and the node's files a bundle never collects.

use serde::Serialize;

use super::redact::LeftOut;

/// The manifest's format; bumped when a field changes meaning.
pub const FORMAT: u32 = 1;

/// What became of an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// In the bundle under its name.
    Collected,
    /// Not on the node (no update in progress, no hooks, ...): nothing wrong.
    Absent,
    /// There, but it could not be read or asked (the reason says why); the rest of the bundle
    /// is complete all the same.
    Failed,
}

/// One item of the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Item {
    /// Its path in the bundle (also for an item that is not there: where it would be).
    pub name: String,
    /// Where it comes from: a file of the node, a command, a D-Bus service.
    pub source: String,
    pub state: State,
    /// Why it is absent or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its size in the bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// What was left out of it, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
}

/// A file of the node that a bundle never collects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotCollected {
    pub path: String,
    pub why: String,
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Manifest {
    pub format: u32,
    /// `mco-agent VERSION`.
    pub tool: String,
    /// When the bundle was made (Unix milliseconds).
    pub created_ms: u64,
    /// The node's root the files were read under.
    pub root: String,
    pub items: Vec<Item>,
    /// The node's secret files present on it, never collected.
    pub not_collected: Vec<NotCollected>,
}

impl Manifest {
    /// An empty manifest of a bundle made at `created_ms` from the node at `root`.
    pub fn new(root: String, created_ms: u64) -> Self {
        Manifest {
            format: FORMAT,
            tool: format!("{} {}", env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")),
            created_ms,
            root,
            items: Vec::new(),
            not_collected: Vec::new(),
        }
    }

    /// How many items are in each state, and how many things were left out (values in items
    /// and files not collected).
    pub fn counts(&self) -> Counts {
        let of = |state| self.items.iter().filter(|i| i.state == state).count();
        Counts {
            collected: of(State::Collected),
            absent: of(State::Absent),
            failed: of(State::Failed),
            left_out: self.items.iter().map(|i| i.left_out.len()).sum::<usize>()
                + self.not_collected.len(),
        }
    }

    /// One line for the person who ran `gather`: the counts, and each failed item.
    pub fn summary(&self) -> Vec<String> {
        let c = self.counts();
        let mut lines = vec![format!(
            "{} item(s) collected, {} absent, {} failed; {} secret(s) left out (listed in manifest.json)",
            c.collected, c.absent, c.failed, c.left_out
        )];
        lines.extend(
            self.items
                .iter()
                .filter(|i| i.state == State::Failed)
                .map(|i| {
                    format!(
                        "not collected: {} ({}): {}",
                        i.name,
                        i.source,
                        i.reason.as_deref().unwrap_or("no reason given")
                    )
                }),
        );
        lines
    }
}

/// The tally of [`Manifest::counts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub collected: usize,
    pub absent: usize,
    pub failed: usize,
    pub left_out: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, state: State, reason: Option<&str>, left: usize) -> Item {
        Item {
            name: name.to_string(),
            source: format!("source of {name}"),
            state,
            reason: reason.map(str::to_string),
            bytes: (state == State::Collected).then_some(10),
            left_out: (0..left)
                .map(|i| LeftOut {
                    at: format!("line {i}"),
                    why: "a private key".into(),
                })
                .collect(),
        }
    }

    #[test]
    fn counts_and_summary_say_what_is_in_and_what_is_not() {
        // (items, files not collected, counts, summary)
        let cases: Vec<(Vec<Item>, usize, Counts, Vec<&str>)> = vec![
            (
                vec![],
                0,
                Counts {
                    collected: 0,
                    absent: 0,
                    failed: 0,
                    left_out: 0,
                },
                vec![
                    "0 item(s) collected, 0 absent, 0 failed; 0 secret(s) left out (listed in manifest.json)",
                ],
            ),
            (
                vec![
                    item("status.json", State::Collected, None, 0),
                    item("node/etc/x", State::Collected, None, 2),
                    item("hooks.json", State::Absent, Some("no hooks"), 0),
                    item(
                        "rpm-ostree-status.json",
                        State::Failed,
                        Some("not running"),
                        0,
                    ),
                ],
                3,
                Counts {
                    collected: 2,
                    absent: 1,
                    failed: 1,
                    left_out: 5,
                },
                vec![
                    "2 item(s) collected, 1 absent, 1 failed; 5 secret(s) left out (listed in manifest.json)",
                    "not collected: rpm-ostree-status.json (source of rpm-ostree-status.json): not running",
                ],
            ),
        ];
        for (items, not_collected, counts, summary) in cases {
            let mut m = Manifest::new("/".into(), 1);
            m.items = items;
            m.not_collected = (0..not_collected)
                .map(|i| NotCollected {
                    path: format!("/etc/{i}"),
                    why: "a pull secret".into(),
                })
                .collect();
            assert_eq!(m.counts(), counts);
            assert_eq!(m.summary(), summary);
        }
    }

    #[test]
    fn the_json_names_state_reason_and_what_was_left_out() {
        let mut m = Manifest::new("/sysroot".into(), 5);
        m.items = vec![
            item("a", State::Collected, None, 1),
            item("b", State::Failed, Some("why"), 0),
        ];
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["format"], FORMAT);
        assert_eq!(json["root"], "/sysroot");
        assert_eq!(json["items"][0]["state"], "collected");
        assert_eq!(json["items"][0]["bytes"], 10);
        assert_eq!(json["items"][0]["left_out"][0]["why"], "a private key");
        assert_eq!(json["items"][1]["state"], "failed");
        assert_eq!(json["items"][1]["reason"], "why");
        assert!(json["items"][1].get("left_out").is_none());
        assert!(json["tool"].as_str().unwrap().starts_with("mco-agent "));
    }
}
