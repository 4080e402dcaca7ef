//! Accept loop and per-connection handling, with the limits that keep a hostile or broken
//! client from hurting the server: a cap on open connections and one per client (an IPv4
//! address, an IPv6 /64), a TLS handshake timeout, a header read timeout (which also closes idle
//! keep-alive connections), a deadline for the whole request (headers and body, counted from its
//! first byte: a body sent a byte at a time cannot hold a connection), a write timeout (a client
//! that stops reading its response), and caps on header size and count (hyper answers 431
//! beyond them). A request body is read only by FleetLock; a config route answers without it
//! and hyper then closes the connection instead of draining the body.

use super::bootstrap::{Authenticated, BootstrapTokens};
use super::guard::{Admitted, Clocked, PerClient, RequestClock, WriteTimeout, next_admitted};
use super::{ConfigSource, Peer, identity, routes};
use crate::fleet_lock::{self, FleetLock};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

/// Connection limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Connections served at once from one client (an IPv4 address, an IPv6 /64); a further
    /// one is closed at once. Nodes behind a NAT or a load balancer that hides their addresses
    /// share one address.
    pub max_connections_per_client: usize,
    /// Time a response write may make no progress (the client reads nothing) before the
    /// connection is dropped.
    pub write_timeout: Duration,
    /// Time a client gets to complete the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time a client gets to send a request's headers (also the keep-alive idle limit).
    pub header_read_timeout: Duration,
    /// Time a client gets to send a whole request, headers and body, from its first byte; a
    /// body still incomplete then is answered 408 and the connection closed.
    pub request_timeout: Duration,
    /// Read buffer size, which bounds the request head (minimum 8192).
    pub max_header_bytes: usize,
    /// Number of request headers accepted.
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_connections_per_client: 64,
            write_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(15),
            request_timeout: Duration::from_secs(20),
            max_header_bytes: 16 * 1024,
            max_headers: 64,
        }
    }
}

/// Serves connections from `listener` until `shutdown` turns true; TLS when `tls` is given.
/// `bootstrap`: the first-boot tokens nodes may prove their names with (over TLS only).
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    bootstrap: Option<Arc<BootstrapTokens>>,
    source: Arc<dyn ConfigSource>,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
) {
    serve_with_fleet_lock(listener, tls, bootstrap, source, None, limits, shutdown).await
}

/// [`serve`], also answering FleetLock's `/v1/pre-reboot` and `/v1/steady-state` with
/// `fleet_lock` ([`crate::fleet_lock`]).
pub async fn serve_with_fleet_lock(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    bootstrap: Option<Arc<BootstrapTokens>>,
    source: Arc<dyn ConfigSource>,
    fleet_lock: Option<Arc<FleetLock>>,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let clients = Arc::new(PerClient::default());
    let limits = Arc::new(limits);
    let stopping = shutdown.clone();
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
        "",
    )
    .await
    {
        let _ = stream.set_nodelay(true);
        let stream = WriteTimeout::new(stream, limits.write_timeout);
        let source = source.clone();
        let limits = limits.clone();
        let acceptor = acceptor.clone();
        let bootstrap = bootstrap.clone();
        let fleet_lock = fleet_lock.clone();
        let stopping = stopping.clone();
        tokio::spawn(async move {
            let _permits = permits;
            match acceptor {
                Some(acceptor) => {
                    serve_tls(
                        stream,
                        remote,
                        acceptor,
                        bootstrap,
                        (source, fleet_lock),
                        &limits,
                        stopping,
                    )
                    .await
                }
                None => {
                    let connection = Connection {
                        remote,
                        peer: Peer::Anonymous,
                        tls: false,
                        bootstrap,
                    };
                    serve_http(stream, connection, (source, fleet_lock), &limits, stopping).await
                }
            }
        });
    }
    // Stopping: the listener closes (new clients go to another replica), requests in flight
    // are answered, idle connections are closed; for IN_FLIGHT_GRACE at most.
    drop(listener);
    let all = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    if tokio::time::timeout(IN_FLIGHT_GRACE, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("connections still open {IN_FLIGHT_GRACE:?} after the stop; closing them");
    }
}

