//! The [`Cluster`] fixture: the API test server, the companion (controller and config server)
//! and the nodes, each a process; what a scenario does to them (MachineConfigs, pausing the
//! pool, killing the companion, dropping watches, nodes joining or adopted) and what it waits
//! for (a rollout to complete), with the pool's availability sampled throughout.

mod rollout;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use machine_config::MachineConfigPool;
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{
    CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_CONFIG, DESIRED_DRAIN, DESIRED_IMAGE,
    LAST_APPLIED_DRAIN, REASON, STATE,
};
use machine_config::mco::paths::{
    CURRENT_CONFIG as CURRENTCONFIG_FILE, NODE_ANNOTATIONS, NODE_ANNOTATIONS_BAK, SERVED_CONTENT,
};
use serde_json::{Value, json};

use crate::Binaries;
use crate::api::{ApiServer, COMPANION_ACCOUNT, MCO_NAMESPACE};
use crate::companion::Companion;
use crate::ignition::{self, Pointer};
use crate::manifests::{self, WORKER_ROLE_LABEL};
use crate::node::{AgentWiring, Node};
use crate::os::NodeOs;
use crate::sampler::Sampler;

/// What a scenario starts with.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Nodes provisioned at start (`worker-0` …).
    pub nodes: usize,
    /// Nodes that may join later (named after them): their kubelet credentials exist from
    /// the start.
    pub spare: usize,
    pub max_unavailable: i64,
    /// Who drains the nodes: the agents, or the companion's drain controller.
    pub drain_mode: DrainMode,
    /// Whether each node has an OS: its own system bus with the rpm-ostree stand-in over its
    /// own ostree sysroot ([`crate::os`]); without, the agents cannot rebase.
    pub os: bool,
    /// More arguments for every `mco-agent start`; [`NODE_NAME`] in one is the node's name
    /// (what differs per node, such as its container runtime's socket).
    pub agent_args: Vec<String>,
    /// Replicas of the companion (leader election among them, a front before them).
    pub replicas: usize,
    /// The feature gates the cluster enables: with any, `ClusterVersion/version` and
    /// `FeatureGate/cluster` exist before the first agent starts (the agents read them once).
    pub feature_gates: Vec<String>,
}

/// `mco-agent start --drain-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainMode {
    Agent,
    Controller,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            nodes: 3,
            spare: 0,
            max_unavailable: 1,
            drain_mode: DrainMode::Agent,
            os: false,
            agent_args: Vec::new(),
            replicas: 1,
            feature_gates: Vec::new(),
        }
    }
}

/// The agents' drain timings: a blocked attempt gives up (and says why in the node's reason)
/// after 2 s instead of the MCD's 90 s.
const AGENT_DRAIN_TIMINGS: [&str; 6] = [
    "--drain-attempt-timeout",
    "2s",
    "--drain-retry",
    "500ms",
    "--drain-timeout",
    "5m",
];

/// The base MachineConfig every scenario starts from.
pub const BASE_CONFIG: &str = "00-worker-base";
/// Its file: under `/etc/nmstate/openshift/`, which the default disruption policy updates
/// without a drain or a reboot.
pub const BASE_FILE: &str = "/etc/nmstate/openshift/base.yaml";

/// The running cluster.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    bins: Binaries,
    pub api: ApiServer,
    pub client: kube::Client,
    pub companion: Companion,
    nodes: BTreeMap<String, Node>,
    spare: Vec<String>,
    sampler: Sampler,
    max_unavailable: usize,
    drain_mode: DrainMode,
    os: bool,
    agent_args: Vec<String>,
}

/// In [`Spec::agent_args`], the name of the node the agent runs on.
pub const NODE_NAME: &str = "{node}";

