//! Many machines booting at once: `n` first-boot fetches of a pool's config from the config
//! server, all started together, each on a fresh TLS connection and anonymous, as Ignition
//! makes them; the latency of each from its connection's start to the body's last byte. A fetch
//! that fails or is not done within the timeout counts as a timeout in the quantiles (a machine
//! whose fetch failed waits at least its retry): a burst with failures never shows a better
//! p99 than one without.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use mco_test_support::https_get;

/// The `Accept` header Ignition (spec 3.2 and later) sends.
pub const IGNITION_ACCEPT: &str = "application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1";

/// The outcome of a burst of fetches.
#[derive(Debug, Clone)]
pub struct Burst {
    /// The latencies of the fetches answered 200, sorted.
    pub latencies: Vec<Duration>,
    /// Fetches that failed or were not answered 200, with why (the first few).
    pub failures: usize,
    pub first_failures: Vec<String>,
    /// The largest body received.
    pub body_bytes: usize,
    /// From the first fetch's start to the last one's end.
    pub wall: Duration,
}

impl Burst {
    /// The `q`-quantile (0.5, 0.99) of all fetches, a failed one counting as
    /// [`Duration::MAX`] (a timeout).
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let mut all = self.latencies.clone();
        all.extend(std::iter::repeat_n(Duration::MAX, self.failures));
        quantile(&all, q)
    }
}

/// The `q`-quantile of `sorted` (nearest rank).
pub fn quantile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// `n` concurrent GETs of `path` from the config server on `127.0.0.1:port`, trusting `ca_pem`;
/// a fetch not done within `timeout` is abandoned and counted failed.
pub async fn burst(
    ca_pem: &str,
    port: u16,
    path: &str,
    n: usize,
    timeout: Duration,
) -> Result<Burst> {
    mco_test_support::tls::install_ring_provider();
    let config = mco_test_support::tls::ignition_like_client_config(ca_pem)?;
    let start_line = Arc::new(tokio::sync::Barrier::new(n + 1));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        // each machine its own address, as 1,000 machines have (the server caps per address)
        let source = std::net::Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 1) as u8);
        let (config, start_line, path) = (config.clone(), start_line.clone(), path.to_string());
        tasks.push(tokio::spawn(async move {
            start_line.wait().await;
            let fetch = https_get::get(
                config,
                Some(source),
                "127.0.0.1",
                port,
                "127.0.0.1",
                &path,
                &[("Accept", IGNITION_ACCEPT)],
            );
            match tokio::time::timeout(timeout, fetch).await {
                Ok(outcome) => outcome,
                Err(_) => Err(anyhow::anyhow!("no answer within {timeout:?}")),
            }
        }));
    }
    let started = std::time::Instant::now();
    start_line.wait().await;
    let mut burst = Burst {
        latencies: Vec::with_capacity(n),
        failures: 0,
        first_failures: Vec::new(),
        body_bytes: 0,
        wall: Duration::ZERO,
    };
    for task in tasks {
        let outcome = task.await.context("a fetch task panicked")?;
        let failure = match outcome {
            Ok(got) if got.status == 200 => {
                burst.latencies.push(got.took);
                burst.body_bytes = burst.body_bytes.max(got.body_bytes);
                None
            }
            Ok(got) => Some(format!("answered {}", got.status)),
            Err(err) => Some(format!("{err:#}")),
        };
        if let Some(why) = failure {
            burst.failures += 1;
            if burst.first_failures.len() < 3 {
                burst.first_failures.push(why);
            }
        }
    }
    burst.wall = started.elapsed();
    burst.latencies.sort();
    Ok(burst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let ms: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&ms, 0.5), Some(Duration::from_millis(50)));
        assert_eq!(quantile(&ms, 0.99), Some(Duration::from_millis(99)));
        assert_eq!(quantile(&ms, 1.0), Some(Duration::from_millis(100)));
        assert_eq!(quantile(&ms[..1], 0.99), Some(Duration::from_millis(1)));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn failed_fetches_count_as_timeouts() {
        let burst = Burst {
            latencies: (1..=98).map(Duration::from_millis).collect(),
            failures: 2,
            first_failures: Vec::new(),
            body_bytes: 0,
            wall: Duration::ZERO,
        };
        assert_eq!(burst.quantile(0.5), Some(Duration::from_millis(50)));
        assert_eq!(burst.quantile(0.98), Some(Duration::from_millis(98)));
        assert_eq!(burst.quantile(0.99), Some(Duration::MAX));
    }
}
