//! The pinned image sets in the node's MachineConfigNode: the `PinnedImageSetsProgressing` and
//! `PinnedImageSetsDegraded` conditions and `status.pinnedImageSets`, as the MCD's pinned image
//! set manager writes them ([`machine_config::mco::pinned_images`] decides what they say).
//!
//! Unlike the MCD, these writes touch no other condition (the MCD's turn `Updated=True` into
//! "sensed disruption via a manual update" at every pinned-image sync), and a write that would
//! change nothing but the times is not made (a failing sync retried does not rewrite the
//! object each time).

use machine_config::mco::node_conditions::{
    Change, NOT_YET_OCCURRED, NOT_YET_SET, PINNED_IMAGE_SETS_DEGRADED,
    PINNED_IMAGE_SETS_PROGRESSING, merge_with,
};
use machine_config::mco::node_image_conditions::Gates;
use machine_config::mco::pinned_images::SetState;
use machine_config::mco::pinned_images::{Outcome, StatusEntry, entries, merge_conditions};
use serde_json::{Value, json};

use super::NodeApi;
use super::error::ClusterError;
use super::mcn::{WRITES, conditions, gated_spec, now, with_spec};

/// Writes `outcome` for the sets of the node's (primary) pool `pool` into its
/// MachineConfigNode, creating the object when missing. Returns whether anything was written.
pub async fn report(
    api: &dyn NodeApi,
    pool: &str,
    outcome: &Outcome,
    sets: &[SetState],
    gates: Gates,
) -> Result<bool, ClusterError> {
    let _writing = WRITES.lock().await;
    let node = api.node_name().to_string();
    let object = match api.machine_config_node().await? {
        Some(o) => o,
        None => {
            let annotations = api.annotations().await?;
            let desired = annotations
                .desired_config()
                .filter(|d| !d.is_empty())
                .unwrap_or(NOT_YET_SET)
                .to_string();
            let image = annotations.desired_image().filter(|i| !i.is_empty());
            let spec = gated_spec(&node, pool, &desired, image, gates);
            let uid = api.node_uid().await?;
            api.create_machine_config_node(&with_spec(&node, &uid, spec))
                .await?
        }
    };
    let time = now();
    let sets_now = outcome.conditions(&node);
    let before = conditions(&object);
    let merged = if before.is_empty() {
        // A new object: every condition type gets its placeholder, as the MCO fills them in.
        let first = Change {
            parent: sets_now[0].clone(),
            child: None,
        };
        let base = merge_with(&[], &first, NOT_YET_SET, &time, gates.condition_types())
            .expect("a new object always gets its conditions");
        Some(merge_conditions(&base, &sets_now[1..], &time).unwrap_or(base))
    } else {
        merge_conditions(&before, &sets_now, &time)
    };
    let want_entries = entries(sets, outcome);
    let have_entries: Option<Vec<StatusEntry>> = object
        .pointer("/status/pinnedImageSets")
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    let same_entries = have_entries.as_deref().unwrap_or_default() == want_entries.as_slice();
    if merged.is_none() && same_entries {
        return Ok(false);
    }
    let conditions = merged.unwrap_or(before);
    let list = if want_entries.is_empty() {
        Value::Null
    } else {
        json!(want_entries)
    };
    let patch = json!({"status": {"conditions": conditions, "pinnedImageSets": list}});
    api.patch_machine_config_node(&patch, true).await?;
    Ok(true)
}

/// [`report`] of a node whose pools list no set, made only when the MachineConfigNode still
/// tells of sets (an entry, or a pinned-image condition past its placeholder): a node that never
/// had any costs no write.
pub async fn report_idle(
    api: &dyn NodeApi,
    pool: &str,
    gates: Gates,
) -> Result<bool, ClusterError> {
    let Some(object) = api.machine_config_node().await? else {
        return Ok(false);
    };
    let listed = object
        .pointer("/status/pinnedImageSets")
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty());
    let told = conditions(&object).iter().any(|c| {
        (c.kind == PINNED_IMAGE_SETS_PROGRESSING || c.kind == PINNED_IMAGE_SETS_DEGRADED)
            && c.reason != NOT_YET_OCCURRED
    });
    if !listed && !told {
        return Ok(false);
    }
    report(api, pool, &Outcome::Complete, &[], gates).await
}

