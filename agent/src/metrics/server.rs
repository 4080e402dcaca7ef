//! Serving the metrics: `GET /metrics` on a plain-HTTP listener (loopback by default, as the
//! MCD, whose port a proxy exposes with TLS when needed), the options of `mco-agent start`
//! that control it and the kubelet health check, and [`start`], which sets both up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use std::convert::Infallible;

use anyhow::{Context, Result};
use http::header::{ALLOW, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
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
    #[arg(long, value_name = "ADDR", env = "MCO_AGENT_METRICS_LISTEN", default_value = DEFAULT_LISTEN)]
    pub metrics_listen: SocketAddr,
    /// Do not serve metrics.
    #[arg(long, env = "MCO_AGENT_NO_METRICS")]
    pub no_metrics: bool,
    /// Also serve the metrics at https://ADDR/metrics for the cluster's Prometheus (the node's
    /// address, say): bearer tokens checked with TokenReview and SubjectAccessReview (get
    /// /metrics, or get nodes/metrics of this node). Needs a kubeconfig, --metrics-tls-cert
    /// and --metrics-tls-key.
    #[arg(long, value_name = "ADDR", env = "MCO_AGENT_METRICS_SECURE_LISTEN")]
    pub metrics_secure_listen: Option<SocketAddr>,
    /// The secure metrics listener's certificate (PEM; read again for every connection).
    #[arg(long, value_name = "FILE", env = "MCO_AGENT_METRICS_TLS_CERT")]
    pub metrics_tls_cert: Option<std::path::PathBuf>,
    /// The secure metrics listener's private key (PEM).
    #[arg(long, value_name = "FILE", env = "MCO_AGENT_METRICS_TLS_KEY")]
    pub metrics_tls_key: Option<std::path::PathBuf>,
    /// Check the kubelet's health (mcd_kubelet_state), as the MCD does.
    /// A switch (`--kubelet-healthz-enabled=false` turns it off; a separate `true`/`false`
    /// word is still read, as first spelled).
    #[arg(
        long,
        env = "MCO_AGENT_KUBELET_HEALTHZ_ENABLED",
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        default_missing_value = "true",
        require_equals = false,
        action = clap::ArgAction::Set
    )]
    pub kubelet_healthz_enabled: bool,
    /// The kubelet's health endpoint.
    #[arg(long, env = "MCO_AGENT_KUBELET_HEALTHZ_ENDPOINT", value_name = "URL", default_value = kubelet::DEFAULT_ENDPOINT)]
    pub kubelet_healthz_endpoint: String,
    /// How often the kubelet's health is checked (each check may take as long).
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "30s")]
    pub kubelet_healthz_interval: Duration,
    /// The agent runs without a cluster: a host without a kubelet is not warned about (see
    /// [`kubelet::monitor`]). Set by `start`, not an option.
    #[arg(skip)]
    pub standalone: bool,
}

impl Default for MetricsArgs {
    fn default() -> Self {
        MetricsArgs {
            metrics_listen: DEFAULT_LISTEN.parse().expect("a valid default address"),
            no_metrics: false,
            metrics_secure_listen: None,
            metrics_tls_cert: None,
            metrics_tls_key: None,
            kubelet_healthz_enabled: true,
            kubelet_healthz_endpoint: kubelet::DEFAULT_ENDPOINT.to_string(),
            kubelet_healthz_interval: kubelet::DEFAULT_INTERVAL,
            standalone: false,
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

    /// Keeps `task` (another listener of these metrics) running as long as this handle.
    pub fn keep(&mut self, task: JoinHandle<()>) {
        self.tasks.push(task);
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
            args.standalone,
        )));
    }
    Ok(MetricsHandle {
        observer: Arc::new(MetricsObserver::new(metrics)),
        addr,
        tasks,
    })
}

/// Serves `/metrics` on `listener` until the task is dropped, each connection in its own task
/// (HTTP/1.1). A failed accept is retried: at once when the client went away, after a second
/// otherwise (out of file descriptors, say), logged as an error.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                if !is_connection_error(&e) {
                    tracing::error!(error = %e, "the metrics server could not accept a connection");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let response = respond(request.method(), request.uri().path(), &metrics);
                std::future::ready(Ok::<_, Infallible>(response))
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                tracing::trace!("metrics connection ended: {e}");
            }
        });
    }
}

/// A client that gave up before its connection was accepted: nothing to wait for.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// `GET` (or `HEAD`) `/metrics`: the metrics in the OpenMetrics text format; another method
/// there is 405 (with the allowed ones), any other path 404 (both with an empty body).
pub(super) fn respond(method: &Method, path: &str, metrics: &Metrics) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    if path != "/metrics" {
        *response.status_mut() = StatusCode::NOT_FOUND;
    } else if method == Method::GET || method == Method::HEAD {
        response.headers_mut().insert(
            CONTENT_TYPE,
            http::HeaderValue::from_static(CONTENT_TYPE_OPENMETRICS),
        );
        *response.body_mut() = Full::new(Bytes::from(metrics.encode()));
    } else {
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response
            .headers_mut()
            .insert(ALLOW, http::HeaderValue::from_static("GET,HEAD"));
    }
    response
}