impl Cluster {
    /// Starts everything and provisions `spec.nodes` nodes the MCO way (first boot through
    /// Ignition, the Node registers, the agent bootstraps from the served files); returns once
    /// every node is Done on the pool's rendered config.
    pub async fn start(bins: Binaries, spec: Spec) -> Result<Cluster> {
        let dir = tempfile::Builder::new().prefix("mco-cluster-").tempdir()?;
        let names: Vec<String> = (0..spec.nodes + spec.spare)
            .map(|i| format!("worker-{i}"))
            .collect();
        let api = ApiServer::start(&bins.apiserver, &dir.path().join("api"), &names)?;
        let client = api.admin_client().await?;
        create(
            &client,
            "machineconfigpools",
            manifests::worker_pool(spec.max_unavailable),
        )
        .await?;
        create(
            &client,
            "machineconfigs",
            manifests::files_config(BASE_CONFIG, &[(BASE_FILE, "base: 1\n")]),
        )
        .await?;
        if !spec.feature_gates.is_empty() {
            crate::admin::publish_feature_gates(&client, &spec.feature_gates).await?;
        }
        let mut companion = Companion::new(
            &bins.companion,
            &dir.path().join("companion"),
            &api.companion_kubeconfig,
            &api.client_ca,
        )?
        .with_replicas(spec.replicas, &api.url)?;
        companion.start()?;
        let max_unavailable = usize::try_from(spec.max_unavailable)?;
        let sampler = Sampler::start(client.clone(), WORKER_ROLE_LABEL, max_unavailable);
        let mut cluster = Cluster {
            dir,
            bins,
            api,
            client,
            companion,
            nodes: BTreeMap::new(),
            spare: names[spec.nodes..].to_vec(),
            sampler,
            max_unavailable,
            drain_mode: spec.drain_mode,
            os: spec.os,
            agent_args: spec.agent_args,
        };
        let first = cluster.wait_rendered("", Duration::from_secs(30)).await?;
        for name in &names[..spec.nodes] {
            cluster.provision(name, None).await?;
        }
        cluster
            .wait_pool_done(&first, Duration::from_secs(60))
            .await?;
        Ok(cluster)
    }

    /// How the agents are started.
    pub(crate) fn wiring(&self, node: &str) -> AgentWiring {
        let mode = match self.drain_mode {
            DrainMode::Agent => "agent",
            DrainMode::Controller => "controller",
        };
        let mut drain_args = vec!["--drain-mode".to_string(), mode.to_string()];
        drain_args.extend(AGENT_DRAIN_TIMINGS.iter().map(|a| a.to_string()));
        drain_args.extend(self.agent_args.iter().map(|a| a.replace(NODE_NAME, node)));
        AgentWiring {
            binary: self.bins.agent.clone(),
            kubeconfig: self.api.node_kubeconfig(node),
            config_server: self.companion.url(),
            ca: self.companion.ca_file.clone(),
            drain_args,
        }
    }

    /// A node's first boot through Ignition (with `token`, its bootstrap token, if given), its
    /// Node registered by its kubelet and labelled a worker, and its agent started.
    pub async fn provision(&mut self, name: &str, token: Option<&str>) -> Result<()> {
        let mut node = self.first_boot(name, token)?;
        if self.os {
            let dir = self.dir.path().join(name).join("os");
            node.set_os(NodeOs::start(&self.bins.rpmostreed, &dir, &node.root).await?);
        }
        self.register(name).await?;
        node.start_agent(&self.wiring(name))?;
        self.nodes.insert(name.to_string(), node);
        Ok(())
    }

    /// The next spare node joins: first boot through the served files, then its Node registers
    /// (no annotation written by anyone but its agent); returns its name.
    pub async fn join_node(&mut self) -> Result<String> {
        let name = self.next_spare()?;
        self.provision(&name, None).await?;
        Ok(name)
    }

