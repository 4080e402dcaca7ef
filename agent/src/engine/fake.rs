//! [`FakeCluster`]: an in-memory [`ClusterReport`] that records what the engine told the
//! cluster, for unit tests of the engine and the daemon.

use std::sync::{Mutex, MutexGuard};

use anyhow::Result;
use async_trait::async_trait;
use machine_config::mco::NodeState;
use machine_config::mco::node_conditions::Progress;

use super::report::ClusterReport;

/// One call the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterCall {
    Report(NodeState, String),
    SetDone(String),
    Event(String, String),
    Drain(String),
    Uncordon(String),
    /// [`ClusterReport::annotate`]: key, value.
    Annotate(String, String),
}

#[derive(Default)]
struct Inner {
    calls: Vec<ClusterCall>,
    progress: Vec<Progress>,
    /// The layered image of each `SetDone`, in order.
    done_images: Vec<Option<String>>,
    fail_drain: Option<String>,
    fail_uncordon: Option<String>,
}

/// Records calls; drain and uncordon can be told to fail.
#[derive(Default)]
pub struct FakeCluster {
    inner: Mutex<Inner>,
}

impl FakeCluster {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<ClusterCall> {
        self.lock().calls.clone()
    }

    /// The layered image each `SetDone` reported (`None`: not in image mode), in order.
    pub fn done_images(&self) -> Vec<Option<String>> {
        self.lock().done_images.clone()
    }

    /// The event reasons so far, in order.
    pub fn events(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                ClusterCall::Event(r, _) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// The update steps reported (the MachineConfigNode's), in order.
    pub fn progress(&self) -> Vec<Progress> {
        self.lock().progress.clone()
    }

    /// The last state reported (`SetDone` counts as Done).
    pub fn last_state(&self) -> Option<(NodeState, String)> {
        self.calls().into_iter().rev().find_map(|c| match c {
            ClusterCall::Report(s, r) => Some((s, r)),
            ClusterCall::SetDone(_) => Some((NodeState::Done, String::new())),
            _ => None,
        })
    }

    /// Later drains fail with `message` (`None`: succeed again).
    pub fn fail_drain(&self, message: Option<&str>) {
        self.lock().fail_drain = message.map(str::to_string);
    }

    /// Later uncordons fail with `message` (`None`: succeed again).
    pub fn fail_uncordon(&self, message: Option<&str>) {
        self.lock().fail_uncordon = message.map(str::to_string);
    }

    fn push(&self, call: ClusterCall) {
        self.lock().calls.push(call);
    }
}

#[async_trait]
impl ClusterReport for FakeCluster {
    async fn report(&self, state: NodeState, reason: &str) -> Result<()> {
        self.push(ClusterCall::Report(state, reason.to_string()));
        Ok(())
    }

    async fn set_done(&self, config: &str, image: Option<&str>) -> Result<()> {
        self.lock().done_images.push(image.map(str::to_string));
        self.push(ClusterCall::SetDone(config.to_string()));
        Ok(())
    }

    async fn event(&self, reason: &str, message: &str) -> Result<()> {
        self.push(ClusterCall::Event(reason.to_string(), message.to_string()));
        Ok(())
    }

    async fn drain(&self, config: &str) -> Result<()> {
        self.push(ClusterCall::Drain(config.to_string()));
        match self.lock().fail_drain.clone() {
            Some(m) => Err(anyhow::anyhow!(m)),
            None => Ok(()),
        }
    }

    async fn uncordon(&self, config: &str) -> Result<()> {
        self.push(ClusterCall::Uncordon(config.to_string()));
        match self.lock().fail_uncordon.clone() {
            Some(m) => Err(anyhow::anyhow!(m)),
            None => Ok(()),
        }
    }

    async fn progress(&self, progress: Progress) -> Result<()> {
        self.lock().progress.push(progress);
        Ok(())
    }

    async fn annotate(&self, key: &'static str, value: &str) -> Result<()> {
        self.push(ClusterCall::Annotate(key.into(), value.into()));
        Ok(())
    }

    fn node_name(&self) -> Option<&str> {
        Some("node-0")
    }
}
