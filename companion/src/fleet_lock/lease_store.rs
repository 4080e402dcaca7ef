//! Cluster mode: each group's semaphore is a `coordination.k8s.io` Lease in the companion's
//! namespace, so that every replica of the companion sees the same holders. The holders are an
//! annotation of the Lease (JSON list of ids, [`HOLDERS_ANNOTATION`]), also shown, comma
//! separated, as its `holderIdentity` for `kubectl get lease`. Every change is a create or a
//! replace at the resourceVersion that was read: when two replicas change a group at once the
//! API server refuses one (409), which reads again and retries. The last holder's unlock deletes
//! the Lease (also at the version read): empty groups leave nothing behind.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, PostParams, Preconditions};

use super::semaphore;
use super::{LockError, LockStore};

/// The ids holding the group's slots (JSON list).
pub const HOLDERS_ANNOTATION: &str = "mco.io/fleet-lock-holders";
/// The group, as the clients spell it (a Lease name is lowercase).
pub const GROUP_ANNOTATION: &str = "mco.io/fleet-lock-group";
/// How often a change that lost a race is tried again before the client is told to retry.
const ATTEMPTS: usize = 5;

/// Semaphores kept in Leases.
pub struct LeaseStore {
    api: Api<Lease>,
    namespace: String,
}

impl LeaseStore {
    /// Leases in `namespace` (the companion's own).
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        LeaseStore {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
        }
    }

    /// Applies `change` to `group`'s holders, retrying when another writer won.
    async fn change(
        &self,
        group: &str,
        change: impl Fn(&mut Vec<String>) -> Result<bool, LockError>,
    ) -> Result<(), LockError> {
        let name = lease_name(group);
        for _ in 0..ATTEMPTS {
            let found = self
                .api
                .get_opt(&name)
                .await
                .map_err(|e| LockError::Backend(format!("reading Lease {name}: {e}")))?;
            let mut holders = match &found {
                Some(lease) => holders_of(lease)
                    .map_err(|e| LockError::Backend(format!("Lease {name}: {e}")))?,
                None => Vec::new(),
            };
            if !change(&mut holders)? {
                return Ok(());
            }
            let written = match found {
                // the last holder left: delete the Lease (at the version read), so that groups
                // that come and go leave nothing behind
                Some(lease) if holders.is_empty() => {
                    let params = DeleteParams {
                        preconditions: Some(Preconditions {
                            resource_version: lease.metadata.resource_version.clone(),
                            uid: None,
                        }),
                        ..DeleteParams::default()
                    };
                    self.api.delete(&name, &params).await.map(|_| ())
                }
                Some(mut lease) => {
                    set_holders(&mut lease, group, &holders);
                    self.api
                        .replace(&name, &PostParams::default(), &lease)
                        .await
                        .map(|_| ())
                }
                None => {
                    let mut lease = Lease {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            namespace: Some(self.namespace.clone()),
                            labels: Some(BTreeMap::from([(
                                "app.kubernetes.io/part-of".to_string(),
                                "mco-agent".to_string(),
                            )])),
                            ..ObjectMeta::default()
                        },
                        spec: Some(LeaseSpec::default()),
                    };
                    set_holders(&mut lease, group, &holders);
                    self.api
                        .create(&PostParams::default(), &lease)
                        .await
                        .map(|_| ())
                }
            };
            match written {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    tracing::debug!(
                        lease = name,
                        "FleetLock Lease changed meanwhile: reading it again"
                    );
                }
                Err(e) => {
                    return Err(LockError::Backend(format!("writing Lease {name}: {e}")));
                }
            }
        }
        Err(LockError::Busy(format!(
            "Lease {name} kept changing under {ATTEMPTS} attempts; try again"
        )))
    }
}

#[async_trait]
impl LockStore for LeaseStore {
    async fn lock(&self, group: &str, id: &str, slots: u32) -> Result<(), LockError> {
        self.change(group, |holders| {
            semaphore::lock(holders, id, slots).map_err(LockError::Full)
        })
        .await
    }

    async fn unlock(&self, group: &str, id: &str) -> Result<(), LockError> {
        self.change(group, |holders| Ok(semaphore::unlock(holders, id)))
            .await
    }

    fn describe(&self) -> String {
        format!("Leases in namespace {}", self.namespace)
    }
}

/// `fleet-lock-<group>` for a group that is already a lowercase DNS label; otherwise (capitals,
/// dots) `fleet-lock-<hash>`: distinct groups (`Workers`, `workers`) must not share a Lease.
pub fn lease_name(group: &str) -> String {
    let plain = !group.is_empty()
        && group.len() <= 40
        && group
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !group.ends_with('-');
    if plain {
        return format!("fleet-lock-{group}");
    }
    // FNV-1a: stable across releases and platforms (the name must not change on upgrade)
    let hash = group.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("fleet-lock-{hash:016x}")
}

fn holders_of(lease: &Lease) -> Result<Vec<String>, String> {
    match lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HOLDERS_ANNOTATION))
    {
        Some(json) => serde_json::from_str(json)
            .map_err(|e| format!("annotation {HOLDERS_ANNOTATION} is not a list of ids: {e}")),
        None => Ok(Vec::new()),
    }
}

fn set_holders(lease: &mut Lease, group: &str, holders: &[String]) {
    let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(
        HOLDERS_ANNOTATION.to_string(),
        serde_json::to_string(holders).unwrap_or_else(|_| "[]".to_string()),
    );
    annotations.insert(GROUP_ANNOTATION.to_string(), group.to_string());
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = (!holders.is_empty()).then(|| holders.join(","));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_valid_and_distinct() {
        for group in [
            "workers",
            "default",
            "Workers",
            "w.1",
            "a-",
            "x".repeat(60).as_str(),
        ] {
            let name = lease_name(group);
            assert!(
                name.len() <= 63 && name.starts_with("fleet-lock-"),
                "{name}"
            );
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{name}"
            );
        }
        assert_eq!(lease_name("workers"), "fleet-lock-workers");
        assert_ne!(lease_name("Workers"), lease_name("workers"));
        assert_ne!(lease_name("w.1"), lease_name("w-1"));
        assert_eq!(lease_name("Workers"), lease_name("Workers"));
    }
}