/// How long a stopping server waits for the requests in flight: under the Deployment's
/// `terminationGracePeriodSeconds` (30 s), with room for the leader to release its Lease.
pub const IN_FLIGHT_GRACE: Duration = Duration::from_secs(20);

async fn serve_tls(
    stream: WriteTimeout<TcpStream>,
    remote: SocketAddr,
    acceptor: TlsAcceptor,
    bootstrap: Option<Arc<BootstrapTokens>>,
    services: Services,
    limits: &Limits,
    stopping: watch::Receiver<bool>,
) {
    match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => {
            // the handshake verified a presented certificate against the client CA
            let peer = match tls.get_ref().1.peer_certificates().and_then(|c| c.first()) {
                Some(cert) => match identity::node_of_certificate(cert) {
                    Ok(node) => Peer::Node(node),
                    Err(why) => Peer::NotANode(why),
                },
                None => Peer::Anonymous,
            };
            let connection = Connection {
                remote,
                peer,
                tls: true,
                bootstrap,
            };
            serve_http(tls, connection, services, limits, stopping).await
        }
        Ok(Err(err)) => tracing::debug!(%remote, "TLS handshake failed: {err}"),
        Err(_) => tracing::debug!(%remote, "TLS handshake timed out"),
    }
}

/// One answer, ready or (FleetLock) still to be worked out.
type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<hyper::Response<Full<Bytes>>, Infallible>> + Send>>;

/// What one connection established about its client.
struct Connection {
    remote: SocketAddr,
    peer: Peer,
    tls: bool,
    bootstrap: Option<Arc<BootstrapTokens>>,
}

/// What a listener answers with: configs, and FleetLock when on.
type Services = (Arc<dyn ConfigSource>, Option<Arc<FleetLock>>);

async fn serve_http<S>(
    stream: S,
    connection: Connection,
    services: Services,
    limits: &Limits,
    mut stopping: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let remote = connection.remote;
    let (source, fleet_lock) = services;
    let clock = RequestClock::default();
    let stream = Clocked::new(stream, clock.clone());
    let request_timeout = limits.request_timeout;
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let deadline = clock.take() + request_timeout;
        let (uri, headers) = (request.uri(), request.headers());
        let peer = match BootstrapTokens::authenticate(
            connection.bootstrap.as_deref(),
            connection.tls,
            &connection.peer,
            uri,
            headers,
        ) {
            Authenticated::Connection => connection.peer.clone(),
            Authenticated::Token(node) => Peer::Token(node),
            Authenticated::Refused(why) => {
                return Box::pin(std::future::ready(Ok::<_, Infallible>(
                    routes::unauthorized(why),
                ))) as ResponseFuture;
            }
        };
        if let Some(lock) = &fleet_lock
            && fleet_lock::is_fleet_lock_path(uri.path())
        {
            let (lock, over_tls, clock) = (lock.clone(), connection.tls, clock.clone());
            return Box::pin(async move {
                let (parts, body) = request.into_parts();
                let limited = http_body_util::Limited::new(body, fleet_lock::MAX_BODY_BYTES);
                let collect = http_body_util::BodyExt::collect(limited);
                let Ok(collected) =
                    tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), collect)
                        .await
                else {
                    tracing::debug!(%remote, "request body not received within {request_timeout:?}");
                    return Ok::<_, Infallible>(routes::request_timeout(request_timeout));
                };
                // the bytes read for this body are not the next request's start
                clock.reset();
                let bytes = collected.map(|b| b.to_bytes()).ok();
                let response = lock
                    .answer(
                        &parts.method,
                        parts.uri.path(),
                        &parts.headers,
                        bytes.as_deref(),
                        &peer,
                        over_tls,
                    )
                    .await;
                Ok::<_, Infallible>(response)
            }) as ResponseFuture;
        }
        let response = routes::respond(
            source.as_ref(),
            request.method(),
            uri,
            headers,
            remote,
            &peer,
        );
        Box::pin(std::future::ready(Ok::<_, Infallible>(response))) as ResponseFuture
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .max_headers(limits.max_headers)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        _ = async { stopping.wait_for(|stop| *stop).await.map(|_| ()) } => {
            // the request in flight is answered, then the connection closes
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(err) = ended {
        tracing::debug!(%remote, "connection ended: {err}");
    }
}
