//! The MCO's pinned image set controller: each pool's `spec.pinnedImageSets` lists the
//! PinnedImageSets its `machineConfigSelector` selects, sorted by name
//! ([`machine_config::pinned_image_set::pool_set_names`]); a pool whose selector is `{}` is left
//! alone. A failed write is the pool's `PinnedImageSetsDegraded=True` condition with the MCO's
//! message; the condition is `False` otherwise. The nodes then pull the sets their pools list.

use futures::FutureExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use machine_config::pinned_image_set::{PinnedImageRef, pool_set_names};
use machine_config::pool::PoolStatus;
use machine_config::{MachineConfigPool, PinnedImageSet};
use serde_json::json;

use super::nodes::set_condition;

/// The pool condition this controller owns.
pub const DEGRADED: &str = "PinnedImageSetsDegraded";

/// Brings `pool.spec.pinnedImageSets` to what `sets` says (in the API and in `pool`). `Err` is
/// the pool condition's message. Nothing is done before the sets' cache has its first list (an
/// empty cache would empty every pool).
pub async fn sync(
    client: &Client,
    pool: &mut MachineConfigPool,
    sets: &Store<PinnedImageSet>,
) -> Result<(), String> {
    if sets.wait_until_ready().now_or_never().is_none() {
        tracing::debug!(pool = %pool.name(), "the PinnedImageSets are not listed yet");
        return Ok(());
    }
    let all: Vec<PinnedImageSet> = sets.state().iter().map(|s| (**s).clone()).collect();
    let Some(names) = pool_set_names(pool, &all) else {
        return Ok(());
    };
    let wanted: Vec<PinnedImageRef> = names
        .into_iter()
        .map(|name| PinnedImageRef { name })
        .collect();
    if wanted == pool.spec.pinned_image_sets {
        return Ok(());
    }
    let list = if wanted.is_empty() {
        serde_json::Value::Null
    } else {
        json!(wanted)
    };
    Api::<MachineConfigPool>::all(client.clone())
        .patch(
            pool.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"pinnedImageSets": list}})),
        )
        .await
        .map_err(|e| {
            format!(
                "Failed to populate pinned image sets for pool {}: {e}",
                pool.name()
            )
        })?;
    let names: Vec<&str> = wanted.iter().map(|r| r.name.as_str()).collect();
    tracing::info!(pool = %pool.name(), sets = ?names, "the pool's pinned image sets");
    pool.spec.pinned_image_sets = wanted;
    Ok(())
}

/// The pool's `PinnedImageSetsDegraded` after a [`sync`] that ended with `result`.
pub fn set_degraded(status: &mut PoolStatus, result: &Result<(), String>, now: &str) {
    let message = result.as_ref().err().cloned().unwrap_or_default();
    set_condition(
        &mut status.conditions,
        DEGRADED,
        result.is_err(),
        String::new(),
        message,
        now,
    );
}
