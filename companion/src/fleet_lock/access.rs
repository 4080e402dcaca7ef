//! Who may take which reboot slot. A FleetLock slot is a safety interlock: an anonymous client
//! that releases a control-plane node's slot lets a second one reboot (etcd loses quorum), one
//! that takes a slot and never gives it back stops a pool's updates, and every new group name
//! is one more Lease or state-file entry. So:
//!
//! - with client authentication (`--client-ca`), only a client that proved to be a node (its
//!   kubelet certificate, or its bootstrap token over TLS) is served, never the plain-HTTP
//!   listener, and only for its own id;
//! - a group must be known: a pool (and the groups given slots on the command line, and
//!   `default` standalone), at most [`MAX_GROUP_BYTES`] long;
//! - in a cluster, a proven node may lock only its own pool's group;
//! - a refusal names no other node (the holders are logged, not answered).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use machine_config::MachineConfigPool;

use crate::peer::Peer;
use crate::standalone::Standalone;

/// The longest group name served: a pool name (a DNS subdomain) fits.
pub const MAX_GROUP_BYTES: usize = 253;
/// The group a client without a pool uses (the agent's default, Zincati's too).
pub const DEFAULT_GROUP: &str = "default";

/// Why a group was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRefusal {
    /// Not a group this server knows (400).
    Unknown(String),
    /// A proven node asked for another pool's group (403).
    NotOwn(String),
    /// The pools or the node could not be read (500).
    Backend(String),
}

/// The groups clients may use.
#[async_trait]
pub trait Groups: Send + Sync {
    /// Refuses `group` when it is unknown or, for a proven `node`, when the node's pool is
    /// another one.
    async fn check(&self, group: &str, node: Option<&str>) -> Result<(), GroupRefusal>;
    fn describe(&self) -> String;
}

/// Any group (tests of the semaphores only).
pub struct AnyGroup;

#[async_trait]
impl Groups for AnyGroup {
    async fn check(&self, _: &str, _: Option<&str>) -> Result<(), GroupRefusal> {
        Ok(())
    }

    fn describe(&self) -> String {
        "any group".to_string()
    }
}

/// Standalone: the pools of the manifests directory (as it is now), the groups given slots and
/// `default`. Standalone has no Node objects, so a node's pool is not known: any known group.
pub struct StandaloneGroups {
    pub source: Arc<Standalone>,
    pub configured: BTreeSet<String>,
}

#[async_trait]
impl Groups for StandaloneGroups {
    async fn check(&self, group: &str, _node: Option<&str>) -> Result<(), GroupRefusal> {
        let known = group == DEFAULT_GROUP
            || self.configured.contains(group)
            || self.source.snapshot().pools.contains_key(group);
        if known {
            Ok(())
        } else {
            Err(GroupRefusal::Unknown(unknown(group)))
        }
    }

    fn describe(&self) -> String {
        "the manifests' pools, the groups given slots and default".to_string()
    }
}

/// Cluster mode: the MachineConfigPools (and the groups given slots); a proven node only its
/// own pool ([`crate::cluster::nodes::primary_pool`], the MCO's rules). Read from the API at
/// each request: FleetLock requests are few (a lock and an unlock per update and node, and the
/// retries of a waiting node).
pub struct PoolGroups {
    pub pools: Api<MachineConfigPool>,
    pub nodes: Api<Node>,
    pub configured: BTreeSet<String>,
}

