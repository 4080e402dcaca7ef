//! The rules the API server applies to a MachineConfiguration's `spec.nodeDisruptionPolicy`
//! (the CRD's enum, item limits and CEL rules), with the API's words, so that a policy file the
//! cluster would take is taken here and one it would refuse is refused the same way. Paths have
//! no rule in the API: any path is taken (one with a trailing slash names a directory, `/`
//! matches no file; see [`super::ClusterPolicies::file_policy`]).

use crate::error::Issue;
use crate::machineconfiguration::{
    NodeDisruptionPolicy, POLICY_ACTION_TYPES, PolicyAction, ServiceRef,
};

/// The action types a user's policy may name: the status's ([`POLICY_ACTION_TYPES`]) but the
/// last, `Special`, which is the operator's own.
pub const SPEC_ACTION_TYPES: &[&str] = match POLICY_ACTION_TYPES.split_last() {
    Some((_special, spec)) => spec,
    None => panic!("POLICY_ACTION_TYPES is empty"),
};

/// Items the API takes: files and units (each), actions of one entry.
const MAX_ENTRIES: usize = 50;
const MAX_ACTIONS: usize = 10;
/// Longest service name the API takes.
const MAX_SERVICE_NAME: usize = 255;

/// Unit types a service name may end with.
const SERVICE_TYPES: [&str; 12] = [
    "service",
    "socket",
    "device",
    "mount",
    "automount",
    "swap",
    "target",
    "path",
    "timer",
    "snapshot",
    "slice",
    "scope",
];

const BAD_SERVICE_TYPE: &str = "Invalid ${SERVICETYPE} in service name. Expected format is \
    ${NAME}${SERVICETYPE}, where ${SERVICETYPE} must be one of \".service\", \".socket\", \
    \".device\", \".mount\", \".automount\", \".swap\", \".target\", \".path\", \".timer\",\
    \".snapshot\", \".slice\" or \".scope\".";

const BAD_SERVICE_NAME: &str = "Invalid ${NAME} in service name. Expected format is \
    ${NAME}${SERVICETYPE}, where {NAME} must be atleast 1 character long and can only consist \
    of alphabets, digits, \":\", \"-\", \"_\", \".\", and \"\\\"";

/// Checks `policy` as the API server does; `at` locates it in its document.
pub(crate) fn check_spec(policy: &NodeDisruptionPolicy, at: &str) -> Vec<Issue> {
    let mut issues = Vec::new();
    too_many(
        &format!("{at}.files"),
        policy.files.len(),
        MAX_ENTRIES,
        &mut issues,
    );
    for (i, f) in policy.files.iter().enumerate() {
        check_actions(&format!("{at}.files.{i}"), &f.actions, &mut issues);
    }
    too_many(
        &format!("{at}.units"),
        policy.units.len(),
        MAX_ENTRIES,
        &mut issues,
    );
    for (i, u) in policy.units.iter().enumerate() {
        let here = format!("{at}.units.{i}");
        check_service_name(&format!("{here}.name"), &u.name, &mut issues);
        check_actions(&here, &u.actions, &mut issues);
    }
    if let Some(s) = &policy.sshkey {
        check_actions(&format!("{at}.sshkey"), &s.actions, &mut issues);
    }
    issues
}

fn too_many(at: &str, len: usize, max: usize, issues: &mut Vec<Issue>) {
    if len > max {
        issues.push(Issue::new(
            at,
            format!("Too many: {len}: must have at most {max} items"),
        ));
    }
}

fn check_actions(at: &str, actions: &[PolicyAction], issues: &mut Vec<Issue>) {
    let here = format!("{at}.actions");
    too_many(&here, actions.len(), MAX_ACTIONS, issues);
    for standalone in ["Reboot", "None"] {
        if actions.len() > 1 && actions.iter().any(|a| a.type_ == standalone) {
            issues.push(Issue::new(
                &here,
                format!(
                    "{standalone} action can only be specified standalone, as it will override \
                     any other actions"
                ),
            ));
        }
    }
    for (i, a) in actions.iter().enumerate() {
        let here = format!("{here}.{i}");
        if !SPEC_ACTION_TYPES.contains(&a.type_.as_str()) {
            let supported: Vec<String> =
                SPEC_ACTION_TYPES.iter().map(|t| format!("{t:?}")).collect();
            issues.push(Issue::new(
                format!("{here}.type"),
                format!(
                    "Unsupported value: {:?}: supported values: {}",
                    a.type_,
                    supported.join(", ")
                ),
            ));
        }
        for (field, type_, service) in [
            ("reload", "Reload", &a.reload),
            ("restart", "Restart", &a.restart),
        ] {
            match (a.type_ == type_, service) {
                (true, None) | (false, Some(_)) => issues.push(Issue::new(
                    &here,
                    format!("{field} is required when type is {type_}, and forbidden otherwise"),
                )),
                (true, Some(ServiceRef { service_name })) => {
                    check_service_name(&format!("{here}.{field}.serviceName"), service_name, issues)
                }
                (false, None) => {}
            }
        }
    }
}

/// The API's two rules for a service name, in its words: it ends with a unit type
/// (`\.(service|socket|...)$`) and starts with at least one of `[a-zA-Z0-9:._\-]` followed by
/// a `.` and one more character (`^[a-zA-Z0-9:._\\-]+\..`); at most 255 bytes.
fn check_service_name(at: &str, name: &str, issues: &mut Vec<Issue>) {
    if name.len() > MAX_SERVICE_NAME {
        issues.push(Issue::new(
            at,
            format!("Too long: may not be more than {MAX_SERVICE_NAME} bytes"),
        ));
    }
    let typed = name
        .rsplit_once('.')
        .is_some_and(|(_, suffix)| SERVICE_TYPES.contains(&suffix));
    if !typed {
        issues.push(Issue::new(at, BAD_SERVICE_TYPE));
    }
    if !name_prefix_ok(name) {
        issues.push(Issue::new(at, BAD_SERVICE_NAME));
    }
}

/// `^[a-zA-Z0-9:._\\-]+\..`: a `.` at some index `i >= 1` within the leading run of allowed
/// characters, with any character but a line feed after it.
fn name_prefix_ok(name: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || ":._\\-".contains(c);
    let chars: Vec<char> = name.chars().collect();
    let run = chars.iter().take_while(|c| allowed(**c)).count();
    (1..run).any(|i| chars[i] == '.' && chars.get(i + 1).is_some_and(|c| *c != '\n'))
}

#[cfg(test)]
mod tests {
    use super::{POLICY_ACTION_TYPES, SPEC_ACTION_TYPES, name_prefix_ok};

    /// The spec's enum is the status's without the operator's own `Special`, which comes last.
    #[test]
    fn a_users_policy_names_every_action_type_but_special() {
        assert_eq!(POLICY_ACTION_TYPES.last(), Some(&"Special"));
        assert_eq!(
            SPEC_ACTION_TYPES,
            [
                "Reboot",
                "Drain",
                "Reload",
                "Restart",
                "DaemonReload",
                "None"
            ]
        );
    }

    #[test]
    fn service_name_prefix_as_the_api_pattern_matches_it() {
        for (name, ok) in [
            ("crio.service", true),
            ("a.b", true),
            ("getty@tty1.service", false),
            ("x\\y:z-1_2.service", true),
            (".service", false),
            ("a.", false),
            ("a..", true),
            ("a.\n", false),
            ("a b.service", false),
            ("ab.c d", true),
            ("", false),
        ] {
            assert_eq!(name_prefix_ok(name), ok, "{name:?}");
        }
    }
}
