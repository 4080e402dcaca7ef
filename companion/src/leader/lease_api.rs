//! The three calls the elector makes on its Lease, behind a trait so that the election can be
//! tested against a fake with a paused clock.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;

/// Why a call on the Lease failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// Someone else wrote it first (409: a stale resourceVersion, or it exists already).
    #[error("the Lease changed meanwhile")]
    Conflict,
    #[error("{0}")]
    Other(String),
}

/// Get, create and replace (at the resourceVersion read) of one Lease.
#[async_trait]
pub trait LeaseApi: Send + Sync {
    async fn get(&self) -> Result<Option<Lease>, LeaseError>;
    async fn create(&self, spec: LeaseSpec) -> Result<Lease, LeaseError>;
    /// Replaces `lease`'s spec with `spec`, at `lease`'s resourceVersion.
    async fn replace(&self, lease: Lease, spec: LeaseSpec) -> Result<Lease, LeaseError>;
    /// `namespace/name`, for messages.
    fn describe(&self) -> String;
}

/// The Lease `name` in `namespace`, through kube.
pub struct KubeLease {
    api: Api<Lease>,
    namespace: String,
    name: String,
}

impl KubeLease {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        KubeLease {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    fn error(&self, what: &str, err: kube::Error) -> LeaseError {
        match &err {
            kube::Error::Api(status) if status.code == 409 => LeaseError::Conflict,
            // the usual cause: a namespace the Role does not cover (a kubeconfig without one)
            kube::Error::Api(status) if status.code == 403 => LeaseError::Other(format!(
                "{what} Lease {}: forbidden ({}); the companion may use Leases in its own \
                 namespace only: set POD_NAMESPACE or --leader-elect-namespace to it",
                self.describe(),
                status.message
            )),
            _ => LeaseError::Other(format!("{what} Lease {}: {err}", self.describe())),
        }
    }
}

#[async_trait]
impl LeaseApi for KubeLease {
    async fn get(&self) -> Result<Option<Lease>, LeaseError> {
        self.api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.error("reading", e))
    }

    async fn create(&self, spec: LeaseSpec) -> Result<Lease, LeaseError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/part-of".to_string(),
                    "mco-agent".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        self.api
            .create(&PostParams::default(), &lease)
            .await
            .map_err(|e| self.error("creating", e))
    }

    async fn replace(&self, mut lease: Lease, spec: LeaseSpec) -> Result<Lease, LeaseError> {
        lease.spec = Some(spec);
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map_err(|e| self.error("writing", e))
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
