//! Image mode in the tier: a prebuilt OS image is prepared on every node's sysroot (a commit
//! the stand-in maps the image to), the worker pool is put in image mode the way the MCO
//! records a finished on-cluster build (a `MachineOSConfig` for the pool and a succeeded
//! `MachineOSBuild` of its rendered config, both statuses naming the image by digest), and the
//! rollout is followed to the end: every node Done in its config and in the image, each node
//! rebooted (simulated) once its agent has staged the rebase.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use machine_config::mco::annotations::{CURRENT_IMAGE, DESIRED_IMAGE};
use serde_json::{Value, json};

use crate::Cluster;

/// The MachineOSConfig that puts the worker pool in image mode.
pub const MACHINE_OS_CONFIG: &str = "worker";

fn api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("machineconfiguration.openshift.io", "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// Creates `object` of `kind`, then sets its `status` through the status subresource (as the
/// MCO's build controller records a build).
async fn create_with_status(client: &kube::Client, kind: &str, object: Value) -> Result<()> {
    let name = object["metadata"]["name"]
        .as_str()
        .context("an object without a name")?
        .to_string();
    let status = object["status"].clone();
    let api = api(client, kind);
    let object: DynamicObject = serde_json::from_value(object)?;
    api.create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {kind} {name}"))?;
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .with_context(|| format!("setting the status of {kind} {name}"))?;
    Ok(())
}

impl Cluster {
    /// Makes `image` (a reference by digest) exist on every node: a fresh commit of `version`
    /// in each node's sysroot, which its stand-in pulls for the image; the commits by node.
    pub fn prepare_image(&mut self, image: &str, version: &str) -> Result<Vec<(String, String)>> {
        let refname = format!("e2e/image-{version}");
        let mut commits = Vec::new();
        for name in self.node_names() {
            let os =
                self.node(&name).os.as_ref().with_context(|| {
                    format!("{name} has no OS: start the cluster with Spec::os")
                })?;
            commits.push((name.clone(), os.prepare_image(image, &refname, version)?));
        }
        Ok(commits)
    }

    /// Puts the worker pool in image mode on `image`: a MachineOSConfig for the pool whose
    /// current image is `image`, and a succeeded MachineOSBuild of the pool's rendered config
    /// that pushed it. Returns the rendered config.
    pub async fn set_pool_image(&self, image: &str) -> Result<String> {
        let rendered = self.pool().await?.spec.configuration.name;
        let build = format!("{MACHINE_OS_CONFIG}-{rendered}");
        let push_spec = "registry.e2e.example/ocl/worker:latest";
        create_with_status(
            &self.client,
            "MachineOSConfig",
            json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineOSConfig",
                "metadata": {"name": MACHINE_OS_CONFIG},
                "spec": {
                    "machineConfigPool": {"name": "worker"},
                    "imageBuilder": {"imageBuilderType": "Job"},
                    "renderedImagePushSecret": {"name": "push-secret"},
                    "renderedImagePushSpec": push_spec,
                },
                "status": {
                    "currentImagePullSpec": image,
                    "machineOSBuild": {"group": "machineconfiguration.openshift.io",
                        "resource": "machineosbuilds", "name": build},
                },
            }),
        )
        .await?;
        let now = "2026-01-01T00:00:00Z";
        create_with_status(
            &self.client,
            "MachineOSBuild",
            json!({
                "apiVersion": "machineconfiguration.openshift.io/v1",
                "kind": "MachineOSBuild",
                "metadata": {"name": build},
                "spec": {
                    "machineConfig": {"name": rendered},
                    "machineOSConfig": {"name": MACHINE_OS_CONFIG},
                    "renderedImagePushSpec": push_spec,
                },
                "status": {
                    "conditions": [{"type": "Succeeded", "status": "True",
                        "reason": "Ready", "message": "Build Ready", "lastTransitionTime": now}],
                    "digestedImagePushSpec": image,
                    "buildStart": now,
                    "buildEnd": now,
                },
            }),
        )
        .await?;
        Ok(rendered)
    }

    /// Waits until every node is Done in `config` with `currentImage` = `desiredImage` =
    /// `image` and the pool counts them updated, rebooting each node whose agent waits for a
    /// reboot (once per boot); how long it took.
    pub async fn wait_pool_in_image(
        &mut self,
        config: &str,
        image: &str,
        timeout: Duration,
    ) -> Result<Duration> {
        let start = Instant::now();
        loop {
            if self.pool_done(config).await? && self.all_in_image(image).await? {
                return Ok(start.elapsed());
            }
            for name in self.node_names() {
                if self.node(&name).awaits_reboot() {
                    let wiring = self.wiring(&name);
                    self.node(&name).reboot(&wiring)?;
                }
            }
            if start.elapsed() > timeout {
                bail!(
                    "the pool did not reach {config} in {image} in {timeout:?}\n{}",
                    self.diagnostics().await
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn all_in_image(&self, image: &str) -> Result<bool> {
        for name in self.node_names() {
            let a = self.annotations(&name).await?;
            let is = |key: &str| a.get(key).map(String::as_str) == Some(image);
            if !(is(CURRENT_IMAGE) && is(DESIRED_IMAGE)) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
