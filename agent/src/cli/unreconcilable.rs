//! The short version of an unreconcilable change, for people: which section of the config
//! changed and what in it (a file, a directory, a group), one line each, and kernel arguments
//! as `+arg -arg`.
//!
//! The MCD's message (`can't reconcile config A with B: configs A, B are not reconcilable: new
//! machineconfig "A" is not reconcilable against "B": ignition directories section contains
//! changes`) names the configs three times and never what changed; it stays, word for word,
//! where the MCD's users grep for it (the `reason` annotation, the journal, `-o json`). The
//! CLI's human output prints this instead.

use std::collections::BTreeMap;

use machine_config::MachineConfig;
use machine_config::ignition::Config;
use machine_config::kargs::human_change as kargs_change;
use serde_json::Value;

/// The lines saying why `old` cannot move to `new` in place, given the MCD's `reason`: a
/// heading (the section, and the rule) and then one line per item that changed in it.
pub fn lines(old: &MachineConfig, new: &MachineConfig, reason: &str) -> Vec<String> {
    let bare = bare_reason(reason);
    let (old_ign, new_ign) = match (old.ignition(), new.ignition()) {
        (Ok(o), Ok(n)) => (o, n),
        // a config that does not parse: the MCD's words say which and why
        _ => return vec![bare.to_string()],
    };
    explain(bare, old, new, &old_ign, &new_ign)
}

/// The MCD's rule text without the three prefixes that name the configs.
pub fn bare_reason(reason: &str) -> &str {
    let mut rest = reason;
    for prefix in ["can't reconcile config ", "configs ", "new machineconfig "] {
        if let Some(after) = rest.strip_prefix(prefix)
            && let Some((_, tail)) = after.split_once(": ")
        {
            rest = tail;
        }
    }
    rest
}

fn explain(
    bare: &str,
    old: &MachineConfig,
    new: &MachineConfig,
    o: &Config,
    n: &Config,
) -> Vec<String> {
    let section = |name: &str, items: Vec<String>| {
        let mut out = vec![format!("{name} cannot change on a running node")];
        out.extend(items.into_iter().map(|i| format!("  {i}")));
        out
    };
    let (os, ns) = (&o.storage, &n.storage);
    let rule = bare
        .strip_prefix("invalid passwd change(s): ")
        .unwrap_or(bare);
    match rule {
        "ignition kargs section contains changes" => {
            let (oe, ne) = (&o.kernel_arguments, &n.kernel_arguments);
            let mut items = Vec::new();
            for (what, old, new) in [
                ("shouldExist", &oe.should_exist, &ne.should_exist),
                ("shouldNotExist", &oe.should_not_exist, &ne.should_not_exist),
            ] {
                let change = kargs_change(old, new);
                if !change.is_empty() {
                    items.push(format!("{what}: {change}"));
                }
            }
            let mut out = section("Ignition kernelArguments", items);
            out.push("  (use the MachineConfig's spec.kernelArguments)".to_string());
            out
        }
        "ignition disks section contains changes" => section(
            "storage.disks",
            changed_items(&os.disks, &ns.disks, |d| value_id(d, "device")),
        ),
        "ignition filesystems section contains changes" => section(
            "storage.filesystems",
            changed_items(&os.filesystems, &ns.filesystems, |f| value_id(f, "device")),
        ),
        "ignition raid section contains changes" => section(
            "storage.raid",
            changed_items(&os.raid, &ns.raid, |r| value_id(r, "name")),
        ),
        "ignition directories section contains changes" => section(
            "storage.directories",
            changed_items(&os.directories, &ns.directories, |d| d.path.clone()),
        ),
        "ignition links section contains changes" => section(
            "storage.links",
            changed_items(&os.links, &ns.links, |l| l.path.clone()),
        ),
        "ignition Passwd Groups section contains changes" => section(
            "passwd.groups",
            changed_items(&o.passwd.groups, &n.passwd.groups, |g| g.name.clone()),
        ),
        "ignition passwd user section contains unsupported changes: non-core user" => {
            let mut out = vec!["passwd.users: only the user core can be changed".to_string()];
            out.extend(
                n.passwd
                    .users
                    .iter()
                    .filter(|u| u.name != "core")
                    .map(|u| format!("  user {}", u.name)),
            );
            out
        }
        _ if bare.contains("detected change to FIPS flag") => vec![format!(
            "fips cannot change on a running node ({} -> {})",
            old.spec.fips, new.spec.fips
        )],
        _ => match bare.strip_prefix("ignition file ") {
            Some(rest) if rest.ends_with(" includes append") => vec![format!(
                "storage.files: {} appends (append cannot be applied on a running node)",
                rest.trim_end_matches(" includes append")
            )],
            _ => vec![bare.to_string()],
        },
    }
}

