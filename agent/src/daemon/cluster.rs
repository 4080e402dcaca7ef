//! The daemon with a cluster: the engine's [`ClusterReport`] over the Node API (annotations,
//! events, drain, uncordon), and the API server as a source of rendered configs by name.
//!
//! State, `SetDone`, annotation, event and MachineConfigNode writes go through one writer
//! task, in order (a MachineConfigNode write reads the annotations written before it): the
//! Node API retries each write until it lands, and an update must not wait on an API server
//! that is down (the MCD queues its node writes the same way). Drain and uncordon are steps of
//! the update and are awaited.

use std::sync::Arc;

use anyhow::{Result, bail};
use async_trait::async_trait;
use machine_config::MachineConfig;
use machine_config::mco::NodeState;
use machine_config::mco::annotations::{
    CURRENT_CONFIG, CURRENT_IMAGE, DESIRED_IMAGE, POST_CONFIG_ACTION, POST_CONFIG_ACTION_REBOOTING,
    REASON, STATE,
};
use machine_config::mco::node_conditions::Progress;
use machine_config::mco::node_image_conditions::Gates;
use tokio::sync::{mpsc, oneshot};

use super::source::ConfigSource;
use crate::cluster::{NodeApi, mcn};
use crate::engine::ClusterReport;

/// One queued write.
#[derive(Debug)]
enum Write {
    Report(NodeState, String),
    SetDone(String, Option<String>),
    Event(String, String),
    PostConfigAction(&'static str),
    Progress(Progress),
    /// Answered once every write queued before it has been done.
    Flush(oneshot::Sender<()>),
}

/// [`ClusterReport`] over a [`NodeApi`].
pub struct NodeReport {
    api: Arc<dyn NodeApi>,
    writes: mpsc::UnboundedSender<Write>,
}

impl NodeReport {
    /// Starts the writer task (inside a tokio runtime); the node is in `pool` (its
    /// MachineConfigNode's `spec.pool`).
    pub fn new(api: Arc<dyn NodeApi>, pool: &str) -> Self {
        Self::with_gates(api, pool, Gates::default())
    }

    /// [`NodeReport::new`] for a cluster with these feature `gates` (what its
    /// MachineConfigNode holds).
    pub fn with_gates(api: Arc<dyn NodeApi>, pool: &str, gates: Gates) -> Self {
        let pool = pool.to_string();
        let (writes, mut queue) = mpsc::unbounded_channel::<Write>();
        let writer = api.clone();
        tokio::spawn(async move {
            while let Some(w) = queue.recv().await {
                let result = match &w {
                    Write::Flush(_) => Ok(()),
                    Write::Report(state, reason) => writer.report(*state, reason).await,
                    Write::SetDone(config, image) => {
                        writer
                            .set_annotations(&set_done(config, image.as_deref()))
                            .await
                    }
                    Write::Event(reason, message) => writer.event(reason, message).await,
                    Write::PostConfigAction(value) => {
                        writer
                            .set_annotations(&[(POST_CONFIG_ACTION, Some(*value))])
                            .await
                    }
                    // Transient failures were retried; anything else is logged below and
                    // healed by the next step's write (it rewrites the whole state).
                    Write::Progress(p) => mcn::report_with(writer.as_ref(), &pool, p, gates).await,
                };
                if let Err(e) = result {
                    tracing::warn!(write = ?w, error = %e, "a node write failed for good");
                }
                if let Write::Flush(done) = w {
                    let _ = done.send(());
                }
            }
        });
        NodeReport { api, writes }
    }

    fn queue(&self, w: Write) -> Result<()> {
        self.writes
            .send(w)
            .map_err(|_| anyhow::anyhow!("the node writer stopped"))
    }
}

#[async_trait]
impl ClusterReport for NodeReport {
    async fn report(&self, state: NodeState, reason: &str) -> Result<()> {
        self.queue(Write::Report(state, reason.to_string()))
    }

    async fn set_done(&self, config: &str, image: Option<&str>) -> Result<()> {
        self.queue(Write::SetDone(
            config.to_string(),
            image.map(str::to_string),
        ))
    }

    async fn event(&self, reason: &str, message: &str) -> Result<()> {
        self.queue(Write::Event(reason.to_string(), message.to_string()))
    }

    async fn drain(&self, config: &str) -> Result<()> {
        Ok(self.api.drain(config).await?)
    }

    async fn uncordon(&self, config: &str) -> Result<()> {
        Ok(self.api.uncordon(config).await?)
    }

