//! The certificate writer (the MCD's `certificate_writer.go`): a task beside the update loop
//! that follows the ControllerConfig `machine-config-controller` and, whenever its
//! `resourceVersion` differs from the node's `lastSyncedControllerConfigResourceVersion` (or it
//! asks for a service-CA rotation), writes the certificates and the merged pull secret
//! ([`crate::certs`]), points rpm-ostree's pull secret at the right file, rotates the kubelet's
//! API server CA when asked, and records the annotations. No update, no drain, no reboot, no
//! `Working` state: it runs while an update drains or pulls an image.
//!
//! A failure is retried with backoff (1 s → 60 s) and handed to the update loop, which makes
//! the node Degraded with the message (naming the file) between its own steps; once a sync
//! succeeds again the loop validates the node and makes it Done, where the MCD leaves the node
//! Degraded until something else syncs it.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use machine_config::ControllerConfig;
use machine_config::controller_config::{
    self, KUBECONFIG_DATA, KUBECONFIG_DATA_KEY, MCO_NAMESPACE, SERVICE_CA_ROTATE_TRUE,
};
use machine_config::mco::annotations::{
    LAST_OBSERVED_SERVER_CA, LAST_SYNCED_CONTROLLER_CONFIG_RESOURCE_VERSION,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::backoff::Backoff;
use crate::certs::{self, registry_dirs_of, server_ca};
use crate::cluster::NodeApi;
use crate::host::systemd::Systemd;
use crate::rootfs::Root;
use crate::stop::StopFlag;

/// The unit restarted when a rotated API server CA needs it.
const KUBELET_UNIT: &str = "kubelet.service";

/// What the writer tells the update loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertNote {
    /// A sync failed: the node is Degraded with this reason.
    Failed(String),
    /// A sync succeeded after a failure.
    Recovered,
}

/// The writer's seams.
pub struct CertificateWriter {
    pub api: Arc<dyn NodeApi>,
    pub root: Root,
    /// Live systemd, for the kubelet restart; `None`: the restart is skipped and said so.
    pub systemd: Option<Arc<dyn Systemd>>,
    /// Arrange `/run/ostree/auth.json` after the merged pull secret changes (where rpm-ostree
    /// is).
    pub link_pull_secret: bool,
    pub notes: mpsc::UnboundedSender<CertNote>,
    /// Once a stop is requested no sync begins (one under way ends with the process, between
    /// its atomic file writes, as the update engine's steps do: [`crate::stop`]).
    pub stop: StopFlag,
}

/// The node's annotations the writer keeps, as last read or written.
#[derive(Debug, Default, Clone)]
struct Synced {
    resource_version: String,
    server_ca: String,
}

impl CertificateWriter {
    /// Runs until the ControllerConfig stream ends (never, on a real API server).
    pub async fn run(self) {
        let stream = self.api.controller_config();
        self.follow(stream).await;
    }

    async fn follow(self, mut stream: BoxStream<'static, Option<ControllerConfig>>) {
        let mut synced: Option<Synced> = None;
        let mut latest: Option<ControllerConfig> = None;
        let mut backoff = Backoff::new();
        let mut retry_at: Option<Instant> = None;
        let mut failing = false;
        loop {
            tokio::select! {
                next = stream.next() => {
                    let Some(next) = next else { return };
                    match next {
                        Some(cc) if cc.name() == controller_config::NAME => latest = Some(cc),
                        Some(_) => continue,
                        None => {
                            if latest.take().is_some() {
                                tracing::info!("ControllerConfig {} is gone: the certificates stay as they are until it is back", controller_config::NAME);
                            }
                            continue;
                        }
                    }
                }
                _ = sleep_until(retry_at), if retry_at.is_some() => {}
            }
            retry_at = None;
            let Some(cc) = &latest else { continue };
            if self.stop.requested() {
                tracing::debug!("stop requested: the certificate writer begins no sync");
                return;
            }
            match self.sync(cc, &mut synced).await {
                Ok(()) => {
                    backoff.reset();
                    if std::mem::take(&mut failing) {
                        let _ = self.notes.send(CertNote::Recovered);
                    }
                }
                Err(message) => {
                    tracing::error!(resource_version = cc.resource_version(), "{message}");
                    failing = true;
                    let _ = self.notes.send(CertNote::Failed(message));
                    retry_at = Some(Instant::now() + backoff.next_delay());
                }
            }
        }
    }