    /// The next spare node, as the MCO's machine-config-daemon leaves a node it manages: the
    /// pool's current config on disk, `currentconfig` (a full MachineConfig JSON), the
    /// bootstrap annotations moved to `node-annotation.json.bak`, and its Node annotated
    /// Done and uncordoned by the MCD; then `mco-agent start` takes it over. Returns its name.
    pub async fn adopt_mcd_node(&mut self) -> Result<String> {
        let name = self.next_spare()?;
        let mut node = self.first_boot(&name, None)?;
        let served = node
            .read(SERVED_CONTENT)
            .context("the first boot wrote no served MachineConfig")?;
        let config: Value = serde_json::from_str(&served)?;
        let current = config["metadata"]["name"]
            .as_str()
            .context("the served MachineConfig has no name")?
            .to_string();
        // the MCD's layout: currentconfig written, the bootstrap annotations file renamed
        std::fs::write(node.path(CURRENTCONFIG_FILE), serde_json::to_vec(&config)?)?;
        std::fs::rename(node.path(NODE_ANNOTATIONS), node.path(NODE_ANNOTATIONS_BAK))?;
        self.register(&name).await?;
        let uncordon = format!("uncordon-{current}");
        let annotations = json!({"metadata": {"annotations": {
            CURRENT_CONFIG: current, DESIRED_CONFIG: current, STATE: NodeState::Done.as_str(),
            DESIRED_DRAIN: uncordon, LAST_APPLIED_DRAIN: uncordon,
        }}});
        Api::<KubeNode>::all(self.api.node_client(&name).await?)
            .patch(&name, &PatchParams::default(), &Patch::Merge(annotations))
            .await
            .with_context(|| format!("annotating {name} as the MCD does"))?;
        node.start_agent(&self.wiring(&name))?;
        self.nodes.insert(name.clone(), node);
        Ok(name)
    }

    /// A node's root after its first boot through the real Ignition.
    fn first_boot(&mut self, name: &str, token: Option<&str>) -> Result<Node> {
        let node_dir = self.dir.path().join(name);
        let node = Node::new(name, &node_dir, &self.api.kubelet_client_pem(name)?)?;
        self.sampler.provisioning(name);
        let url = match token {
            Some(_) => format!("{}/config/worker?node={name}", self.companion.url()),
            None => format!("{}/config/worker", self.companion.url()),
        };
        let work = node_dir.join("ignition");
        std::fs::create_dir_all(&work)?;
        let pointer = Pointer {
            url: &url,
            ca_pem: self.companion.ca_pem(),
            token,
        };
        ignition::first_boot(&node.root, &work, &pointer)
            .with_context(|| format!("the first boot of {name}"))?;
        Ok(node)
    }

