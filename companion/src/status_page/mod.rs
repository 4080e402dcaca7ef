//! The status page: the fleet as `kubectl mco status` shows it, served on a listener of its
//! own (`serve --status-listen`, plain HTTP, cluster mode), never on the config server's:
//!
//! | path | GET/HEAD | other methods |
//! |---|---|---|
//! | `/` | 200 the page ([`html`]), 503 the page naming the API error | 405 |
//! | `/status.json` | 200 the [`FleetStatus`], 503 the API error (plain text) | 405 |
//! | `/healthz` | 200, empty | 405 |
//! | anything else | 404, naming the paths served (plain text) | 405, with `Allow` |
//!
//! `/status.json` is `kubectl mco status -o json`: the same [`mco_kube::fleet::read`] (pools,
//! Nodes, MachineConfigNodes, the MCD's events in every namespace) and the same
//! [`mco_kube::fleet::to_json`]. Every replica serves it from its own read of the API, not from
//! the leader's controller state, so the page is the same whichever replica answers; a read is
//! reused for [`REUSE`] (concurrent requests wait for one read), so no number of open pages
//! costs the API server more than four LISTs per [`REUSE`].
//!
//! Why a listener of its own (docs/security.md, "The status page"): the config listener
//! answers every node of the machine network and serves the pool's config (its pull secret) to
//! anyone reaching it; the page's listener answers nothing but the page, so it can be opened to
//! administrators (a port-forward, a proxy that authenticates) without opening the configs, and
//! the config listener's answers stay the MCS's.

pub mod html;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::header::{ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use mco_kube::fleet::{self, FleetStatus};
use tokio::net::TcpListener;
use tokio::sync::{Mutex, Semaphore, watch};

use crate::server::Limits;
use crate::server::guard::{Admitted, PerClient, WriteTimeout, next_admitted};
use crate::server::routes::empty;

/// How long one read of the fleet answers requests.
pub const REUSE: Duration = Duration::from_secs(2);

/// Connections the page's listener serves at once (a few administrators' browsers).
pub const MAX_CONNECTIONS: usize = 64;

/// The page's only script-free, self-contained policy: nothing loads, nothing runs, the inline
/// style applies. A browser enforces it even if an API string escaped the escaping.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

/// One read of the fleet: when, and what it gave.
#[derive(Clone)]
pub struct Read {
    pub at: SystemTime,
    pub fleet: Result<Arc<FleetStatus>, String>,
}

/// The page's state: the API client, this replica's name, the last read.
pub struct StatusPage {
    client: kube::Client,
    replica: String,
    last: Mutex<Option<(Instant, Read)>>,
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Page,
    Json,
    Healthz,
    NotFound,
    MethodNotAllowed,
}

/// The route of `method` on `path`.
pub fn route(method: &Method, path: &str) -> Route {
    let readable = *method == Method::GET || *method == Method::HEAD;
    match (path, readable) {
        (_, false) => Route::MethodNotAllowed,
        ("/", true) => Route::Page,
        ("/status.json", true) => Route::Json,
        ("/healthz", true) => Route::Healthz,
        _ => Route::NotFound,
    }
}

impl StatusPage {
    /// The page of the cluster `client` reads, served by replica `replica`.
    pub fn new(client: kube::Client, replica: String) -> Self {
        StatusPage {
            client,
            replica,
            last: Mutex::new(None),
        }
    }

    /// The fleet: the last read if younger than [`REUSE`], else a new one.
    pub async fn read(&self) -> Read {
        let mut last = self.last.lock().await;
        if let Some((when, read)) = last.as_ref()
            && when.elapsed() < REUSE
        {
            return read.clone();
        }
        let fleet = fleet::read(&self.client, None)
            .await
            .map(Arc::new)
            .map_err(|e| {
                tracing::warn!("status page: reading the fleet: {e}");
                e.to_string()
            });
        let read = Read {
            at: SystemTime::now(),
            fleet,
        };
        *last = Some((Instant::now(), read.clone()));
        read
    }

    /// The answer to `method` on `path` (a HEAD gets the GET's headers, no body).
    pub async fn answer(&self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        let route = route(method, path);
        let read = match route {
            Route::Page | Route::Json => Some(self.read().await),
            _ => None,
        };
        let response = respond(route, read.as_ref(), &self.replica);
        if *method == Method::HEAD {
            let (parts, _) = response.into_parts();
            Response::from_parts(parts, Full::new(Bytes::new()))
        } else {
            response
        }
    }
}

/// The response to `route`, with `read` for the page and the JSON.
pub fn respond(route: Route, read: Option<&Read>, replica: &str) -> Response<Full<Bytes>> {
    let at = || {
        read.map(|r| humantime::format_rfc3339_seconds(r.at).to_string())
            .unwrap_or_default()
    };
    match (route, read.map(|r| &r.fleet)) {
        (Route::Page, Some(Ok(fleet))) => with_body(
            StatusCode::OK,
            "text/html; charset=utf-8",
            html::page(fleet, replica, &at()),
        ),
        (Route::Page, Some(Err(e))) => with_body(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/html; charset=utf-8",
            html::error_page(e, replica, &at()),
        ),
        (Route::Json, Some(Ok(fleet))) => match fleet::to_json(fleet.as_ref()) {
            Ok(json) => with_body(StatusCode::OK, "application/json", json),
            Err(e) => with_body(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain; charset=utf-8",
                format!("writing the fleet as JSON: {e}\n"),
            ),
        },
        (Route::Json, Some(Err(e))) => with_body(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            format!("reading the fleet from the API: {e}\n"),
        ),
        (Route::Page | Route::Json, None) => with_body(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            "the fleet was not read\n".to_string(),
        ),
        (Route::Healthz, _) => empty(StatusCode::OK),
        (Route::NotFound, _) => with_body(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "no such page: this server serves /, /status.json and /healthz\n".to_string(),
        ),
        (Route::MethodNotAllowed, _) => {
            let mut response = with_body(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain; charset=utf-8",
                "this server answers GET and HEAD only\n".to_string(),
            );
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            response
        }
    }
}

fn with_body(
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<Full<Bytes>> {
    let body = Bytes::from(body);
    let length = body.len();
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    // the fleet changes: a reload asks again
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Serves the page on `listener` (plain HTTP/1.1) until `shutdown` turns true, with the config
/// server's header and write timeouts, its per-client cap and [`MAX_CONNECTIONS`].
pub async fn serve(
    listener: TcpListener,
    page: Arc<StatusPage>,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let clients = Arc::new(PerClient::default());
    let limits = Arc::new(limits);
    while let Some(Admitted {
        stream,
        remote,
        permits,
    }) = next_admitted(
        &listener,
        &slots,
        &clients,
        limits.max_connections_per_client,
        &mut shutdown,
        "status page: ",
    )
    .await
    {
        let stream = WriteTimeout::new(stream, limits.write_timeout);
        let (page, limits, mut stopping) = (page.clone(), limits.clone(), shutdown.clone());
        tokio::spawn(async move {
            let _permits = permits;
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let page = page.clone();
                async move {
                    Ok::<_, Infallible>(page.answer(request.method(), request.uri().path()).await)
                }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .max_buf_size(limits.max_header_bytes.max(8192))
                .max_headers(limits.max_headers)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                _ = async { stopping.wait_for(|stop| *stop).await.map(|_| ()) } => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = ended {
                tracing::debug!(%remote, "status page: connection ended: {err}");
            }
        });
    }
}

#[cfg(test)]
mod tests;
