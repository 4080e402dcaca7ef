//! The kubelet health check, as the MCD runs it: `GET http://localhost:10248/healthz` every
//! 30 s with a 30 s timeout. A request that fails (connection, timeout, an HTTP error status)
//! counts as a failure and is logged with the count (`kubelet health check has failed N
//! times: ...`); any answer resets the count, a body other than `ok` is only logged. The count
//! is `mcd_kubelet_state`. Nothing else acts on it: the kubelet's health is the kubelet's
//! business (systemd restarts it).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::Metrics;

/// The kubelet's health endpoint (its `healthzPort` on localhost).
pub const DEFAULT_ENDPOINT: &str = "http://localhost:10248/healthz";
/// How often the MCD checks, and how long one check may take.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

/// One check: the body of a successful answer.
pub async fn check(client: &reqwest::Client, endpoint: &str) -> Result<String> {
    let response = client
        .get(endpoint)
        .send()
        .await
        .with_context(|| format!("GET {endpoint}"))?
        .error_for_status()
        .with_context(|| format!("GET {endpoint}"))?;
    response
        .text()
        .await
        .with_context(|| format!("reading the answer of {endpoint}"))
}

/// An HTTP client for `endpoint`, each request limited to `timeout`.
fn client(endpoint: &str, timeout: Duration) -> Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder().timeout(timeout).no_proxy();
    // The kubelet's endpoint is plain HTTP: it needs no trust store, and the system's is loaded
    // only for https (a host without CA certificates would otherwise lose the check).
    let builder = if endpoint.starts_with("http://") {
        builder.tls_certs_only([])
    } else {
        builder
    };
    builder.build().context("building the HTTP client")
}

/// The kubelet's health as the engine's checks after a reboot ask it
/// ([`crate::engine::health`]): healthy when the endpoint answers `ok`.
pub struct KubeletHealth {
    client: reqwest::Client,
    endpoint: String,
}

impl KubeletHealth {
    pub fn new(endpoint: &str, timeout: Duration) -> Result<Self> {
        Ok(KubeletHealth {
            client: client(endpoint, timeout)?,
            endpoint: endpoint.to_string(),
        })
    }
}

#[async_trait::async_trait]
impl crate::engine::KubeletProbe for KubeletHealth {
    async fn healthy(&self) -> Result<(), String> {
        match check(&self.client, &self.endpoint).await {
            Ok(body) if body.trim() == "ok" => Ok(()),
            Ok(body) => Err(format!(
                "{} answered {:?}",
                self.endpoint,
                body.trim().chars().take(200).collect::<String>()
            )),
            Err(e) => Err(format!("{e:#}")),
        }
    }
}

/// Checks every `interval` (each check limited to `interval`) until the task is dropped,
/// keeping `mcd_kubelet_state` up to date.
pub async fn monitor(endpoint: String, interval: Duration, metrics: Arc<Metrics>) {
    let client = match client(&endpoint, interval) {
        Ok(c) => c,
        Err(e) => {
            let error = format!("{e:#}");
            tracing::error!(
                error,
                "kubelet health check not started: building the HTTP client"
            );
            return;
        }
    };
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failures: u32 = 0;
    loop {
        ticks.tick().await;
        match check(&client, &endpoint).await {
            Ok(body) => {
                if body.trim() != "ok" {
                    let body: String = body.trim().chars().take(200).collect();
                    tracing::warn!(endpoint, body, "Kubelet Healthz Endpoint did not return ok");
                }
                failures = 0;
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                tracing::warn!(
                    endpoint,
                    failures,
                    "kubelet health check has failed {failures} times: {e:#}"
                );
            }
        }
        metrics.set_kubelet_failures(failures);
    }
}
