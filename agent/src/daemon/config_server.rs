//! The config server as a source of desired configs (host-first): `GET <url>/config/<pool>`
//! as [`crate::input::served`] asks it, naming the node's `desiredConfig` in `X-MCO-Config`, as
//! the companion serves it (docs/companion.md, "The config server's protocol"). A
//! machine-config-server ignores that header and serves the pool's config, which the agent
//! detects (the served name differs) and reports.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use machine_config::MachineConfig;

use super::source::ConfigSource;
use crate::input::served::{
    CONFIG_HEADER, check_scheme, fetch, http_client, refuse_plain_http, served_machine_config,
};

/// A config server for one pool.
pub struct ConfigServer {
    client: reqwest::Client,
    url: String,
    node: Option<String>,
    /// Where a large served MachineConfig is spilled (see `input::spill`).
    spill: Option<PathBuf>,
}

impl ConfigServer {
    /// `base` is `https://host:port` (or `http://` with `insecure_http`: see
    /// [`check_scheme`]); `ca` the PEM CA bundle that signs the server's certificate (required
    /// for https: the agent trusts nothing else); `identity` the node's client certificate and
    /// key (one PEM file), presented when the server asks.
    pub fn new(
        base: &str,
        ca: Option<&Path>,
        identity: Option<&Path>,
        pool: &str,
        node: Option<&str>,
        insecure_http: bool,
    ) -> Result<Self> {
        let base = base.trim_end_matches('/');
        let url = format!("{base}/config/{pool}");
        Self::check_args(base, ca, insecure_http)?;
        check_scheme(base, insecure_http)?;
        Ok(ConfigServer {
            client: http_client(base, ca, identity)?,
            url,
            node: node.map(str::to_string),
            spill: None,
        })
    }

    /// What [`Self::new`] refuses of its arguments, without connecting or logging (`start`'s
    /// checks, which `config show` runs too): plain http without `insecure_http`, https without
    /// a CA.
    pub fn check_args(base: &str, ca: Option<&Path>, insecure_http: bool) -> Result<()> {
        refuse_plain_http(base, insecure_http)?;
        if base.starts_with("https://") && ca.is_none() {
            bail!("an https config server needs --ca (the CA that signs its certificate)");
        }
        Ok(())
    }

    /// Spills a large served MachineConfig into an unnamed private file in `dir` (the agent's
    /// state directory) instead of holding it in memory through the update.
    pub fn spilling_to(mut self, dir: PathBuf) -> Self {
        self.spill = Some(dir);
        self
    }

    /// Fetches and reads the served config once: `name`, or without one what the pool serves.
    pub async fn fetch_once(&self, name: Option<&str>) -> Result<MachineConfig> {
        let body = fetch(&self.client, &self.url, self.node.as_deref(), name).await?;
        served_machine_config(body, self.spill.as_deref())
            .with_context(|| format!("the config served by {}", self.url))
    }
}

#[async_trait]
impl ConfigSource for ConfigServer {
    async fn fetch(&self, name: Option<&str>) -> Result<MachineConfig> {
        let mc = self.fetch_once(name).await?;
        if let Some(name) = name
            && mc.name() != name
        {
            bail!(
                "{} served {} when asked for {name} (the node's desiredConfig): the server \
                 ignores {CONFIG_HEADER} and serves the pool's config, as a machine-config-server \
                 does; point --config-server at mco-companion, or drop --config-server to read \
                 rendered configs from the API server",
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