#[async_trait]
impl Groups for PoolGroups {
    async fn check(&self, group: &str, node: Option<&str>) -> Result<(), GroupRefusal> {
        let pools = self
            .pools
            .list(&ListParams::default())
            .await
            .map_err(|e| GroupRefusal::Backend(format!("listing MachineConfigPools: {e}")))?
            .items;
        let Some(node) = node else {
            let known = self.configured.contains(group)
                || pools
                    .iter()
                    .any(|p| p.metadata.name.as_deref() == Some(group));
            return if known {
                Ok(())
            } else {
                Err(GroupRefusal::Unknown(unknown(group)))
            };
        };
        let object = self
            .nodes
            .get_opt(node)
            .await
            .map_err(|e| GroupRefusal::Backend(format!("reading Node {node}: {e}")))?
            .ok_or_else(|| GroupRefusal::NotOwn(format!("there is no Node {node:?}")))?;
        let own = crate::cluster::nodes::primary_pool(&object, &pools)
            .map_err(GroupRefusal::NotOwn)?
            .and_then(|p| p.metadata.name.clone());
        match own {
            Some(own) if own == group => Ok(()),
            Some(own) => Err(GroupRefusal::NotOwn(format!(
                "client_params.group {group:?}: node {node:?} may lock only its own pool's \
                 group, {own:?}"
            ))),
            None => Err(GroupRefusal::NotOwn(format!(
                "client_params.group {group:?}: node {node:?} belongs to no MachineConfigPool"
            ))),
        }
    }

    fn describe(&self) -> String {
        "the MachineConfigPools; a node only its own".to_string()
    }
}

fn unknown(group: &str) -> String {
    format!(
        "client_params.group {group:?} is not a pool's name (nor a group given slots with \
         --fleet-lock-group-slots)"
    )
}

/// Whether `peer` may use FleetLock at all, and as which id: `Ok(Some(node))` for a proven node
/// (which may act only for itself), `Ok(None)` for an anonymous client where nodes need not
/// prove their names, else why not.
pub fn authenticate(peer: &Peer, over_tls: bool, nodes_only: bool) -> Result<Option<&str>, String> {
    match peer {
        Peer::Node(node) | Peer::Token(node) if over_tls => Ok(Some(node)),
        _ if nodes_only && !over_tls => Err(
            "FleetLock is not served over plain HTTP when nodes must prove their names \
             (--client-ca): use the TLS listener with the node's client certificate"
                .to_string(),
        ),
        Peer::NotANode(why) if nodes_only => Err(format!(
            "FleetLock takes only nodes that prove their names: {why}"
        )),
        _ if nodes_only => Err(
            "FleetLock takes only nodes that prove their names: present \
                                the node's client certificate (CN=system:node:NAME, \
                                O=system:nodes)"
                .to_string(),
        ),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_may_use_fleet_lock() {
        let node = Peer::Node("w0".to_string());
        let token = Peer::Token("w0".to_string());
        let other = Peer::NotANode("CN admin".to_string());
        let anon = Peer::Anonymous;
        // (peer, over TLS, nodes only, Ok(id) or a part of the refusal)
        type Row<'a> = (&'a Peer, bool, bool, Result<Option<&'a str>, &'a str>);
        let rows: [Row<'_>; 10] = [
            (&node, true, true, Ok(Some("w0"))),
            (&token, true, true, Ok(Some("w0"))),
            (&node, true, false, Ok(Some("w0"))),
            (
                &anon,
                true,
                true,
                Err("present the node's client certificate"),
            ),
            (&other, true, true, Err("CN admin")),
            (&anon, false, true, Err("not served over plain HTTP")),
            (&node, false, true, Err("not served over plain HTTP")),
            (&anon, true, false, Ok(None)),
            (&anon, false, false, Ok(None)),
            (&other, true, false, Ok(None)),
        ];
        for (peer, tls, nodes_only, want) in rows {
            let got = authenticate(peer, tls, nodes_only);
            match (want, got) {
                (Ok(w), Ok(g)) => assert_eq!(w, g, "{peer:?} tls={tls} nodes_only={nodes_only}"),
                (Err(part), Err(why)) => assert!(why.contains(part), "{peer:?}: {why}"),
                (w, g) => panic!("{peer:?} tls={tls} nodes_only={nodes_only}: {g:?}, want {w:?}"),
            }
        }
    }
}
