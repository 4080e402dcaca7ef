//! The kubelet health check, as the MCD runs it: `GET http://localhost:10248/healthz` every
//! 30 s with a 30 s timeout. A request that fails (connection, timeout, an HTTP error status)
//! counts as a failure and is logged with the count (`kubelet health check has failed N
//! times: ...`); any answer resets the count, a body other than `ok` is only logged. The count
//! is `mcd_kubelet_state`. Nothing else acts on it: the kubelet's health is the kubelet's
//! business (systemd restarts it).
//!
//! Standalone (no cluster), a host may have no kubelet at all: until one has answered, a
//! failed check is said once, at info, and not counted, so such a host neither logs a warning
//! every 30 s nor raises the kubelet alert; once a kubelet has answered, it is checked as above.

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

/// What the checks so far mean: the count `mcd_kubelet_state` exports and what to log.
#[derive(Debug)]
struct Tally {
    failures: u32,
    /// No kubelet has answered yet on a standalone host: failures are not counted.
    waiting_for_one: bool,
    /// The host without a kubelet was said.
    told: bool,
}

/// What one check's result is to log.
#[derive(Debug, PartialEq)]
enum Said {
    Nothing,
    /// An answer other than `ok`.
    NotOk,
    /// The failure, with the count.
    Failed(u32),
    /// Standalone, no kubelet has answered yet (said once).
    NoKubeletYet,
}

impl Tally {
    fn new(standalone: bool) -> Self {
        Tally {
            failures: 0,
            waiting_for_one: standalone,
            told: false,
        }
    }

    /// Counts one check: `Ok(body)` an answer, `Err(())` a failure.
    fn record(&mut self, check: Result<&str, ()>) -> Said {
        match check {
            Ok(body) => {
                self.waiting_for_one = false;
                self.failures = 0;
                if body.trim() == "ok" {
                    Said::Nothing
                } else {
                    Said::NotOk
                }
            }
            Err(()) if self.waiting_for_one => {
                if std::mem::replace(&mut self.told, true) {
                    Said::Nothing
                } else {
                    Said::NoKubeletYet
                }
            }
            Err(()) => {
                self.failures = self.failures.saturating_add(1);
                Said::Failed(self.failures)
            }
        }
    }
}

/// Checks every `interval` (each check limited to `interval`) until the task is dropped,
/// keeping `mcd_kubelet_state` up to date; `standalone`: see the module's documentation.
pub async fn monitor(
    endpoint: String,
    interval: Duration,
    metrics: Arc<Metrics>,
    standalone: bool,
) {
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
    let mut tally = Tally::new(standalone);
    loop {
        ticks.tick().await;
        let result = check(&client, &endpoint).await;
        match (tally.record(result.as_deref().map_err(|_| ())), &result) {
            (Said::NotOk, Ok(body)) => {
                let body: String = body.trim().chars().take(200).collect();
                tracing::warn!(endpoint, body, "Kubelet Healthz Endpoint did not return ok");
            }
            (Said::Failed(failures), Err(e)) => tracing::warn!(
                endpoint,
                failures,
                "kubelet health check has failed {failures} times: {e:#}"
            ),
            (Said::NoKubeletYet, Err(e)) => tracing::info!(
                endpoint,
                "no kubelet answers (the agent runs without a cluster): its health is checked \
                 once one does: {e:#}"
            ),
            _ => {}
        }
        metrics.set_kubelet_failures(tally.failures);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standalone_counts_failures_only_once_a_kubelet_answered() {
        use Said::*;
        // (standalone, checks, what each says, the count at the end)
        type Case<'a> = (bool, &'a [Result<&'a str, ()>], &'a [Said], u32);
        let cases: [Case; 5] = [
            (
                false,
                &[Err(()), Err(()), Ok("ok")],
                &[Failed(1), Failed(2), Nothing],
                0,
            ),
            (
                false,
                &[Ok("ok"), Ok("not yet"), Err(())],
                &[Nothing, NotOk, Failed(1)],
                1,
            ),
            (
                true,
                &[Err(()), Err(()), Err(())],
                &[NoKubeletYet, Nothing, Nothing],
                0,
            ),
            (
                true,
                &[Err(()), Ok("ok"), Err(()), Err(())],
                &[NoKubeletYet, Nothing, Failed(1), Failed(2)],
                2,
            ),
            (true, &[Ok("unhealthy"), Err(())], &[NotOk, Failed(1)], 1),
        ];
        for (standalone, checks, want, count) in cases {
            let mut tally = Tally::new(standalone);
            let said: Vec<Said> = checks.iter().map(|c| tally.record(*c)).collect();
            assert_eq!(said, want, "standalone {standalone}, {checks:?}");
            assert_eq!(tally.failures, count, "standalone {standalone}, {checks:?}");
        }
    }
}
