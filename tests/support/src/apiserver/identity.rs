//! Who a request comes from: a user name and groups, as the API server's authenticators
//! produce them (a client certificate's CN and O, a service account token's fixed groups), with
//! `system:authenticated` added to every authenticated user.

use std::fmt;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of requests without credentials.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// Members bypass authorization (the API server's privileged group).
pub const MASTERS: &str = "system:masters";
/// The group of kubelet identities.
pub const NODES: &str = "system:nodes";
const NODE_PREFIX: &str = "system:node:";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// A user and its groups, as authorizers see them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

impl Identity {
    /// A user in exactly these groups (plus `system:authenticated` once authenticated).
    pub fn new(user: &str, groups: &[&str]) -> Self {
        Self {
            user: user.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    /// The test server's administrator: user `admin` in `system:masters`.
    pub fn admin() -> Self {
        Self::new("admin", &[MASTERS])
    }

    /// A kubelet's identity: `system:node:NAME` in `system:nodes`.
    pub fn node(name: &str) -> Self {
        Self::new(&format!("{NODE_PREFIX}{name}"), &[NODES])
    }

    /// A service account: `system:serviceaccount:NS:NAME` in `system:serviceaccounts` and
    /// `system:serviceaccounts:NS`, as the service account token authenticator sets them.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            user: format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{namespace}"),
            ],
        }
    }

    /// A user named as the cluster names its well-known identities, with the groups those
    /// credentials carry: `admin` (system:masters), `system:node:NAME`,
    /// `system:serviceaccount:NS:NAME`; any other name has no groups.
    pub fn for_user(user: &str) -> Self {
        if user == "admin" {
            return Self::admin();
        }
        if let Some(node) = user.strip_prefix(NODE_PREFIX) {
            return Self::node(node);
        }
        if let Some((ns, name)) = user
            .strip_prefix(SERVICE_ACCOUNT_PREFIX)
            .and_then(|rest| rest.split_once(':'))
        {
            return Self::service_account(ns, name);
        }
        Self::new(user, &[])
    }

    /// Who sent a request without credentials.
    pub fn anonymous() -> Self {
        Self::new(ANONYMOUS, &[UNAUTHENTICATED])
    }

    /// The identity as the server sees it after authentication: `system:authenticated` added.
    pub fn authenticated(mut self) -> Self {
        if !self.groups.iter().any(|g| g == AUTHENTICATED) {
            self.groups.push(AUTHENTICATED.to_string());
        }
        self
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The node name of a kubelet identity: `Some(name)` for `system:node:NAME` in
    /// `system:nodes`, `Some("")` for a member of `system:nodes` with another name (a node
    /// the authorizer cannot identify), None for everyone else (the NodeIdentifier's rules).
    pub fn node_name(&self) -> Option<&str> {
        if !self.in_group(NODES) {
            return None;
        }
        Some(self.user.strip_prefix(NODE_PREFIX).unwrap_or(""))
    }

    /// The `(namespace, name)` of a service account user.
    pub fn service_account_name(&self) -> Option<(&str, &str)> {
        self.user
            .strip_prefix(SERVICE_ACCOUNT_PREFIX)
            .and_then(|rest| rest.split_once(':'))
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (groups={:?})", self.user, self.groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_users_get_their_groups() {
        assert_eq!(Identity::for_user("admin").groups, [MASTERS]);
        let node = Identity::for_user("system:node:n1");
        assert_eq!(node.groups, [NODES]);
        assert_eq!(node.node_name(), Some("n1"));
        let sa = Identity::for_user("system:serviceaccount:mco:companion");
        assert_eq!(
            sa.groups,
            ["system:serviceaccounts", "system:serviceaccounts:mco"]
        );
        assert_eq!(sa.service_account_name(), Some(("mco", "companion")));
        assert!(Identity::for_user("alice").groups.is_empty());
        let authenticated = Identity::for_user("alice").authenticated().authenticated();
        assert_eq!(authenticated.groups, [AUTHENTICATED]);
    }

    #[test]
    fn node_identity_needs_the_group() {
        assert_eq!(Identity::new("system:node:n1", &[]).node_name(), None);
        assert_eq!(Identity::new("bob", &[NODES]).node_name(), Some(""));
    }
}