    async fn progress(&self, progress: Progress) -> Result<()> {
        self.queue(Write::Progress(progress))
    }

    async fn flush(&self, timeout: std::time::Duration) -> Result<()> {
        let (done, landed) = oneshot::channel();
        self.queue(Write::Flush(done))?;
        match tokio::time::timeout(timeout, landed).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => bail!("the node writer stopped"),
            Err(_) => bail!("the node's writes did not land within {timeout:?}"),
        }
    }

    fn node_name(&self) -> Option<&str> {
        Some(self.api.node_name())
    }

    async fn rebooting(&self, rebooting: bool) -> Result<()> {
        // Cleared to "" after the boot, as the MCD does.
        self.queue(Write::PostConfigAction(if rebooting {
            POST_CONFIG_ACTION_REBOOTING
        } else {
            ""
        }))
    }
}

/// The MCD's `SetDone` in one write: `currentConfig`, `state=Done`, `reason=""`; with a
/// layered image `currentImage` set, without one `currentImage` and `desiredImage` removed (the
/// pool left image mode, or never was in it).
fn set_done<'a>(config: &'a str, image: Option<&'a str>) -> Vec<(&'static str, Option<&'a str>)> {
    let mut changes = vec![
        (CURRENT_CONFIG, Some(config)),
        (STATE, Some(NodeState::Done.as_str())),
        (REASON, Some("")),
    ];
    match image {
        Some(image) => changes.push((CURRENT_IMAGE, Some(image))),
        None => changes.extend([(CURRENT_IMAGE, None), (DESIRED_IMAGE, None)]),
    }
    changes
}

/// Rendered configs by name from the API server, as the MCD reads them.
pub struct ApiSource {
    pub api: Arc<dyn NodeApi>,
}

#[async_trait]
impl ConfigSource for ApiSource {
    async fn fetch(&self, name: Option<&str>) -> Result<MachineConfig> {
        let Some(name) = name else {
            bail!("the API server serves configs by name only: the node has no desiredConfig yet");
        };
        match self.api.get_machine_config(name).await {
            Ok(mc) => Ok(mc),
            // The shipped RBAC does not let nodes read MachineConfigs (a per-node config would
            // be readable by every node): say what to do instead of a bare 403.
            Err(err) if err.code() == Some(403) => Err(anyhow::Error::new(err).context(format!(
                "reading {name} from the API server was refused: nodes may not read \
                 MachineConfigs under the shipped RBAC; follow the config server \
                 (--config-server URL --ca FILE), or, where no per-node configs exist, apply \
                 manifests/api-source/"
            ))),
            Err(err) => Err(err.into()),
        }
    }