#[cfg(test)]
mod tests {
    use machine_config::mco::node_conditions::{
        PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING, Progress, Status, UPDATED,
    };
    use machine_config::mco::pinned_images::DEGRADED_MESSAGE;

    use super::*;
    use crate::cluster::{FakeNodeApi, mcn};

    fn condition(object: &Value, kind: &str) -> (Status, String, String) {
        let c = conditions(object)
            .into_iter()
            .find(|c| c.kind == kind)
            .unwrap_or_else(|| panic!("no {kind} in {object}"));
        (c.status, c.reason, c.message)
    }

    fn set(name: &str, generation: i64, complete: bool) -> SetState {
        SetState {
            name: name.into(),
            generation,
            complete,
        }
    }

    #[tokio::test]
    async fn a_sync_told_in_the_conditions_and_the_set_list() {
        let api = FakeNodeApi::new("worker-0");
        api.set_desired("rendered-a");
        let sets = [set("a", 2, false)];
        let g = Gates::default();
        assert!(
            report(&api, "worker", &Outcome::Started, &sets, g)
                .await
                .unwrap()
        );
        let o = api.machine_config_node_object().unwrap();
        assert_eq!(o["spec"]["pool"]["name"], "worker");
        assert_eq!(
            condition(&o, PINNED_IMAGE_SETS_PROGRESSING),
            (
                Status::True,
                "ImagePrefetch".into(),
                "node is prefetching images: worker-0".into()
            )
        );
        // every other type got its placeholder
        assert_eq!(condition(&o, UPDATED).1, "NotYetOccurred");
        assert_eq!(
            o["status"]["pinnedImageSets"],
            json!([{"name": "a", "desiredGeneration": 2}])
        );
        // the same again: nothing written
        let writes = api.machine_config_node_writes().len();
        assert!(
            !report(&api, "worker", &Outcome::Started, &sets, g)
                .await
                .unwrap()
        );
        assert_eq!(api.machine_config_node_writes().len(), writes);

        let failed = Outcome::Failed("failed to pull image".into());
        report(&api, "worker", &failed, &sets, g).await.unwrap();
        let o = api.machine_config_node_object().unwrap();
        assert_eq!(
            condition(&o, PINNED_IMAGE_SETS_DEGRADED),
            (
                Status::True,
                "PrefetchFailed".into(),
                DEGRADED_MESSAGE.into()
            )
        );
        assert_eq!(
            condition(&o, PINNED_IMAGE_SETS_PROGRESSING).0,
            Status::True,
            "still progressing"
        );
        assert_eq!(
            o["status"]["pinnedImageSets"][0]["lastFailedGenerationError"],
            "failed to pull image"
        );

        report(&api, "worker", &Outcome::Complete, &sets, g)
            .await
            .unwrap();
        let o = api.machine_config_node_object().unwrap();
        assert_eq!(
            condition(&o, PINNED_IMAGE_SETS_PROGRESSING).0,
            Status::False
        );
        assert_eq!(
            condition(&o, PINNED_IMAGE_SETS_DEGRADED),
            (Status::False, "AsExpected".into(), "All is good".into())
        );
        assert_eq!(
            o["status"]["pinnedImageSets"],
            json!([{"name": "a", "desiredGeneration": 2, "currentGeneration": 2}])
        );
    }

    #[tokio::test]
    async fn the_update_conditions_are_left_alone() {
        let api = FakeNodeApi::new("worker-0");
        api.set_desired("rendered-a");
        mcn::report(&api, "worker", &Progress::Updated)
            .await
            .unwrap();
        let updated = condition(&api.machine_config_node_object().unwrap(), UPDATED);
        assert_eq!(updated.0, Status::True);
        report(&api, "worker", &Outcome::Started, &[], Gates::default())
            .await
            .unwrap();
        let o = api.machine_config_node_object().unwrap();
        assert_eq!(condition(&o, UPDATED), updated, "Updated stays True");
        assert!(
            o["status"]
                .get("pinnedImageSets")
                .is_none_or(Value::is_null)
        );
    }
}
