//! A node joining the cluster (the MCD's `loadNodeAnnotations`): a Node without a
//! `currentConfig` annotation gets the annotations its first boot wrote, so the controller
//! counts it and targets it in the next rollout without anyone writing annotations by hand.
//!
//! - First boot through the config server: `node-annotations.json` (which the server appended
//!   to the served config) holds `currentConfig`, `desiredConfig`, `firstPivotConfig` and
//!   `state: Done`; every annotation it holds is set on the Node, as the MCD does. The file is
//!   then moved aside by [`super::startup::seed_current`], as the MCD does.
//! - No such file, but the agent has recorded a current config (a node re-registered, or one
//!   whose Node lost its annotations): `currentConfig` and `desiredConfig` are that config and
//!   `state` is Done (the validation at start-up degrades the node if the disk disagrees). The
//!   MCD fails here instead (it requires the file).
//!
//! A Node that has a `currentConfig` is left as it is.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{CURRENT_CONFIG, DESIRED_CONFIG, STATE};
use machine_config::mco::paths::NODE_ANNOTATIONS;

use crate::cluster::NodeApi;
use crate::input;
use crate::rootfs::Root;

/// What start-up learns from the Node's annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Joined {
    /// The Node's `currentConfig` (`None`: the node has no config yet).
    pub current: Option<String>,
    /// The Node has `ostree-finalize-staged-failure` (cleared when there is no failure).
    pub finalize_failure_annotated: bool,
}

/// [`load_node_annotations`], with what else start-up needs from the same read.
pub async fn join(root: &Root, api: &dyn NodeApi) -> Result<Joined> {
    let annotations = api
        .annotations()
        .await
        .context("reading the Node's annotations")?;
    let finalize_failure_annotated = annotations
        .all
        .contains_key(machine_config::mco::annotations::OSTREE_FINALIZE_STAGED_FAILURE);
    let current = bootstrap(root, api, annotations).await?;
    Ok(Joined {
        current,
        finalize_failure_annotated,
    })
}

/// Bootstraps the Node's annotations when it has no `currentConfig`; returns the Node's
/// `currentConfig` afterwards (`None`: the node has no config yet).
pub async fn load_node_annotations(root: &Root, api: &dyn NodeApi) -> Result<Option<String>> {
    Ok(join(root, api).await?.current)
}

