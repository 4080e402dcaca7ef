//! The scale harness's cluster (`tests/bench/scale.sh`, never part of the test run): the API
//! test server with RBAC from the shipped manifests, the companion with its controller and
//! config server, and pools of many Nodes, every one of them a real `mco-agent start` on a
//! small root of its own (no node is played by the harness: what an agent costs the API server
//! and the controller is measured, not modelled); [`fleet::Fleet`] watches them. The pieces of
//! the cluster tier are reused: [`ApiServer`], [`Companion`], [`Node`] and Ignition's first
//! boot.

pub mod firstboot;
pub mod fleet;
pub mod procstat;
pub mod roll;
pub mod tally;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::Api;
use kube::api::PostParams;
use machine_config::{MachineConfig, MachineConfigPool};
use serde_json::{Value, json};

use crate::api::{ApiServer, COMPANION_ACCOUNT, MCO_NAMESPACE};
use crate::cluster::BASE_FILE;
use crate::companion::Companion;
use crate::ignition::{self, Pointer};
use crate::manifests::{self, WORKER_ROLE_LABEL};
use crate::node::{AgentWiring, KUBELET_CLIENT_PEM, Node};
use crate::{Binaries, secs};
use fleet::{Fleet, PoolLabel};

/// One pool of the harness.
#[derive(Debug, Clone)]
pub struct PoolSpec {
    pub name: String,
    pub nodes: usize,
}

impl PoolSpec {
    /// The role label of its nodes: the MCO's `node-role.kubernetes.io/<pool>`.
    pub fn node_label(&self) -> String {
        if self.name == "worker" {
            WORKER_ROLE_LABEL.to_string()
        } else {
            format!("node-role.kubernetes.io/{}", self.name)
        }
    }

    /// Its nodes' names.
    pub fn node_names(&self) -> Vec<String> {
        (0..self.nodes)
            .map(|i| format!("{}-{i}", self.name))
            .collect()
    }

    /// Its base MachineConfig (the one a rollout changes).
    pub fn base_config(&self) -> String {
        format!("00-{}-base", self.name)
    }
}

/// What the harness starts.
#[derive(Debug, Clone)]
pub struct Spec {
    pub pools: Vec<PoolSpec>,
    /// The pools' `maxUnavailable` (`"10%"`).
    pub max_unavailable: String,
    /// The size of the file every pool's config carries, so a served config is about 1 MiB.
    pub payload_bytes: usize,
}

/// The running harness cluster.
pub struct ScaleCluster {
    pub dir: tempfile::TempDir,
    pub api: ApiServer,
    pub client: kube::Client,
    pub companion: Companion,
    pub agents: Vec<Node>,
    pub fleet: Fleet,
    pub spec: Spec,
}

impl ScaleCluster {
    /// Starts everything; returns once every node of every pool is Done on its pool's config.
    pub async fn start(bins: &Binaries, spec: Spec) -> Result<ScaleCluster> {
        let dir = tempfile::Builder::new().prefix("mco-scale-").tempdir()?;
        let nodes: Vec<String> = spec.pools.iter().flat_map(PoolSpec::node_names).collect();
        let api = ApiServer::start(&bins.apiserver, &dir.path().join("api"), &nodes)?;
        let client = api.admin_client().await?;
        for pool in &spec.pools {
            create_objects(&client, pool, &spec).await?;
        }
        let mut companion = Companion::new(
            &bins.companion,
            &dir.path().join("companion"),
            &api.companion_kubeconfig,
            &api.client_ca,
        )?;
        companion.start()?;
        let labels = spec
            .pools
            .iter()
            .map(|p| PoolLabel {
                pool: p.name.clone(),
                node_label: p.node_label(),
            })
            .collect();
        let fleet = Fleet::start(client.clone(), labels);
        let mut cluster = ScaleCluster {
            dir,
            api,
            client,
            companion,
            agents: Vec::new(),
            fleet,
            spec,
        };
        for pool in cluster.spec.pools.clone() {
            cluster.wait_rendered(&pool.name, "").await?;
            cluster.start_agents(bins, &pool).await?;
        }
        for pool in cluster.spec.pools.clone() {
            let rendered = cluster.rendered(&pool.name).await?;
            cluster
                .wait_done(&pool, &rendered, Duration::from_secs(600))
                .await?;
        }
        Ok(cluster)
    }

    /// The nodes of `pool`: each root a copy of one first boot through the real Ignition
    /// (the served config is the same for every node of a pool), its Node registered, its
    /// agent started.
    async fn start_agents(&mut self, bins: &Binaries, pool: &PoolSpec) -> Result<()> {
        let template = self.first_boot_template(&pool.name)?;
        for name in pool.node_names() {
            let dir = self.dir.path().join(&name);
            let pem = self.api.kubelet_client_pem(&name)?;
            let mut node = Node::new(&name, &dir, &pem)?;
            copy_tree(&template, &node.root)?;
            std::fs::write(node.root.join(KUBELET_CLIENT_PEM), &pem)?;
            let object = node_object(&name, &pool.node_label());
            Api::<KubeNode>::all(self.client.clone())
                .create(&PostParams::default(), &serde_json::from_value(object)?)
                .await
                .with_context(|| format!("registering node {name}"))?;
            node.start_agent(&AgentWiring {
                binary: bins.agent.clone(),
                kubeconfig: self.api.node_kubeconfig(&name),
                config_server: self.companion.url(),
                ca: self.companion.ca_file.clone(),
                drain_args: vec!["--drain-mode".to_string(), "agent".to_string()],
            })?;
            self.agents.push(node);
        }
        Ok(())
    }

