//! The metrics on the node's address, for the cluster's Prometheus: HTTPS, and every request's
//! bearer token checked as the MCD's kube-rbac-proxy checks it. A TokenReview says who the
//! token is (missing, malformed or unknown: 401); a SubjectAccessReview asks whether that user
//! may `get` the non-resource URL `/metrics`, or else the Node's `metrics` subresource
//! (neither: 403). Both are created with the agent's own credentials (the kubelet's, which the
//! Node authorizer lets create reviews). An answer that allowed a token is kept for a minute,
//! so a Prometheus scraping every 30 s costs the API server one pair of reviews a minute per
//! node. The certificate and key are read again for every connection, so a renewed pair
//! is used without a restart.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::Metrics;

/// How long a token's allowed answer is reused.
const ALLOWED_FOR: Duration = Duration::from_secs(60);

/// What the secure listener needs: where, its certificate, and the API to review tokens with.
pub struct SecureOptions {
    pub listen: SocketAddr,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The node whose `metrics` subresource a user may be allowed to get.
    pub node: String,
}

/// Who a token is and what they may do, asked of the API server.
pub struct Reviews {
    client: kube::Client,
    node: String,
    /// Tokens allowed lately, and until when.
    allowed: Mutex<HashMap<String, Instant>>,
}

/// Why a request is refused.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// 401: no bearer token, or one the API server does not know.
    Unauthenticated,
    /// 403: the user may not get the metrics.
    Forbidden(String),
    /// 500: a review could not be made.
    ReviewFailed,
}

impl Reviews {
    pub fn new(client: kube::Client, node: &str) -> Self {
        Reviews {
            client,
            node: node.to_string(),
            allowed: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the request with this `Authorization` header may read the metrics.
    pub async fn check(&self, authorization: Option<&str>) -> Result<(), Refusal> {
        let token = authorization
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(Refusal::Unauthenticated)?;
        {
            let mut allowed = self.allowed.lock().unwrap_or_else(|p| p.into_inner());
            allowed.retain(|_, until| *until > Instant::now());
            if allowed.contains_key(token) {
                return Ok(());
            }
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "metrics: the TokenReview failed");
                Refusal::Unauthenticated
            })?;
        let status = answer.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Err(Refusal::Unauthenticated),
        };
        let username = user.username.clone().unwrap_or_default();
        let spec = |non_resource, resource| SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            non_resource_attributes: non_resource,
            resource_attributes: resource,
        };
        let asks = [
            spec(
                Some(NonResourceAttributes {
                    path: Some("/metrics".into()),
                    verb: Some("get".into()),
                }),
                None,
            ),
            spec(
                None,
                Some(ResourceAttributes {
                    verb: Some("get".into()),
                    resource: Some("nodes".into()),
                    subresource: Some("metrics".into()),
                    name: Some(self.node.clone()),
                    ..Default::default()
                }),
            ),
        ];
        let api = Api::<SubjectAccessReview>::all(self.client.clone());
        for spec in asks {
            let review = SubjectAccessReview {
                spec,
                ..Default::default()
            };
            let answer = api
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| {
                    tracing::warn!(error = %e, "metrics: the SubjectAccessReview failed");
                    Refusal::ReviewFailed
                })?;
            if answer.status.is_some_and(|s| s.allowed) {
                self.allowed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(token.to_string(), Instant::now() + ALLOWED_FOR);
                return Ok(());
            }
        }
        Err(Refusal::Forbidden(format!(
            "Forbidden (user={username}, verb=get, resource=nodes, subresource=metrics)"
        )))
    }
}

/// The TLS configuration of `cert` and `key` (PEM), each error naming its file.
pub fn tls_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pem = std::fs::read(cert).with_context(|| format!("reading {}", cert.display()))?;
    let chain = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert.display()))?;
    if chain.is_empty() {
        bail!("{} holds no PEM certificate", cert.display());
    }
    let pem = std::fs::read(key).with_context(|| format!("reading {}", key.display()))?;
    let key_der = rustls_pemfile::private_key(&mut pem.as_slice())
        .with_context(|| format!("parsing {}", key.display()))?
        .with_context(|| format!("{} holds no PEM private key", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .with_context(|| {
            format!(
                "the key {} does not go with the certificate {}",
                key.display(),
                cert.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Binds `options.listen` (after checking the certificate and key) and serves until the task
/// is dropped.
pub async fn start(
    options: &SecureOptions,
    reviews: Arc<Reviews>,
    metrics: Arc<Metrics>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    tls_config(&options.cert, &options.key)?;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening for metrics on {}", options.listen))?;
    let bound = listener.local_addr().context("the listener's address")?;
    tracing::info!(addr = %bound, "serving metrics at https://{bound}/metrics (bearer tokens reviewed by the API server)");
    let (cert, key) = (options.cert.clone(), options.key.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let config = match tls_config(&cert, &key) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "metrics: no TLS certificate");
                    continue;
                }
            };
            let (reviews, metrics) = (reviews.clone(), metrics.clone());
            tokio::spawn(async move {
                let acceptor = tokio_rustls::TlsAcceptor::from(config);
                let Ok(tls) =
                    tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
                else {
                    return;
                };
                let Ok(tls) = tls else { return };
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let (reviews, metrics) = (reviews.clone(), metrics.clone());
                    async move { Ok::<_, Infallible>(respond(&request, &reviews, &metrics).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok((bound, task))
}

async fn respond<B>(
    request: &Request<B>,
    reviews: &Reviews,
    metrics: &Metrics,
) -> Response<Full<Bytes>> {
    let authorization = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let refused = |status: StatusCode, text: String| {
        let mut r = Response::new(Full::new(Bytes::from(text + "\n")));
        *r.status_mut() = status;
        r
    };
    match reviews.check(authorization).await {
        Ok(()) => super::server::respond(request.method(), request.uri().path(), metrics),
        Err(Refusal::Unauthenticated) => {
            refused(StatusCode::UNAUTHORIZED, "Unauthorized".to_string())
        }
        Err(Refusal::Forbidden(why)) => refused(StatusCode::FORBIDDEN, why),
        Err(Refusal::ReviewFailed) => refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error".to_string(),
        ),
    }
}
