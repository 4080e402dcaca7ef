//! The nodes' MachineConfigNodes as an administrator follows an update: the objects, and
//! `kubectl get machineconfignodes` (`-o wide` for the step columns).

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

use crate::Cluster;

/// The condition columns of `kubectl get machineconfignodes -o wide`, after the first six (the
/// MCO's printer columns, upper-cased by kubectl).
pub const WIDE_CONDITION_COLUMNS: [&str; 10] = [
    "UPDATEPREPARED",
    "UPDATEEXECUTED",
    "UPDATEPOSTACTIONCOMPLETE",
    "UPDATECOMPLETE",
    "RESUMED",
    "UPDATEDFILESANDOS",
    "CORDONEDNODE",
    "DRAINEDNODE",
    "REBOOTEDNODE",
    "UNCORDONEDNODE",
];

/// `(type, status)` of a MachineConfigNode's condition, `None` when it has none of that type.
pub fn condition_status<'a>(mcn: &'a Value, kind: &str) -> Option<&'a str> {
    mcn.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?["status"]
        .as_str()
}

impl Cluster {
    /// Runs `kubectl` as the administrator; its standard output, or an error with its stderr.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        let output = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.api.admin_kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .env("HOME", self.dir.path())
            .args(args)
            .output()
            .context("running kubectl (tests/setup.sh installs it)")?;
        if !output.status.success() {
            bail!(
                "kubectl {}: {}: {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// `node`'s MachineConfigNode, `None` while there is none.
    pub async fn machine_config_node(&self, node: &str) -> Result<Option<Value>> {
        let gvk = GroupVersionKind::gvk(
            "machineconfiguration.openshift.io",
            "v1",
            "MachineConfigNode",
        );
        let api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &ApiResource::from_gvk(&gvk));
        let found = api.get_opt(node).await?;
        Ok(found.map(serde_json::to_value).transpose()?)
    }

    /// Waits until `node`'s MachineConfigNode says it is Updated in `config`; returns it.
    pub async fn wait_machine_config_node_updated(
        &self,
        node: &str,
        config: &str,
        timeout: Duration,
    ) -> Result<Value> {
        let started = Instant::now();
        loop {
            let mcn = self.machine_config_node(node).await?;
            if let Some(mcn) = &mcn
                && condition_status(mcn, "Updated") == Some("True")
                && mcn.pointer("/status/configVersion/current") == Some(&Value::from(config))
            {
                return Ok(mcn.clone());
            }
            if started.elapsed() > timeout {
                bail!(
                    "{node}'s MachineConfigNode is not Updated in {config} after {timeout:?}: {mcn:#?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
