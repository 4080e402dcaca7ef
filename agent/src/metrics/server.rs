//! Serving the metrics: `GET /metrics` on a plain-HTTP listener (loopback by default, as the
//! MCD, whose port a proxy exposes with TLS when needed), the options of `mco-agent start`
//! that control it and the kubelet health check, and [`start`], which sets both up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::task::JoinHandle;

use super::{Metrics, MetricsObserver, host_os, kubelet};
use crate::rootfs::Root;

/// The OpenMetrics text format's content type.
pub const CONTENT_TYPE_OPENMETRICS: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Where the MCD serves its metrics.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8797";

/// Metrics and kubelet health-check options (flattened into `start`'s).
#[derive(Debug, Clone, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR", env = "MCO_METRICS_LISTEN", default_value = DEFAULT_LISTEN)]
    pub metrics_listen: SocketAddr,
    /// Do not serve metrics.
    #[arg(long)]
    pub no_metrics: bool,
    /// Check the kubelet's health (mcd_kubelet_state), as the MCD does.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub kubelet_healthz_enabled: bool,
    /// The kubelet's health endpoint.
    #[arg(long, value_name = "URL", default_value = kubelet::DEFAULT_ENDPOINT)]
    pub kubelet_healthz_endpoint: String,
    /// How often the kubelet's health is checked (each check may take as long).
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "30s")]
    pub kubelet_healthz_interval: Duration,
}

impl Default for MetricsArgs {
    fn default() -> Self {
        MetricsArgs {
            metrics_listen: DEFAULT_LISTEN.parse().expect("a valid default address"),
            no_metrics: false,
            kubelet_healthz_enabled: true,
            kubelet_healthz_endpoint: kubelet::DEFAULT_ENDPOINT.to_string(),
            kubelet_healthz_interval: kubelet::DEFAULT_INTERVAL,
        }
    }
}

/// The running metrics: the observer to give the engine's reporter, and the server and
/// health-check tasks (stopped when this is dropped).
pub struct MetricsHandle {
    observer: Arc<MetricsObserver>,
    addr: Option<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
}

impl MetricsHandle {
    /// What to pass to `Reporter::add_observer`.
    pub fn observer(&self) -> Arc<MetricsObserver> {
        self.observer.clone()
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        self.observer.metrics()
    }

    /// Where the metrics are served (the bound address), if they are.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }
}

impl Drop for MetricsHandle {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Sets up the metrics of the node at `root` (its OS labels), binds the listener (an error
/// names the address: another agent, or the MCD, may hold it) and starts serving, and starts
/// the kubelet health check; each as `args` says.
pub async fn start(args: &MetricsArgs, root: &Root) -> Result<MetricsHandle> {
    let metrics = Arc::new(Metrics::new());
    match host_os::read(root) {
        Some((os, version)) => metrics.set_host_os(&os, &version),
        None => tracing::warn!("no os-release in the root: mcd_host_os_and_version is not set"),
    }
    let mut tasks = Vec::new();
    let mut addr = None;
    if !args.no_metrics {
        let listener = tokio::net::TcpListener::bind(args.metrics_listen)
            .await
            .with_context(|| format!("listening for metrics on {}", args.metrics_listen))?;
        let bound = listener
            .local_addr()
            .context("the metrics listener's address")?;
        tracing::info!(addr = %bound, "serving metrics at http://{bound}/metrics");
        tasks.push(tokio::spawn(serve(listener, metrics.clone())));
        addr = Some(bound);
    }
    if args.kubelet_healthz_enabled {
        tasks.push(tokio::spawn(kubelet::monitor(
            args.kubelet_healthz_endpoint.clone(),
            args.kubelet_healthz_interval,
            metrics.clone(),
        )));
    }
    Ok(MetricsHandle {
        observer: Arc::new(MetricsObserver::new(metrics)),
        addr,
        tasks,
    })
}

/// Serves `/metrics` on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    let app = Router::new()
        .route("/metrics", get(scrape))
        .with_state(metrics);
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "the metrics server stopped");
    }
}

async fn scrape(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    ([(CONTENT_TYPE, CONTENT_TYPE_OPENMETRICS)], metrics.encode())
}
