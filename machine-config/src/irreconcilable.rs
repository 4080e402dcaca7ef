//! The irreconcilable differences a MachineConfigNode reports under the
//! `IrreconcilableMachineConfig` feature gate (the MCD's `irreconcilable_diff_reporter.go`):
//! once a node is in its desired config, the storage sections an update can never apply
//! (`disks`, `raid`, `filesystems`, `luks`) of that config are compared with those of the config
//! the node was installed with (`/etc/mcs-machine-config-content.json`), and each difference is
//! one `status.irreconcilableChanges[]` entry: `fieldPath` in the MCD's notation
//! (`spec.config.storage.disks[0].device`) and `diff`, the old value on a `- ` line and the new
//! one on a `+ ` line, each as JSON (a side that does not exist has no line). Objects are compared
//! key by key and lists index by index, as the MCD's JSON diff does for these sections.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ignition::Storage;

/// One `status.irreconcilableChanges[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IrreconcilableChange {
    pub field_path: String,
    pub diff: String,
}

/// The differences of the irreconcilable storage sections between `installed` (the node's
/// install-time config) and `target`, in section order (`disks`, `raid`, `filesystems`,
/// `luks`), then path order; empty when there are none.
pub fn differences(installed: &Storage, target: &Storage) -> Vec<IrreconcilableChange> {
    let sections = |s: &Storage| {
        [
            ("disks", Value::Array(s.disks.clone())),
            ("raid", Value::Array(s.raid.clone())),
            ("filesystems", Value::Array(s.filesystems.clone())),
            ("luks", Value::Array(s.luks.clone())),
        ]
    };
    let mut out = Vec::new();
    for ((name, old), (_, new)) in sections(installed).into_iter().zip(sections(target)) {
        diff(
            &format!("spec.config.storage.{name}"),
            Some(&old),
            Some(&new),
            &mut out,
        );
    }
    out
}

fn diff(path: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<IrreconcilableChange>) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                diff(&format!("{path}.{key}"), a.get(key), b.get(key), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                diff(&format!("{path}[{i}]"), a.get(i), b.get(i), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => {
            let mut lines = Vec::new();
            if let Some(a) = a {
                lines.push(format!("- {a}"));
            }
            if let Some(b) = b {
                lines.push(format!("+ {b}"));
            }
            out.push(IrreconcilableChange {
                field_path: path.to_string(),
                diff: lines.join("\n"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn storage(v: Value) -> Storage {
        serde_json::from_value(v).unwrap()
    }

    fn pairs(changes: &[IrreconcilableChange]) -> Vec<(&str, &str)> {
        changes
            .iter()
            .map(|c| (c.field_path.as_str(), c.diff.as_str()))
            .collect()
    }

    #[test]
    fn differences_of_the_storage_sections() {
        let disk_a = json!({"disks": [{"device": "/dev/sda", "wipeTable": true}]});
        type Case = (Value, Value, Vec<(&'static str, &'static str)>);
        let cases: Vec<Case> = vec![
            (disk_a.clone(), disk_a.clone(), vec![]),
            (json!({}), json!({}), vec![]),
            (
                disk_a.clone(),
                json!({"disks": [{"device": "/dev/sdb", "wipeTable": true}]}),
                vec![(
                    "spec.config.storage.disks[0].device",
                    "- \"/dev/sda\"\n+ \"/dev/sdb\"",
                )],
            ),
            (
                json!({"disks": [{"device": "/dev/sda", "wipeTable": true}],
                       "filesystems": [{"device": "/dev/sda1", "format": "ext4"}]}),
                json!({"disks": [{"device": "/dev/sdb", "wipeTable": false}],
                       "filesystems": [{"device": "/dev/sdb1", "format": "xfs"}]}),
                vec![
                    (
                        "spec.config.storage.disks[0].device",
                        "- \"/dev/sda\"\n+ \"/dev/sdb\"",
                    ),
                    ("spec.config.storage.disks[0].wipeTable", "- true\n+ false"),
                    (
                        "spec.config.storage.filesystems[0].device",
                        "- \"/dev/sda1\"\n+ \"/dev/sdb1\"",
                    ),
                    (
                        "spec.config.storage.filesystems[0].format",
                        "- \"ext4\"\n+ \"xfs\"",
                    ),
                ],
            ),
            // an entry added, a key removed
            (
                json!({"raid": [{"name": "md0", "level": "raid1"}]}),
                json!({"raid": [{"name": "md0"}, {"name": "md1", "level": "raid0"}]}),
                vec![
                    ("spec.config.storage.raid[0].level", "- \"raid1\""),
                    (
                        "spec.config.storage.raid[1]",
                        "+ {\"name\":\"md1\",\"level\":\"raid0\"}",
                    ),
                ],
            ),
            // files and directories are reconcilable: never reported
            (
                json!({"files": [{"path": "/etc/a"}], "directories": [{"path": "/etc/d"}]}),
                json!({"luks": [{"name": "root", "device": "/dev/sda4"}]}),
                vec![(
                    "spec.config.storage.luks[0]",
                    "+ {\"name\":\"root\",\"device\":\"/dev/sda4\"}",
                )],
            ),
        ];
        for (installed, target, expected) in cases {
            let got = differences(&storage(installed.clone()), &storage(target.clone()));
            assert_eq!(pairs(&got), expected, "{installed} -> {target}");
        }
    }
}
