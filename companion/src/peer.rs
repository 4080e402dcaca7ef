//! Who a client of the companion's listener is, as far as its connection proved it: the
//! config server ([`crate::server`]) serves per-node configs only to a proven node, and the
//! FleetLock server ([`crate::fleet_lock`]) lets a proven node act only for itself.

/// What the connection proved about the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// No client certificate (Ignition, curl, the plain-HTTP listener).
    Anonymous,
    /// A node's client certificate, verified against the client CA.
    Node(String),
    /// A certificate the client CA signed that names no node (why).
    NotANode(String),
    /// A node that presented its first-boot bootstrap token over TLS ([`crate::server::bootstrap`]).
    Token(String),
}