/// What changed between two lists whose items are named by `id`: `added X`, `removed X`,
/// `changed X`, in the new list's order then the removed ones.
fn changed_items<T: PartialEq>(old: &[T], new: &[T], id: impl Fn(&T) -> String) -> Vec<String> {
    let olds: BTreeMap<String, &T> = old.iter().map(|t| (id(t), t)).collect();
    let news: BTreeMap<String, &T> = new.iter().map(|t| (id(t), t)).collect();
    let mut out = Vec::new();
    for t in new {
        let name = id(t);
        match olds.get(&name) {
            None => out.push(format!("added {name}")),
            Some(was) if *was != t => out.push(format!("changed {name}")),
            Some(_) => {}
        }
    }
    for t in old {
        let name = id(t);
        if !news.contains_key(&name) {
            out.push(format!("removed {name}"));
        }
    }
    if out.is_empty() && old != new {
        out.push("reordered".to_string());
    }
    out
}

/// The storage sections a `MachineConfiguration`'s `spec.irreconcilableValidationOverrides`
/// lets change, by the MCD's reason for each.
const OVERRIDABLE: [(&str, &str); 3] = [
    ("ignition disks section contains changes", "Disks"),
    (
        "ignition filesystems section contains changes",
        "FileSystems",
    ),
    ("ignition raid section contains changes", "Raid"),
];

/// The `hint:` after an unreconcilable plan of `diff` (NEW is the file `new`): what can be done.
/// The force file does not help (the agent checks reconcilability whether it is there or not),
/// and only the disks, filesystems and raid sections have an override.
pub fn hint(reason: &str, new: &str) -> String {
    let bare = bare_reason(reason);
    let mut hint = format!(
        "a running node refuses this change, even with the force file: fix or revert it in {new}"
    );
    if let Some((_, section)) = OVERRIDABLE.iter().find(|(r, _)| bare == *r) {
        hint.push_str(&format!(
            ", or allow it with {section} in spec.irreconcilableValidationOverrides.storage of the cluster's MachineConfiguration (here: --policy FILE)"
        ));
    }
    hint
}