    /// The node's kubelet registers its Node; the administrator labels it a worker.
    pub async fn register(&self, name: &str) -> Result<()> {
        let kubelet = self.api.node_client(name).await?;
        let node: KubeNode = serde_json::from_value(manifests::registered_node(name))?;
        Api::<KubeNode>::all(kubelet)
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("registering node {name}"))?;
        let label = json!({"metadata": {"labels": {WORKER_ROLE_LABEL: ""}}});
        Api::<KubeNode>::all(self.client.clone())
            .patch(name, &PatchParams::default(), &Patch::Merge(label))
            .await?;
        Ok(())
    }

    /// The next spare node's name (a node that has not joined yet).
    pub fn next_spare(&mut self) -> Result<String> {
        if self.spare.is_empty() {
            bail!("no spare node left: give Spec::spare");
        }
        Ok(self.spare.remove(0))
    }

    /// The nodes, by name.
    pub fn node(&mut self, name: &str) -> &mut Node {
        self.nodes
            .get_mut(name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// A file on a node's root.
    pub fn node_read(&self, name: &str, path: &str) -> Option<String> {
        self.nodes.get(name).and_then(|n| n.read(path))
    }

    /// The directories in `path` of a node's root, sorted (none when it cannot be listed).
    pub fn node_dirs(&self, name: &str, path: &str) -> Vec<String> {
        let Some(node) = self.nodes.get(name) else {
            return Vec::new();
        };
        let mut dirs: Vec<String> = std::fs::read_dir(node.path(path))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        dirs.sort();
        dirs
    }

    /// The names of the nodes in the pool.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// Creates or replaces a MachineConfig.
    pub async fn apply_machine_config(&self, config: Value) -> Result<()> {
        let name = config["metadata"]["name"]
            .as_str()
            .context("a MachineConfig without a name")?
            .to_string();
        let api = machine_configs(&self.client);
        match api.get_opt(&name).await? {
            None => {
                create(&self.client, "machineconfigs", config).await?;
            }
            Some(_) => {
                let patch = json!({"spec": config["spec"]});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await?;
            }
        }
        Ok(())
    }

    /// A files-only change of the base config (its file's contents become `contents`); waits
    /// until the pool renders it and returns the new rendered config's name.
    pub async fn change_base_file(&self, contents: &str) -> Result<String> {
        let before = self.pool().await?.spec.configuration.name;
        self.apply_machine_config(manifests::files_config(
            BASE_CONFIG,
            &[(BASE_FILE, contents)],
        ))
        .await?;
        self.wait_rendered(&before, Duration::from_secs(30)).await
    }

    /// Kills the companion (SIGKILL).
    pub fn kill_companion(&mut self) {
        self.companion.kill();
    }

    /// Starts the companion again (on the same port).
    pub fn start_companion(&mut self) -> Result<()> {
        self.companion.start()
    }

    /// The pool's status, every node's MCO annotations, and the tail of every log.
    pub async fn diagnostics(&self) -> String {
        let mut out = String::new();
        match self.pool().await {
            Ok(pool) => out.push_str(&format!(
                "pool: spec {} paused={} status {}\n",
                pool.spec.configuration.name,
                pool.spec.paused,
                serde_json::to_string(&pool.status).unwrap_or_default()
            )),
            Err(e) => out.push_str(&format!("pool: {e:#}\n")),
        }
        for name in self.nodes.keys() {
            let a = self.annotations(name).await.unwrap_or_default();
            let get = |k: &str| a.get(k).cloned().unwrap_or_default();
            out.push_str(&format!(
                "{name}: current={} desired={} state={} reason={:?} image={:?} desiredImage={:?}\n",
                get(CURRENT_CONFIG),
                get(DESIRED_CONFIG),
                get(STATE),
                get(REASON),
                get(CURRENT_IMAGE),
                get(DESIRED_IMAGE)
            ));
        }
        out.push_str(&tail(&self.companion.logs(), 60));
        for node in self.nodes.values() {
            out.push_str(&tail(&node.logs(), 40));
        }
        out
    }

    /// Stops everything and checks the availability samples, and that the shipped RBAC
    /// refused none of the binaries' requests (a rule the manifests lack).
    pub async fn finish(mut self) -> Result<()> {
        for node in self.nodes.values_mut() {
            node.kill_agent();
        }
        self.companion.kill();
        let (samples, max_seen) = self.check_availability()?;
        eprintln!("availability: {samples} samples, at most {max_seen} node(s) unavailable");
        let companion = format!("system:serviceaccount:{MCO_NAMESPACE}:{COMPANION_ACCOUNT}");
        let refused: Vec<String> = self
            .api
            .audit()?
            .into_iter()
            .filter(|e| !e.allowed && (e.user == companion || e.user.starts_with("system:node:")))
            .map(|e| format!("{} {} {}: {}", e.user, e.permission(), e.name, e.reason))
            .collect();
        if !refused.is_empty() {
            bail!(
                "the shipped RBAC refused {} request(s) of the binaries, first: {}",
                refused.len(),
                refused[0]
            );
        }
        Ok(())
    }
}

fn machine_configs(client: &kube::Client) -> Api<machine_config::MachineConfig> {
    Api::all(client.clone())
}

/// Creates a cluster-scoped object of `plural` from JSON.
async fn create(client: &kube::Client, plural: &str, object: Value) -> Result<()> {
    match plural {
        "machineconfigs" => {
            let mc: machine_config::MachineConfig = serde_json::from_value(object)?;
            machine_configs(client)
                .create(&PostParams::default(), &mc)
                .await?;
        }
        "machineconfigpools" => {
            let pool: MachineConfigPool = serde_json::from_value(object)?;
            Api::<MachineConfigPool>::all(client.clone())
                .create(&PostParams::default(), &pool)
                .await?;
        }
        other => bail!("create: unsupported resource {other}"),
    }
    Ok(())
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    let mut out = all[start..].join("\n");
    out.push('\n');
    out
}
