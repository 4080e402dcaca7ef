//! One sync of the node's pinned image sets (the MCD's `sync`): for each pool of the node and
//! each set it lists, the storage check and the pulls; then every image of every pool checked
//! once more with the runtime; then CRI-O's drop-in, written last (which leaves the kubelet's
//! garbage collection a window until then) and only when it changes, and the runtime reloaded.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use machine_config::mco::pinned_images::{
    CRIO_DROP_IN, CRIO_SERVICE, KUBELET_AUTH_FILE, crio_drop_in, drop_in_current, union,
};
use machine_config::pull_auth::PullSecret;
use machine_config::registries::REGISTRIES_CONF;
use machine_config::{MachineConfigPool, PinnedImageSet};
use tokio::time::Instant;

use super::Manager;
use super::pull::PullError;
use super::storage::Checker;
use crate::cluster::pinned_watch::PinnedView;
use crate::rootfs::Owner;

impl Manager {
    /// The sets of `pool` that exist, in the pool's order (a set the pool names that is gone is
    /// an error: the MCD's `failed to get PinnedImageSet`).
    fn sets_of<'v>(
        view: &'v PinnedView,
        pool: &MachineConfigPool,
    ) -> Result<Vec<&'v PinnedImageSet>, String> {
        pool.spec
            .pinned_image_sets
            .iter()
            .map(|r| {
                let set = view.set(&r.name).ok_or_else(|| {
                    format!(
                        "failed to get PinnedImageSet {:?}: pinnedimageset.machineconfiguration.openshift.io {:?} not found",
                        r.name, r.name
                    )
                })?;
                set.validate()?;
                Ok(set)
            })
            .collect()
    }

    /// The work of a sync, for the node's `pools` (primary first).
    pub(super) async fn prefetch(
        &self,
        view: &PinnedView,
        pools: &[&MachineConfigPool],
    ) -> Result<(), String> {
        let timeout = self.timings.prefetch_timeout;
        let deadline = Instant::now() + timeout;
        let timed_out = || {
            format!(
                "requeue: prefetching images incomplete after timeout: {}",
                go_duration(timeout)
            )
        };
        for pool in pools {
            let sets = Self::sets_of(view, pool)?;
            tokio::time::timeout_at(deadline, self.check_storage(view, &sets))
                .await
                .map_err(|_| timed_out())??;
            self.pull_sets(&sets).await?;
        }
        // Every image of every pool, once more: one the runtime lost since means starting over.
        let images = union(
            pools
                .iter()
                .flat_map(|p| p.spec.pinned_image_sets.iter())
                .filter_map(|r| view.set(&r.name))
                .flat_map(PinnedImageSet::images),
        );
        let recheck = async {
            for image in &images {
                if !self
                    .cri
                    .image_present(image)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    self.cache.clear();
                    return Err(format!(
                        "failed to pull image: image removed during sync: {image}"
                    ));
                }
            }
            Ok(())
        };
        tokio::time::timeout(timeout, recheck)
            .await
            .map_err(|_| timed_out())??;
        self.pin(&images).await
    }

    async fn check_storage(
        &self,
        view: &PinnedView,
        sets: &[&PinnedImageSet],
    ) -> Result<(), String> {
        let checker = Checker {
            node_name: &self.node,
            node: &view.node,
            cri: self.cri.as_ref(),
            inspector: self.inspector.as_ref(),
            cache: &self.cache,
            platform: &self.platform,
        };
        let mut seen = HashSet::new();
        for set in sets {
            tracing::info!(
                set = set.name(),
                generation = set.generation(),
                "reconciling a pinned image set"
            );
            checker.check(set, &mut seen).await?;
        }
        Ok(())
    }

    /// Pulls what the `sets` not yet complete lack, waiting for every pull (however long).
    async fn pull_sets(&self, sets: &[&PinnedImageSet]) -> Result<(), String> {
        let secret = self.pull_secret()?;
        let registries = self
            .root
            .read_to_string(Path::new(REGISTRIES_CONF))
            .map_err(|e| format!("failed to get registries: {e}"))?;
        let drain = Arc::new(AtomicBool::new(false));
        let mut pulls = Vec::new();
        let mut queued = HashSet::new();
        for set in sets {
            if self.cache.complete(set.uid(), set.generation()) {
                tracing::debug!(set = set.name(), "generation already complete");
                continue;
            }
            for image in set.images() {
                if self.cache.pulled(image) || !queued.insert(image) {
                    continue;
                }
                let auth = secret
                    .for_image(registries.as_deref(), image)
                    .map_err(|e| format!("failed to get auth config for image {image}: {e}"))?;
                pulls.push((
                    image,
                    self.puller().pull(image, auth.cloned(), drain.clone()),
                ));
            }
        }
        let total = pulls.len();
        if total > 0 {
            tracing::info!(images = total, "pulling pinned images");
        }
        let mut first_error: Option<PullError> = None;
        for (image, pull) in pulls {
            match pull.await {
                Ok(()) => self.cache.set_pulled(image),
                Err(e) => {
                    // a real failure says more than an image left because of it
                    let replace = matches!(
                        (&first_error, &e),
                        (None, _) | (Some(PullError::Drained(_)), PullError::Failed(_))
                    );
                    if replace {
                        first_error = Some(e);
                    }
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e.to_string());
        }
        for set in sets {
            self.cache.set_complete(set.uid(), set.generation());
        }
        Ok(())
    }

    fn pull_secret(&self) -> Result<PullSecret, String> {
        let path = Path::new(KUBELET_AUTH_FILE);
        match self.root.read_to_string(path) {
            Ok(Some(text)) => PullSecret::parse(&text),
            Ok(None) => Err(format!(
                "failed to read authfile: open {KUBELET_AUTH_FILE}: no such file or directory"
            )),
            Err(e) => Err(format!("failed to read authfile: {e}")),
        }
    }

    /// CRI-O's drop-in for `images`, written (or removed when there are none) only when it
    /// changes, then the runtime reloaded.
    async fn pin(&self, images: &[String]) -> Result<(), String> {
        let path = Path::new(CRIO_DROP_IN);
        let on_disk = self
            .root
            .read_to_string(path)
            .map_err(|e| format!("failed to check crio config file: {e}"))?;
        let changed = if images.is_empty() {
            match on_disk {
                None => false,
                Some(_) => {
                    self.root
                        .remove_file(path)
                        .map_err(|e| format!("failed to remove CRI-O config file: {e}"))?;
                    tracing::info!(path = CRIO_DROP_IN, "removed crio config file");
                    true
                }
            }
        } else {
            let wanted = crio_drop_in(images);
            if on_disk
                .as_deref()
                .is_some_and(|d| drop_in_current(d, &wanted))
            {
                tracing::info!("CRI-O config file is up to date, no reload required");
                false
            } else {
                self.root
                    .write_atomic(path, wanted.as_bytes(), 0o644, Owner::ROOT)
                    .map_err(|e| format!("failed to write CRIO config file: {e}"))?;
                tracing::info!(
                    path = CRIO_DROP_IN,
                    images = images.len(),
                    "pinned images written"
                );
                true
            }
        };
        if changed {
            match &self.systemd {
                Some(systemd) => systemd.reload_unit(CRIO_SERVICE).await.map_err(|e| {
                    format!(
                        "could not apply update: reloading crio configuration failed. Error: {e}"
                    )
                })?,
                None => tracing::warn!("no live systemd (a test root): crio is not reloaded"),
            }
        }
        Ok(())
    }
}

/// A duration as Go prints it (`5m0s`, `2m0s`, `30s`, `1h0m0s`), for the MCD's timeout message.
pub fn go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_secs(120)), "2m0s");
        assert_eq!(go_duration(Duration::from_secs(7)), "7s");
        assert_eq!(go_duration(Duration::from_secs(3661)), "1h1m1s");
    }
}
