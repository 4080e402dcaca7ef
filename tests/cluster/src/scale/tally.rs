//! API requests by who made them, from the API test server's audit (one event per request):
//! the companion's service account, and the kubelet identities the agents run as.

use std::collections::{BTreeMap, BTreeSet};

use mco_test_support::apiserver::AuditEvent;

use crate::api::{COMPANION_ACCOUNT, MCO_NAMESPACE};

/// Requests of one party, by `VERB RESOURCE[/SUBRESOURCE]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    pub by_kind: BTreeMap<String, usize>,
}

impl Requests {
    /// Every request but the watches: those are long-lived streams whose count follows the
    /// server's timeouts, not the work done, so they are counted apart ([`Requests::watches`]).
    pub fn total(&self) -> usize {
        self.by_kind
            .iter()
            .filter(|(kind, _)| !is_watch(kind))
            .map(|(_, count)| count)
            .sum()
    }

    /// The watches started (renewals included).
    pub fn watches(&self) -> usize {
        self.by_kind
            .iter()
            .filter(|(kind, _)| is_watch(kind))
            .map(|(_, count)| count)
            .sum()
    }
}

fn is_watch(kind: &str) -> bool {
    kind.starts_with("watch ")
}

/// The companion's and the agents' requests in a stretch of the audit.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub companion: Requests,
    /// The agents of the nodes asked about (those updated).
    pub agents: Requests,
    /// The nodes asked about whose kubelet identity made a request.
    pub agent_nodes: BTreeSet<String>,
    /// The other agents meanwhile (idle: their watches renewed).
    pub other_agents: Requests,
}

/// Tallies `events`; the agents of `nodes` apart from the others.
pub fn tally(events: &[AuditEvent], nodes: &BTreeSet<String>) -> Tally {
    let companion = format!("system:serviceaccount:{MCO_NAMESPACE}:{COMPANION_ACCOUNT}");
    let mut out = Tally::default();
    for event in events {
        let what = if event.subresource.is_empty() {
            format!("{} {}", event.verb, event.resource)
        } else {
            format!("{} {}/{}", event.verb, event.resource, event.subresource)
        };
        let party = if event.user == companion {
            &mut out.companion
        } else if let Some(node) = event.user.strip_prefix("system:node:") {
            if nodes.contains(node) {
                out.agent_nodes.insert(node.to_string());
                &mut out.agents
            } else {
                &mut out.other_agents
            }
        } else {
            continue;
        };
        *party.by_kind.entry(what).or_default() += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(user: &str, verb: &str, resource: &str, subresource: &str) -> AuditEvent {
        serde_json::from_value(json!({
            "user": user, "groups": [], "verb": verb, "apiGroup": "", "resource": resource,
            "subresource": subresource, "namespace": "", "name": "x", "nonResourcePath": "",
            "allowed": true, "authorizer": "RBAC", "reason": "", "code": 200,
        }))
        .expect("an audit event")
    }

    #[test]
    fn counts_the_companion_and_each_kubelet_and_nobody_else() {
        let companion = format!("system:serviceaccount:{MCO_NAMESPACE}:{COMPANION_ACCOUNT}");
        let events = [
            event(&companion, "list", "nodes", ""),
            event(&companion, "list", "nodes", ""),
            event(&companion, "patch", "machineconfigpools", "status"),
            event("system:node:worker-0", "patch", "nodes", ""),
            event("system:node:worker-1", "patch", "nodes", ""),
            event("system:node:worker-1", "create", "events", ""),
            event("system:node:infra-0", "watch", "nodes", ""),
            event("admin", "list", "nodes", ""),
        ];
        let updated = BTreeSet::from(["worker-0".to_string(), "worker-1".to_string()]);
        let t = tally(&events, &updated);
        assert_eq!(t.companion.total(), 3);
        assert_eq!(t.companion.by_kind["list nodes"], 2);
        assert_eq!(t.companion.by_kind["patch machineconfigpools/status"], 1);
        assert_eq!(t.agents.total(), 3);
        assert_eq!(t.agents.by_kind["patch nodes"], 2);
        assert_eq!(
            t.agent_nodes.iter().collect::<Vec<_>>(),
            ["worker-0", "worker-1"]
        );
        assert_eq!(t.other_agents.by_kind["watch nodes"], 1);
        assert_eq!(t.other_agents.total(), 0, "watches are counted apart");
        assert_eq!(t.other_agents.watches(), 1);
    }
}
