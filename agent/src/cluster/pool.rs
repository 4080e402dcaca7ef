//! The node's MachineConfigPool, for fetching `/config/<pool>` from the config server with a
//! cluster (the MCD is told its pool by the MCO; a host-first agent works it out): the pools
//! whose `nodeSelector` selects the Node's labels, decided with the MCO's rules (a custom pool
//! wins over `worker`, `master` over both; see [`machine_config::pool::primary_pool`]). When the
//! pools cannot be listed (a kubelet's credentials may not be allowed to), the Node's
//! `node-role.kubernetes.io/<role>` labels stand for them under the same rules; a node without
//! any is in `worker`.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use machine_config::MachineConfigPool;
use machine_config::pool::primary_pool;

use super::NodeApi;

/// The prefix of the labels naming a node's roles.
pub const ROLE_LABEL_PREFIX: &str = "node-role.kubernetes.io/";
/// The pool of a node that says nothing else.
pub const DEFAULT_POOL: &str = "worker";

/// No MachineConfigPool selects the node: the MCO does not manage it (yet). The MCD's
/// MachineConfigNode names the pool `not-yet-set` then (`GetPrimaryPoolNameForMCN`); the config
/// server, which serves a pool, cannot be asked.
#[derive(Debug, thiserror::Error)]
#[error(
    "node {node} is in no MachineConfigPool: no pool's nodeSelector selects its labels ({labels}); give --pool"
)]
pub struct InNoPool {
    pub node: String,
    pub labels: String,
}

/// The node's pool and how it was found (for the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePool {
    pub name: String,
    pub how: String,
}

/// Works out the node's pool (see the module docs). Errors name the node and what is wrong: no
/// pool selects it, or it is in more than one custom pool.
pub async fn node_pool(api: &dyn NodeApi) -> Result<NodePool> {
    let node = api.node_name();
    let labels = api.labels().await?;
    match api.machine_config_pools().await {
        Ok(pools) => match primary_pool(node, &labels, &pools) {
            Ok(Some(pool)) => Ok(NodePool {
                name: pool.name().to_string(),
                how: "the MachineConfigPool selecting the node".into(),
            }),
            Ok(None) => Err(InNoPool {
                node: node.to_string(),
                labels: describe(&labels),
            }
            .into()),
            Err(e) => bail!("{e}; give --pool"),
        },
        Err(e) => {
            tracing::warn!(node, error = %e, "cannot list MachineConfigPools: the pool comes from the node's role labels");
            let roles = role_pools(&labels);
            match primary_pool(node, &labels, &roles) {
                Ok(Some(pool)) => Ok(NodePool {
                    name: pool.name().to_string(),
                    how: format!(
                        "the node's role labels (MachineConfigPools cannot be listed: {e})"
                    ),
                }),
                Ok(None) => Ok(NodePool {
                    name: DEFAULT_POOL.into(),
                    how: format!(
                        "the default: the node has no role label and MachineConfigPools cannot be listed ({e})"
                    ),
                }),
                Err(ambiguous) => bail!("{ambiguous}; give --pool"),
            }
        }
    }
}

/// One pool per role label, selecting exactly that label (what the MCO's own pools do).
fn role_pools(labels: &BTreeMap<String, String>) -> Vec<MachineConfigPool> {
    labels
        .iter()
        .filter_map(|(key, value)| {
            let role = key.strip_prefix(ROLE_LABEL_PREFIX)?;
            (!role.is_empty()).then(|| {
                let mut pool = MachineConfigPool {
                    metadata: ObjectMeta {
                        name: Some(role.to_string()),
                        ..ObjectMeta::default()
                    },
                    ..MachineConfigPool::default()
                };
                pool.spec.node_selector = Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(key.clone(), value.clone())])),
                    match_expressions: None,
                });
                pool
            })
        })
        .collect()
}

fn describe(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "none".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::FakeNodeApi;

    fn pool(name: &str, selector: &str) -> MachineConfigPool {
        MachineConfigPool::from_value(serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfigPool",
            "metadata": {"name": name},
            "spec": {"nodeSelector": {"matchLabels": {selector: ""}}},
        }))
        .unwrap()
    }

    fn pools() -> Vec<MachineConfigPool> {
        vec![
            pool("worker", "node-role.kubernetes.io/worker"),
            pool("master", "node-role.kubernetes.io/master"),
            // A custom pool selecting another label than its name.
            pool("gpu", "example.com/gpu"),
        ]
    }

    async fn pick(
        labels: &[(&str, &str)],
        listed: Result<Vec<MachineConfigPool>, String>,
    ) -> Result<NodePool> {
        let api = FakeNodeApi::new("node-0");
        api.set_labels(labels);
        api.set_pools(listed);
        node_pool(&api).await
    }

    const WORKER: (&str, &str) = ("node-role.kubernetes.io/worker", "");

    #[tokio::test]
    async fn from_the_pools_selecting_the_node() {
        let p = pick(&[WORKER], Ok(pools())).await.unwrap();
        assert_eq!(p.name, "worker");
        let p = pick(&[WORKER, ("example.com/gpu", "")], Ok(pools()))
            .await
            .unwrap();
        assert_eq!(p.name, "gpu", "a custom pool wins over worker");
        assert_eq!(p.how, "the MachineConfigPool selecting the node");
        let p = pick(
            &[WORKER, ("node-role.kubernetes.io/master", "")],
            Ok(pools()),
        )
        .await
        .unwrap();
        assert_eq!(p.name, "master");
    }

    #[tokio::test]
    async fn no_pool_or_two_custom_pools_are_errors_naming_the_node() {
        let e = pick(&[("kubernetes.io/hostname", "node-0")], Ok(pools()))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "node node-0 is in no MachineConfigPool: no pool's nodeSelector selects its labels (kubernetes.io/hostname=node-0); give --pool"
        );
        let mut two = pools();
        two.push(pool("infra", "node-role.kubernetes.io/infra"));
        let e = pick(
            &[
                WORKER,
                ("example.com/gpu", ""),
                ("node-role.kubernetes.io/infra", ""),
            ],
            Ok(two),
        )
        .await
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "node node-0 belongs to 2 custom roles, cannot proceed with this Node; give --pool"
        );
    }

    #[tokio::test]
    async fn from_the_role_labels_when_pools_cannot_be_listed() {
        let forbidden = || Err("forbidden: User \"system:node:node-0\" cannot list".to_string());
        let p = pick(
            &[WORKER, ("node-role.kubernetes.io/infra", "")],
            forbidden(),
        )
        .await
        .unwrap();
        assert_eq!(p.name, "infra");
        assert!(p.how.starts_with("the node's role labels"), "{}", p.how);
        let p = pick(
            &[WORKER, ("node-role.kubernetes.io/master", "")],
            forbidden(),
        )
        .await
        .unwrap();
        assert_eq!(p.name, "master");
        let p = pick(&[("kubernetes.io/hostname", "node-0")], forbidden())
            .await
            .unwrap();
        assert_eq!(p.name, "worker");
        assert!(p.how.starts_with("the default"), "{}", p.how);
        let e = pick(
            &[
                ("node-role.kubernetes.io/a", ""),
                ("node-role.kubernetes.io/b", ""),
            ],
            forbidden(),
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("belongs to 2 custom roles"), "{e}");
    }
}