    /// A root after a first boot into `pool` through Ignition, the kubelet's certificate left out.
    fn first_boot_template(&self, pool: &str) -> Result<std::path::PathBuf> {
        let dir = self.dir.path().join(format!("template-{pool}"));
        let node = Node::new(&format!("template-{pool}"), &dir, "")?;
        let work = dir.join("ignition");
        std::fs::create_dir_all(&work)?;
        let url = format!("{}/config/{pool}", self.companion.url());
        let pointer = Pointer {
            url: &url,
            ca_pem: self.companion.ca_pem(),
            token: None,
        };
        ignition::first_boot(&node.root, &work, &pointer)
            .with_context(|| format!("the first boot of a {pool} node"))?;
        std::fs::remove_file(node.root.join(KUBELET_CLIENT_PEM))?;
        Ok(node.root.clone())
    }

    /// The pool's rendered config.
    pub async fn rendered(&self, pool: &str) -> Result<String> {
        Ok(Api::<MachineConfigPool>::all(self.client.clone())
            .get(pool)
            .await?
            .spec
            .configuration
            .name)
    }

    /// Waits until `pool` renders a config other than `previous`; its name.
    pub async fn wait_rendered(&self, pool: &str, previous: &str) -> Result<String> {
        let deadline = Instant::now() + secs(60);
        loop {
            let name = self.rendered(pool).await?;
            if !name.is_empty() && name != previous {
                return Ok(name);
            }
            if Instant::now() > deadline {
                bail!("pool {pool} never rendered past {previous:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every node of `pool` is Done on `config` (as the fleet's watch sees them)
    /// and the pool's status says so.
    pub async fn wait_done(&self, pool: &PoolSpec, config: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let (done, total) = self.fleet.done_on(&pool.name, config);
            if done == pool.nodes && total == pool.nodes {
                let status = Api::<MachineConfigPool>::all(self.client.clone())
                    .get(&pool.name)
                    .await?
                    .status;
                let n = i64::try_from(pool.nodes)?;
                if status.machine_count == n
                    && status.updated_machine_count == n
                    && status.configuration.name == config
                {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "pool {} not Done on {config} in {timeout:?}: {done} of {total} nodes seen Done\n{}",
                    pool.name,
                    self.companion_log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn companion_log_tail(&self) -> String {
        let logs = self.companion.logs();
        let lines: Vec<&str> = logs.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The requests of the companion or the agents the shipped RBAC refused (a rule the
    /// manifests lack), as `USER PERMISSION NAME: REASON`.
    pub fn refused_requests(&self) -> Result<Vec<String>> {
        let companion = format!("system:serviceaccount:{MCO_NAMESPACE}:{COMPANION_ACCOUNT}");
        Ok(self
            .api
            .audit()?
            .into_iter()
            .filter(|e| !e.allowed && (e.user == companion || e.user.starts_with("system:node:")))
            .map(|e| format!("{} {} {}: {}", e.user, e.permission(), e.name, e.reason))
            .collect())
    }

    /// The process ids of the running agents of `pool`, or of every pool.
    pub fn agent_pids(&self, pool: Option<&PoolSpec>) -> Vec<u32> {
        let members: Option<HashSet<String>> = pool.map(|p| p.node_names().into_iter().collect());
        self.agents
            .iter()
            .filter(|node| members.as_ref().is_none_or(|m| m.contains(&node.name)))
            .filter_map(Node::agent_pid)
            .collect()
    }
}

/// The pool, its base MachineConfig and its payload MachineConfig.
async fn create_objects(client: &kube::Client, pool: &PoolSpec, spec: &Spec) -> Result<()> {
    let object = manifests::pool(
        &pool.name,
        &pool.node_label(),
        &pool.name,
        json!(spec.max_unavailable),
    );
    let object: MachineConfigPool = serde_json::from_value(object)?;
    Api::<MachineConfigPool>::all(client.clone())
        .create(&PostParams::default(), &object)
        .await?;
    let base =
        manifests::role_files_config(&pool.name, &pool.base_config(), &[(BASE_FILE, "base: 1\n")]);
    // incompressible, as a CA bundle or a binary would be
    let payload: Vec<u8> = (0..spec.payload_bytes).map(|_| rand::random()).collect();
    let payload = manifests::role_binary_config(
        &pool.name,
        &format!("10-{}-payload", pool.name),
        "/etc/mco-scale/payload.bin",
        &payload,
    );
    for config in [base, payload] {
        let config: MachineConfig = serde_json::from_value(config)?;
        Api::<MachineConfig>::all(client.clone())
            .create(&PostParams::default(), &config)
            .await?;
    }
    Ok(())
}

/// A Ready Node of the pool labelled `node_label`.
fn node_object(name: &str, node_label: &str) -> Value {
    let mut object = manifests::registered_node(name);
    object["metadata"]["labels"][node_label] = json!("");
    object
}

/// Copies the tree `from` into `to` (`cp -a`: modes, owners and times kept).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .context("running cp")?;
    if !status.success() {
        bail!("cp -a {} {} failed: {status}", from.display(), to.display());
    }
    Ok(())
}
