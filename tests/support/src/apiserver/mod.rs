//! A Kubernetes API test server: in memory, HTTPS (or HTTP) on a local address, with the
//! semantics the agent, the companion and kubectl rely on, checked against the real `kubectl`.
//!
//! In-process: [`TestApiServer::start`] runs the server on its own thread and runtime (so tests
//! of any runtime flavour, and blocking `kubectl` calls, can use it) and hands out kubeconfigs
//! per identity and handles to seed, inspect and break it. As a binary: `mco-test-apiserver`.
//!
//! # What is modelled after kube-apiserver 1.33
//!
//! - Types: Namespaces, Nodes, Pods (with `/eviction`), Events, PodDisruptionBudgets,
//!   Secrets (`stringData` folded into `data`), DaemonSets, ReplicaSets, Deployments,
//!   Leases, Roles, ClusterRoles and their bindings, SelfSubjectAccessReviews and
//!   SelfSubjectRulesReviews, and the MCO's MachineConfigs, MachineConfigPools,
//!   MachineConfigNodes, MachineOSConfigs, MachineOSBuilds, PinnedImageSets and
//!   MachineConfigurations (openshift/api), with `/status` where the real type has it;
//!   ConfigMaps, the MCO's ControllerConfigs and the cluster's FeatureGates and
//!   ClusterVersions.
//! - Discovery, an OpenAPI v3 index (enough for kubectl to skip client-side validation),
//!   Table output with the real printer columns (`-o wide` included).
//! - CRUD, merge/JSON/strategic merge patches, watches from a resourceVersion with selectors,
//!   bookmarks and 410 Gone, pagination, optimistic concurrency (409), generation and
//!   observedGeneration, create-on-update where the type allows it, evictions against
//!   PodDisruptionBudgets (429), graceful pod termination, finalizers.
//! - Authentication: client certificates signed by the server's client CA (CN = user,
//!   O = group), bearer tokens, the anonymous user where enabled, `system:authenticated`;
//!   impersonation headers.
//! - Authorization when enabled ([`AuthorizationMode::NodeRbac`]): `system:masters`, the Node
//!   authorizer, RBAC over the stored objects with the bootstrap roles, NodeRestriction
//!   admission; 401/403 with the real Status bodies and messages; an audit of every decision.
//! - Validation the clients meet: names, labels, budgets, leases, bindings, and the
//!   MachineConfigNode and PinnedImageSet CRDs' rules; `--seed` reads YAML 1.1 as
//!   `kubectl apply` sends it.
//!
//! # What is not
//!
//! Server-side apply, schema validation (`fieldValidation` is accepted and not enforced),
//! admission other than NodeRestriction (no ValidatingAdmissionPolicies, no defaulting), RBAC
//! escalation checks and aggregated ClusterRoles, garbage collection, controllers (a budget's
//! expected pod count is the number of pods it selects; nothing fills in status), the Node
//! authorizer's graph beyond pods bound to a node and the secrets and configmaps they
//! reference, client certificates with more than one group, and every type not listed above.

mod admission;
#[cfg(test)]
mod admission_tests;
mod attributes;
mod audit;
mod authn;
mod authz;
#[cfg(test)]
mod authz_tests;
mod bootstrap;
mod catalog;
mod columns;
mod credentials;
mod disruption;
mod faults;
pub mod fixtures;
mod handler;
mod identity;
mod kubeconfig;
mod lifecycle;
pub mod manifests;
mod node_authz;
mod openapi;
mod patch;
mod protobuf;
mod rbac;
mod registry;
mod resource;
mod reviews;
mod routes;
mod secret;
mod selector;
mod server;
mod status;
mod store;
mod strategy;
mod table;
mod validation;
mod watch;
mod writes;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use attributes::Attributes;
pub use audit::{AuditEvent, read_audit_log, unused_permissions};
pub use authz::AuthorizationMode;
pub use credentials::Credential;
pub use faults::{FaultAction, Faults};
pub use identity::Identity;
pub use patch::PatchType;
pub use rbac::{Grant, PolicyRule};
pub use server::TestApiServer;
pub use status::ApiError;
pub use strategy::Target;

use store::Store;

/// How to run a server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    /// HTTPS with a generated CA, client certificates and bearer tokens (true), or plain HTTP.
    pub tls: bool,
    /// Extra names for the server certificate (besides localhost and loopback addresses).
    pub extra_names: Vec<String>,
    /// The URL written into kubeconfigs (default: the listen address, or 127.0.0.1 when it
    /// is unspecified).
    pub server_url: Option<String>,
    /// How long deleted or evicted pods on a node stay terminating (0 = gone at once).
    pub pod_termination_delay: Duration,
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// Who decides what an authenticated request may do (default: everything is allowed).
    pub authorization: AuthorizationMode,
    /// Requests without credentials are `system:anonymous` in `system:unauthenticated`
    /// (kube-apiserver's `--anonymous-auth`). None: over plain HTTP only (client-go sends no
    /// credentials there); health and version are always open.
    pub anonymous: Option<bool>,
    /// Also append every audit event to this file as JSON lines.
    pub audit_log: Option<PathBuf>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: true,
            extra_names: Vec::new(),
            server_url: None,
            pod_termination_delay: Duration::ZERO,
            bookmark_interval: Duration::from_secs(2),
            authorization: AuthorizationMode::AlwaysAllow,
            anonymous: None,
            audit_log: None,
        }
    }
}

impl ServerOptions {
    /// The defaults with Node and RBAC authorization and NodeRestriction admission.
    pub fn rbac() -> Self {
        Self {
            authorization: AuthorizationMode::NodeRbac,
            ..Self::default()
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    pub query: String,
    /// The user the request was served as ("" when it was not authenticated).
    pub user: String,
    pub status: u16,
}

const LOG_LIMIT: usize = 10_000;

pub(crate) struct ServerState {
    store: Arc<Store>,
    faults: Faults,
    authn: authn::Authenticator,
    authorization: AuthorizationMode,
    audit: audit::AuditLog,
    address: String,
    bookmark_interval: Duration,
    log: Mutex<VecDeque<RequestRecord>>,
}

impl ServerState {
    fn record(&self, record: RequestRecord) {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() >= LOG_LIMIT {
            log.pop_front();
        }
        log.push_back(record);
    }
}