/// A storage entry Ignition names by `key` (`device`, `name`), or its JSON when it has none.
fn value_id(value: &Value, key: &str) -> String {
    match value.get(key).and_then(Value::as_str) {
        Some(id) => id.to_string(),
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mc(name: &str, config: serde_json::Value) -> MachineConfig {
        MachineConfig::from_value(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": name},
            "spec": {"config": config},
        }))
        .unwrap()
    }

    fn ign(rest: serde_json::Value) -> serde_json::Value {
        let mut v = serde_json::json!({"ignition": {"version": "3.4.0"}});
        v.as_object_mut()
            .unwrap()
            .extend(rest.as_object().unwrap().clone());
        v
    }

    #[test]
    fn the_mcd_prefixes_are_left_out() {
        let rows = [
            (
                "can't reconcile config a with b: configs a, b are not reconcilable: new machineconfig \"a\" is not reconcilable against \"b\": ignition raid section contains changes",
                "ignition raid section contains changes",
            ),
            (
                "can't reconcile config a with b: kernelType=x is invalid",
                "kernelType=x is invalid",
            ),
            ("something else", "something else"),
        ];
        for (reason, want) in rows {
            assert_eq!(bare_reason(reason), want);
        }
    }

    /// Each rule's short version: the old and new config, then the lines.
    #[test]
    fn each_section_is_named_with_what_changed_in_it() {
        let base = ign(serde_json::json!({}));
        let rows: Vec<(serde_json::Value, serde_json::Value, &str)> = vec![
            (
                base.clone(),
                ign(serde_json::json!({"storage": {"directories": [{"path": "/var/lib/x"}]}})),
                "storage.directories cannot change on a running node\n  added /var/lib/x",
            ),
            (
                ign(
                    serde_json::json!({"storage": {"directories": [{"path": "/a"}, {"path": "/b", "mode": 493}]}}),
                ),
                ign(serde_json::json!({"storage": {"directories": [{"path": "/b", "mode": 448}]}})),
                "storage.directories cannot change on a running node\n  changed /b\n  removed /a",
            ),
            (
                base.clone(),
                ign(
                    serde_json::json!({"storage": {"links": [{"path": "/etc/l", "target": "/x"}]}}),
                ),
                "storage.links cannot change on a running node\n  added /etc/l",
            ),
            (
                base.clone(),
                ign(serde_json::json!({"storage": {"disks": [{"device": "/dev/vdb"}]}})),
                "storage.disks cannot change on a running node\n  added /dev/vdb",
            ),
            (
                base.clone(),
                ign(
                    serde_json::json!({"storage": {"filesystems": [{"device": "/dev/vdb1", "format": "xfs"}]}}),
                ),
                "storage.filesystems cannot change on a running node\n  added /dev/vdb1",
            ),
            (
                base.clone(),
                ign(
                    serde_json::json!({"storage": {"raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/a", "/dev/b"]}]}}),
                ),
                "storage.raid cannot change on a running node\n  added md0",
            ),
            (
                base.clone(),
                ign(serde_json::json!({"passwd": {"groups": [{"name": "admins"}]}})),
                "passwd.groups cannot change on a running node\n  added admins",
            ),
            (
                base.clone(),
                ign(
                    serde_json::json!({"passwd": {"users": [{"name": "bob", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]}}),
                ),
                "passwd.users: only the user core can be changed\n  user bob",
            ),
            (
                base.clone(),
                ign(
                    serde_json::json!({"kernelArguments": {"shouldExist": ["nosmt"], "shouldNotExist": ["quiet"]}}),
                ),
                "Ignition kernelArguments cannot change on a running node\n  shouldExist: +nosmt\n  shouldNotExist: +quiet\n  (use the MachineConfig's spec.kernelArguments)",
            ),
            (
                base.clone(),
                ign(
                    serde_json::json!({"storage": {"files": [{"path": "/etc/x", "append": [{"source": "data:,y"}]}]}}),
                ),
                "storage.files: /etc/x appends (append cannot be applied on a running node)",
            ),
        ];
        for (old, new, want) in rows {
            let (old, new) = (mc("old", old), mc("new", new));
            let reason = machine_config::reconcile::reconcile(&old, &new, "x86_64")
                .expect_err("unreconcilable")
                .to_string();
            assert_eq!(lines(&old, &new, &reason).join("\n"), want, "{reason}");
        }
    }

    #[test]
    fn the_hint_offers_an_override_only_where_there_is_one() {
        let prefix = "can't reconcile config a with b: configs a, b are not reconcilable: new machineconfig \"a\" is not reconcilable against \"b\": ";
        let rows = [
            ("ignition raid section contains changes", Some("Raid")),
            ("ignition disks section contains changes", Some("Disks")),
            (
                "ignition filesystems section contains changes",
                Some("FileSystems"),
            ),
            ("ignition directories section contains changes", None),
            (FIPS_REASON, None),
        ];
        for (rule, section) in rows {
            let hint = hint(&format!("{prefix}{rule}"), "new.yaml");
            assert!(
                hint.starts_with("a running node refuses this change, even with the force file: fix or revert it in new.yaml"),
                "{hint}"
            );
            match section {
                Some(s) => assert!(
                    hint.ends_with(&format!(", or allow it with {s} in spec.irreconcilableValidationOverrides.storage of the cluster's MachineConfiguration (here: --policy FILE)")),
                    "{hint}"
                ),
                None => assert!(!hint.contains("irreconcilableValidationOverrides"), "{hint}"),
            }
        }
    }

    const FIPS_REASON: &str =
        "detected change to FIPS flag; refusing to modify FIPS on a running cluster";

    #[test]
    fn a_rule_without_a_section_keeps_the_mcds_words() {
        let old = mc("old", ign(serde_json::json!({})));
        let mut new = mc("new", ign(serde_json::json!({})));
        new.spec.kernel_type = "rt".to_string();
        let reason = machine_config::reconcile::reconcile(&old, &new, "x86_64")
            .unwrap_err()
            .to_string();
        assert_eq!(lines(&old, &new, &reason), ["kernelType=rt is invalid"]);
    }
}