    /// One sync of `cc` (the MCD's `syncControllerConfigHandler`); the error is the node's
    /// Degraded reason.
    async fn sync(&self, cc: &ControllerConfig, synced: &mut Option<Synced>) -> Result<(), String> {
        let version = cc.resource_version();
        let context = |e: &dyn std::fmt::Display| {
            format!(
                "syncing ControllerConfig {} (resourceVersion {version}): {e}",
                controller_config::NAME
            )
        };
        if synced.is_none() {
            let annotations = self.api.annotations().await.map_err(|e| context(&e))?;
            *synced = Some(Synced {
                resource_version: annotations
                    .get(LAST_SYNCED_CONTROLLER_CONFIG_RESOURCE_VERSION)
                    .unwrap_or_default()
                    .to_string(),
                server_ca: annotations
                    .get(LAST_OBSERVED_SERVER_CA)
                    .unwrap_or_default()
                    .to_string(),
            });
        }
        let known = synced.clone().unwrap_or_default();
        let rotate = cc.rotates_service_ca();
        let mut rotation = server_ca::Rotation::default();
        if known.resource_version != version || rotate {
            let written = certs::write_certificates(&self.root, &cc.spec, || {
                self.registry_dirs_of_current_config()
            })
            .map_err(|e| context(&e))?;
            for path in &written.files {
                tracing::info!(file = %path.display(), "written from ControllerConfig {}", controller_config::NAME);
            }
            if self.link_pull_secret
                && let Err(e) = crate::os::arrange_pull_secret(&self.root)
            {
                tracing::error!(error = %e, "error while linking rpm-ostree pull secrets");
            }
            if rotate && known.server_ca != SERVICE_CA_ROTATE_TRUE {
                rotation = self.rotate_server_ca().await.map_err(|e| context(&e))?;
            }
        }
        let mut changes = Vec::new();
        if known.resource_version != version {
            changes.push((
                LAST_SYNCED_CONTROLLER_CONFIG_RESOURCE_VERSION,
                Some(version),
            ));
        }
        if known.server_ca != cc.service_ca_rotate() {
            changes.push((LAST_OBSERVED_SERVER_CA, Some(cc.service_ca_rotate())));
        }
        if !changes.is_empty() {
            self.api
                .set_annotations(&changes)
                .await
                .map_err(|e| context(&format!("failed to set annotations on node: {e}")))?;
            *synced = Some(Synced {
                resource_version: version.to_string(),
                server_ca: cc.service_ca_rotate().to_string(),
            });
            tracing::info!(
                "Certificate was synced from controllerconfig resourceVersion {version}"
            );
        }
        if rotation.changed {
            self.restart_kubelet(&rotation)
                .await
                .map_err(|e| context(&e))?;
        }
        Ok(())
    }

    /// The rotation of the kubelet's API server CA from the `kubeconfig-data` ConfigMap. A
    /// ConfigMap that cannot be read or lacks the bundle is only logged, as by the MCD (the
    /// operator may not have filled it yet; the next rotation brings it).
    async fn rotate_server_ca(&self) -> Result<server_ca::Rotation, String> {
        let cm = match self.api.config_map(MCO_NAMESPACE, KUBECONFIG_DATA).await {
            Ok(Some(cm)) => cm,
            Ok(None) => {
                tracing::error!(
                    "Error retrieving {KUBECONFIG_DATA}: ConfigMap {MCO_NAMESPACE}/{KUBECONFIG_DATA} not found"
                );
                return Ok(Default::default());
            }
            Err(e) => {
                tracing::error!("Error retrieving {KUBECONFIG_DATA}. {e}");
                return Ok(Default::default());
            }
        };
        let Some(bundle) = controller_config::config_map_bytes(&cm, KUBECONFIG_DATA_KEY) else {
            tracing::error!(
                "{KUBECONFIG_DATA} ConfigMap not populated yet: {KUBECONFIG_DATA_KEY} not found in {MCO_NAMESPACE}/{KUBECONFIG_DATA}"
            );
            return Ok(Default::default());
        };
        server_ca::rotate(&self.root, &bundle).map_err(|e| e.to_string())
    }

    async fn restart_kubelet(&self, rotation: &server_ca::Rotation) -> Result<(), String> {
        if !rotation.restart_kubelet {
            tracing::info!(
                added = ?rotation.added,
                "Skipping kubelet restart: only self-rotating signers were added (the kubelet takes the CA at its next start)"
            );
            return Ok(());
        }
        let Some(systemd) = &self.systemd else {
            tracing::warn!(
                "the kubelet must be restarted for the rotated API server CA, but there is no systemd to ask"
            );
            return Ok(());
        };
        tracing::info!("restarting kubelet due to server-ca rotation");
        systemd
            .restart_unit(KUBELET_UNIT)
            .await
            .map_err(|e| format!("restarting {KUBELET_UNIT} for the rotated API server CA: {e}"))
    }

    /// The `certs.d` directories the node's current MachineConfig writes into (none when it
    /// cannot be read: said in the journal).
    fn registry_dirs_of_current_config(&self) -> BTreeSet<String> {
        match crate::input::read_current(&self.root) {
            Ok(Some(current)) => registry_dirs_of(&current.ignition),
            Ok(None) => BTreeSet::new(),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "could not read the current config for the registry directories it writes");
                BTreeSet::new()
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[path = "certificates_tests.rs"]
mod tests;