    fn describe(&self) -> String {
        format!("the API server (node {})", self.api.node_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::FakeNodeApi;
    use crate::daemon::tests::DaemonHarness;
    use crate::engine::tests::{CRIO_POLICY, IMAGE, mc};

    /// SetDone in image mode writes currentImage; out of it, removes both image annotations.
    #[tokio::test]
    async fn set_done_writes_or_removes_the_image_annotations() {
        use machine_config::mco::annotations::{CURRENT_IMAGE, DESIRED_IMAGE};
        let api = FakeNodeApi::new("node-0");
        let image = "registry.example/os@sha256:2";
        api.set_desired_image("rendered-a", Some(image));
        api.set_annotations(&set_done("rendered-a", Some(image)))
            .await
            .unwrap();
        assert_eq!(api.annotation(CURRENT_IMAGE).as_deref(), Some(image));
        assert_eq!(api.annotation(DESIRED_IMAGE).as_deref(), Some(image));
        assert_eq!(api.annotation(STATE).as_deref(), Some("Done"));
        api.set_annotations(&set_done("rendered-a", None))
            .await
            .unwrap();
        assert_eq!(api.annotation(CURRENT_IMAGE), None);
        assert_eq!(api.annotation(DESIRED_IMAGE), None);
        assert_eq!(
            api.annotation(CURRENT_CONFIG).as_deref(),
            Some("rendered-a")
        );
    }

    /// The daemon over the fake Node API: configs by name from the API, state on the Node.
    #[tokio::test]
    async fn the_daemon_follows_desired_config_through_the_node_api() {
        let api = Arc::new(FakeNodeApi::new("node-0"));
        let a = mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE);
        let b = mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE);
        api.add_machine_config(a.clone());
        api.add_machine_config(b.clone());
        let h = DaemonHarness::new(
            &a,
            Arc::new(NodeReport::new(api.clone(), "worker")),
            Arc::new(ApiSource { api: api.clone() }),
        )
        .await;
        let mut d = h
            .daemon(crate::daemon::DesiredFeed::Cluster(api.desired()))
            .await;
        api.set_desired("rendered-b");
        d.desired_name = Some("rendered-b".into());
        d.sync(false).await;
        assert_eq!(h.node.current().as_deref(), Some("rendered-b"));
        // The writer task lands the writes in order.
        for _ in 0..100 {
            if api.annotation(CURRENT_CONFIG).as_deref() == Some("rendered-b") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(
            api.annotation(CURRENT_CONFIG).as_deref(),
            Some("rendered-b")
        );
        assert_eq!(api.annotation(STATE).as_deref(), Some("Done"));
        assert_eq!(api.annotation(REASON).as_deref(), Some(""));
        assert_eq!(api.uncordons(), vec!["rendered-b".to_string()]);
        assert!(api.events().iter().any(|(r, _)| r == "NodeDone"));
        let events = api.events();
        for (reason, message) in [
            (
                "BootResync",
                "Booting node node-0, currentConfig rendered-a, desiredConfig rendered-b",
            ),
            (
                "NodeDone",
                "Setting node node-0, currentConfig rendered-b to Done",
            ),
        ] {
            assert!(
                events.contains(&(reason.to_string(), message.to_string())),
                "{events:?}"
            );
        }
        // The MachineConfigNode went through the update and ends Updated in it.
        let mcn = updated_mcn(&api, "rendered-b").await;
        assert_eq!(mcn["spec"]["configVersion"]["desired"], "rendered-b");
        let message = |kind: &str| {
            crate::cluster::mcn::conditions(&mcn)
                .into_iter()
                .find(|c| c.kind == kind)
                .map(|c| (c.status, c.message))
                .unwrap()
        };
        use machine_config::mco::node_conditions::Status;
        assert_eq!(
            message("UpdateExecuted"),
            (
                Status::False,
                "Action during update to rendered-b: Updated the Files and OS on disk as a part of the in progress phase".into()
            )
        );
        assert_eq!(
            message("Drained"),
            (
                Status::False,
                "Node Drain Not required for this update.".into()
            )
        );
        assert_eq!(message("NodeDegraded").0, Status::False);

        let err = ApiSource { api: api.clone() }
            .fetch(Some("rendered-gone"))
            .await
            .unwrap_err();
        assert!(format!("{err:#}").contains("rendered-gone"), "{err:#}");
        let err = ApiSource { api }.fetch(None).await.unwrap_err();
        assert!(format!("{err:#}").contains("by name only"), "{err:#}");
    }

    /// The node's MachineConfigNode once the writer task has marked it Updated in `config`.
    async fn updated_mcn(api: &FakeNodeApi, config: &str) -> serde_json::Value {
        for _ in 0..200 {
            if let Some(o) = api.machine_config_node_object()
                && o["status"]["configVersion"]["current"] == config
                && crate::cluster::mcn::conditions(&o)
                    .iter()
                    .any(|c| c.kind == "Updated" && c.message.ends_with("Updated"))
            {
                return o;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!(
            "no Updated MachineConfigNode: {:?}",
            api.machine_config_node_object()
        );
    }

    /// MachineConfigNode writes refused by the API server do not stop an update.
    #[tokio::test]
    async fn a_refused_machine_config_node_never_blocks_an_update() {
        let api = Arc::new(FakeNodeApi::new("node-0"));
        api.fail_machine_config_node_writes(Some("forbidden by policy"));
        let a = mc("rendered-a", &[(CRIO_POLICY, "{}\n")], &[], IMAGE);
        let b = mc("rendered-b", &[(CRIO_POLICY, "[]\n")], &[], IMAGE);
        api.add_machine_config(a.clone());
        api.add_machine_config(b.clone());
        let h = DaemonHarness::new(
            &a,
            Arc::new(NodeReport::new(api.clone(), "worker")),
            Arc::new(ApiSource { api: api.clone() }),
        )
        .await;
        let mut d = h
            .daemon(crate::daemon::DesiredFeed::Cluster(api.desired()))
            .await;
        api.set_desired("rendered-b");
        d.desired_name = Some("rendered-b".into());
        d.sync(false).await;
        assert_eq!(h.node.current().as_deref(), Some("rendered-b"));
        assert!(api.machine_config_node_object().is_none());
        // Allowed again: the next step's write carries the whole state.
        api.fail_machine_config_node_writes(None);
        d.sync(false).await;
        updated_mcn(&api, "rendered-b").await;
    }
}
