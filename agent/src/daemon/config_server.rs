//! The config server as a source of desired configs (host-first): `GET <url>/config/<pool>`
//! as [`crate::input::served`] asks it, as the companion (or the MCS) serves it.

use std::path::Path;

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use machine_config::MachineConfig;

use super::source::ConfigSource;
use crate::input::served::{check_scheme, fetch, http_client, served_machine_config};

/// A config server for one pool.
pub struct ConfigServer {
    client: reqwest::Client,
    url: String,
    node: Option<String>,
}

impl ConfigServer {
    /// `base` is `https://host:port` (or `http://` with `insecure_http`: see
    /// [`check_scheme`]); `ca` the PEM CA bundle that signs the server's certificate (required
    /// for https: the agent trusts nothing else).
    pub fn new(
        base: &str,
        ca: Option<&Path>,
        pool: &str,
        node: Option<&str>,
        insecure_http: bool,
    ) -> Result<Self> {
        let base = base.trim_end_matches('/');
        let url = format!("{base}/config/{pool}");
        check_scheme(base, insecure_http)?;
        if base.starts_with("https://") && ca.is_none() {
            bail!("an https config server needs --ca (the CA that signs its certificate)");
        }
        Ok(ConfigServer {
            client: http_client(base, ca)?,
            url,
            node: node.map(str::to_string),
        })
    }

    /// Fetches and reads the served config once.
    pub async fn fetch_once(&self) -> Result<MachineConfig> {
        let body = fetch(&self.client, &self.url, self.node.as_deref()).await?;
        served_machine_config(&body).with_context(|| format!("the config served by {}", self.url))
    }
}

#[async_trait]
impl ConfigSource for ConfigServer {
    async fn fetch(&self, name: Option<&str>) -> Result<MachineConfig> {
        let mc = self.fetch_once().await?;
        if let Some(name) = name
            && mc.name() != name
        {
            bail!(
                "{} serves {} but the node's desiredConfig is {name}",
                self.url,
                mc.name()
            );
        }
        Ok(mc)
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}
