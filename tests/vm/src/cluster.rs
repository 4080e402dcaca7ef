//! Cluster-side test servers on the host that guests reach through qemu's user network: the
//! guest sees the host's loopback at 10.0.2.2, so a server listens on 127.0.0.1 and its
//! certificate and kubeconfigs name 10.0.2.2.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mco_test_support::apiserver::{ServerOptions, Target, TestApiServer, fixtures};
use serde_json::{Value, json};

use crate::vm::{HOST_FROM_GUEST, Vm};

/// The guest's hostname: the agent's node name by default.
pub const GUEST_NODE: &str = "mco-test";
const ANNOTATION: &str = "machineconfiguration.openshift.io/";

/// A Kubernetes API test server (HTTPS) for guests: kubeconfigs it writes point at
/// `https://10.0.2.2:PORT`, which its certificate covers.
pub fn api_server_for_guests() -> Result<TestApiServer> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    TestApiServer::start_with(ServerOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        extra_names: vec![HOST_FROM_GUEST.to_string()],
        server_url: Some(format!("https://{HOST_FROM_GUEST}:{port}")),
        ..ServerOptions::default()
    })
    .context("starting the Kubernetes API test server for guests")
}

/// The cluster a guest node belongs to: the API test server with the guest's Node object (no
/// annotations yet), `MachineConfiguration/cluster` and the rendered MachineConfigs the test
/// adds. The test plays the node controller (`set_desired`).
pub struct GuestCluster {
    pub api: TestApiServer,
}

impl GuestCluster {
    pub fn start() -> Result<Self> {
        let api = api_server_for_guests()?;
        api.seed(fixtures::node(GUEST_NODE))?;
        // The node disruption status the MCO's operator computes for an empty spec (the agent
        // plans with it once it is current, as the MCD does).
        let mut policies = machine_config::MachineConfiguration::from_slice(
            b"apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\n",
        )?;
        policies.metadata.generation = Some(1);
        policies.status = policies.computed_policy_status();
        api.seed(serde_json::to_value(&policies)?)?;
        Ok(GuestCluster { api })
    }

    /// Adds the rendered MachineConfig `name` with `spec` (e.g. `{"config": {...}}`).
    pub fn add_config(&self, name: &str, spec: Value) -> Result<()> {
        self.api.seed(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": name},
            "spec": spec,
        }))?;
        Ok(())
    }

    /// Points the node's `desiredConfig` at `name`, as the node controller does.
    pub fn set_desired(&self, name: &str) -> Result<()> {
        self.set_annotations(&[("desiredConfig", Some(name))])
    }

    /// Sets (or with `None` removes) the node's `machineconfiguration.openshift.io/KEY`
    /// annotations in one write, as the MCO's controllers do: e.g. `desiredConfig` with
    /// `desiredImage` when an image-mode pool rolls a node onto a built image.
    pub fn set_annotations(&self, changes: &[(&str, Option<&str>)]) -> Result<()> {
        let annotations: serde_json::Map<String, Value> = changes
            .iter()
            .map(|(key, value)| (format!("{ANNOTATION}{key}"), json!(value)))
            .collect();
        let patch = json!({"metadata": {"annotations": annotations}});
        self.api
            .patch("nodes", None, GUEST_NODE, &patch, Target::Main)?;
        Ok(())
    }

    /// The node's `machineconfiguration.openshift.io/KEY` annotation.
    pub fn annotation(&self, key: &str) -> Option<String> {
        let node = self.api.get("nodes", None, GUEST_NODE)?;
        node["metadata"]["annotations"][format!("{ANNOTATION}{key}")]
            .as_str()
            .map(str::to_string)
    }

    /// Waits until the node's `state` is `state` (and `currentConfig` is `current`, if given);
    /// returns how long that took, or fails at `timeout` with the node's annotations.
    pub fn wait_for_state(
        &self,
        state: &str,
        current: Option<&str>,
        timeout: Duration,
    ) -> Result<Duration> {
        let start = Instant::now();
        loop {
            if self.annotation("state").as_deref() == Some(state)
                && (current.is_none() || self.annotation("currentConfig").as_deref() == current)
            {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                let annotations = self
                    .api
                    .get("nodes", None, GUEST_NODE)
                    .map(|n| n["metadata"]["annotations"].to_string())
                    .unwrap_or_default();
                bail!(
                    "node {GUEST_NODE} not {state} (currentConfig {current:?}) after {timeout:?}: {annotations}"
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Gives the guest the kubelet's kubeconfig (`/var/lib/kubelet/kubeconfig`, the node's
    /// identity), which `mco-agent start` uses by default.
    pub fn install_kubeconfig(&self, vm: &mut Vm) -> Result<()> {
        self.api.write_kubeconfig(
            &vm.share().join("kubelet.kubeconfig"),
            &format!("system:node:{GUEST_NODE}"),
        )?;
        vm.run(
            "install -D -m600 /mnt/host/kubelet.kubeconfig /var/lib/kubelet/kubeconfig && \
             test \"$(hostname)\" = mco-test",
        )?;
        Ok(())
    }
}