async fn bootstrap(
    root: &Root,
    api: &dyn NodeApi,
    annotations: mco_kube::NodeAnnotations,
) -> Result<Option<String>> {
    if let Some(current) = annotations.current_config() {
        return Ok(Some(current.to_string()));
    }
    if let Some(bytes) = root.read(Path::new(NODE_ANNOTATIONS))? {
        let from_file: BTreeMap<String, String> = serde_json::from_slice(&bytes)
            .with_context(|| format!("{NODE_ANNOTATIONS}: expected a JSON object of strings"))?;
        let current = from_file
            .get(CURRENT_CONFIG)
            .filter(|c| !c.is_empty())
            .with_context(|| format!("{NODE_ANNOTATIONS}: no {CURRENT_CONFIG}"))?
            .clone();
        let changes: Vec<(&str, Option<&str>)> = from_file
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_str())))
            .collect();
        api.set_annotations(&changes)
            .await
            .context("setting the Node's initial annotations")?;
        tracing::info!(
            config = current,
            "Setting initial node config from {NODE_ANNOTATIONS}"
        );
        return Ok(Some(current));
    }
    if let Some(recorded) = input::read_current(root)? {
        let name = recorded.machine_config.name().to_string();
        let mut changes = vec![
            (CURRENT_CONFIG, Some(name.as_str())),
            (STATE, Some(NodeState::Done.as_str())),
        ];
        // A desiredConfig already there is the controller's (or it was set before an agent
        // killed before its first SetDone landed came back): the node goes there next.
        if annotations.desired_config().is_none() {
            changes.push((DESIRED_CONFIG, Some(name.as_str())));
        }
        api.set_annotations(&changes)
            .await
            .context("setting the Node's initial annotations")?;
        tracing::info!(
            config = name,
            "Setting initial node config from the recorded current config"
        );
        return Ok(Some(name));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::FakeNodeApi;
    use crate::engine::tests::{IMAGE, mc};
    use machine_config::mco::annotations::FIRST_PIVOT_CONFIG;

    fn root() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/machine-config-daemon")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        (dir, root)
    }

    #[tokio::test]
    async fn a_first_boot_sets_every_annotation_of_the_file() {
        let (dir, root) = root();
        let file = serde_json::json!({
            CURRENT_CONFIG: "rendered-worker-1",
            DESIRED_CONFIG: "rendered-worker-1",
            FIRST_PIVOT_CONFIG: "rendered-worker-1",
            STATE: "Done",
        });
        std::fs::write(
            dir.path().join(NODE_ANNOTATIONS.trim_start_matches('/')),
            file.to_string(),
        )
        .unwrap();
        let api = FakeNodeApi::new("worker-0");
        let current = load_node_annotations(&root, &api).await.unwrap();
        assert_eq!(current.as_deref(), Some("rendered-worker-1"));
        for key in [CURRENT_CONFIG, DESIRED_CONFIG, FIRST_PIVOT_CONFIG] {
            assert_eq!(api.annotation(key).as_deref(), Some("rendered-worker-1"));
        }
        assert_eq!(api.annotation(STATE).as_deref(), Some("Done"));
    }

    #[tokio::test]
    async fn a_desired_config_the_node_has_already_is_kept() {
        let (_dir, root) = root();
        input::write_current(&root, &mc("rendered-worker-7", &[], &[], IMAGE)).unwrap();
        let api = FakeNodeApi::new("worker-0");
        api.set_annotations(&[(DESIRED_CONFIG, Some("rendered-worker-8"))])
            .await
            .unwrap();
        let current = load_node_annotations(&root, &api).await.unwrap();
        assert_eq!(current.as_deref(), Some("rendered-worker-7"));
        assert_eq!(
            api.annotation(DESIRED_CONFIG).as_deref(),
            Some("rendered-worker-8")
        );
        assert_eq!(
            api.annotation(CURRENT_CONFIG).as_deref(),
            Some("rendered-worker-7")
        );
    }

    #[tokio::test]
    async fn a_recorded_config_is_annotated_when_the_node_has_none() {
        let (_dir, root) = root();
        input::write_current(&root, &mc("rendered-worker-7", &[], &[], IMAGE)).unwrap();
        let api = FakeNodeApi::new("worker-0");
        let current = load_node_annotations(&root, &api).await.unwrap();
        assert_eq!(current.as_deref(), Some("rendered-worker-7"));
        assert_eq!(
            api.annotation(DESIRED_CONFIG).as_deref(),
            Some("rendered-worker-7")
        );
        assert_eq!(api.annotation(STATE).as_deref(), Some("Done"));
    }

    #[tokio::test]
    async fn an_annotated_node_is_left_alone_and_a_broken_file_is_named() {
        let (dir, root) = root();
        let api = FakeNodeApi::new("worker-0");
        assert_eq!(load_node_annotations(&root, &api).await.unwrap(), None);
        assert_eq!(api.annotation(CURRENT_CONFIG), None);
        let path = dir.path().join(NODE_ANNOTATIONS.trim_start_matches('/'));
        std::fs::write(&path, "[1]").unwrap();
        let err = load_node_annotations(&root, &api).await.unwrap_err();
        assert!(format!("{err:#}").contains(NODE_ANNOTATIONS), "{err:#}");
        api.set_annotations(&[(CURRENT_CONFIG, Some("rendered-worker-2"))])
            .await
            .unwrap();
        let current = load_node_annotations(&root, &api).await.unwrap();
        assert_eq!(current.as_deref(), Some("rendered-worker-2"));
        assert_eq!(api.annotation(DESIRED_CONFIG), None);
    }
}
