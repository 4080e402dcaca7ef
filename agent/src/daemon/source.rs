//! Where the daemon gets the desired rendered config: the config server (host-first), a file,
//! or (with a cluster) the API server by name.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use machine_config::MachineConfig;

use crate::input::LoadedConfig;

/// A source of desired configs.
#[async_trait]
pub trait ConfigSource: Send + Sync {
    /// The rendered config named `name` (the node's `desiredConfig`), or with `None` whatever
    /// the source serves for this node now (standalone).
    async fn fetch(&self, name: Option<&str>) -> Result<MachineConfig>;
    /// Where it comes from, for messages.
    fn describe(&self) -> String;
}

/// A MachineConfig (or Ignition config) file, read on every fetch.
pub struct FileSource {
    pub path: PathBuf,
}

#[async_trait]
impl ConfigSource for FileSource {
    async fn fetch(&self, name: Option<&str>) -> Result<MachineConfig> {
        let path = self.path.clone();
        let loaded = tokio::task::spawn_blocking(move || LoadedConfig::read(&path))
            .await
            .context("reading the config file")??;
        let mc = loaded.machine_config;
        if let Some(name) = name
            && mc.name() != name
        {
            bail!(
                "{} holds {} but the node's desiredConfig is {name}",
                self.path.display(),
                mc.name()
            );
        }
        Ok(mc)
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}
