//! Request routing and status codes, as the machine-config-server answers them:
//!
//! | path | GET/HEAD | other methods |
//! |---|---|---|
//! | `/config/<pool>` | 200 config, 400 bad Accept version, node name or config name, 403/404/500 from the source | 405 |
//! | `/healthz` | 200, empty | 405 |
//! | anything else | 404 | 405 |
//!
//! Every response has `Content-Length`; configs have `Content-Type: application/json`; HEAD gets
//! the headers of the GET without the body. The pool is the last segment of the path under
//! `/config/` (the MCS uses `path.Base`), percent-decoded.
//!
//! Additions to the MCS protocol (docs/companion.md, "The config server's protocol"):
//! - `X-MCO-Config: <rendered config>` asks for that rendered config of the pool, whatever the
//!   pool's status says (what `mco-agent` sends: its node's `desiredConfig`). Errors then carry a
//!   plain-text body naming the config and the pool. Without the header the answer is the MCS's.
//! - A node proves its name with its kubelet client certificate ([`super::identity`]); only a
//!   proven node gets its per-node config. The `node` query parameter and the `X-MCO-Node`
//!   header only claim a name: they are checked (a DNS subdomain; if both are given, or the
//!   client also proved a name, they must agree) and logged, never trusted.

use super::{ConfigSource, Peer, PoolRequest, ServeError};
use crate::negotiate;
use http::header::{ACCEPT, ALLOW, CONTENT_LENGTH, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::Bytes;
use std::net::SocketAddr;

/// The header a node uses to present its identity.
pub const NODE_HEADER: &str = "x-mco-node";
/// The query parameter a node uses to present its identity.
pub const NODE_QUERY: &str = "node";
/// The header naming the rendered config the client asks for.
pub const CONFIG_HEADER: &str = "x-mco-config";

/// Answers one request. Never panics on client input. A HEAD request gets the headers of the
/// GET (its `Content-Length` included) and no body, whatever the answer.
pub fn respond(
    source: &dyn ConfigSource,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    remote: SocketAddr,
    peer: &Peer,
) -> Response<Full<Bytes>> {
    let response = answer(source, method, uri, headers, remote, peer);
    if *method == Method::HEAD {
        let (parts, _) = response.into_parts();
        Response::from_parts(parts, Full::new(Bytes::new()))
    } else {
        response
    }
}

/// The answer to a GET (or HEAD) request, body included.
fn answer(
    source: &dyn ConfigSource,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    remote: SocketAddr,
    peer: &Peer,
) -> Response<Full<Bytes>> {
    let readable = *method == Method::GET || *method == Method::HEAD;
    let path = uri.path();
    if !readable {
        return not_allowed(method);
    }
    if path == "/healthz" {
        return empty(StatusCode::OK);
    }
    let Some(pool) = pool_from_path(path) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("no such path {path:?}: this server serves GET /config/<pool> and /healthz"),
        );
    };
    let accept = header_text(headers, ACCEPT.as_str());
    let user_agent = header_text(headers, USER_AGENT.as_str()).unwrap_or_default();
    let claimed = node_identity(uri, headers);
    let config = requested_config(headers);
    let (claimed, config) = match (claimed, config) {
        (Ok(claimed), Ok(config)) => (claimed, config),
        (Err(why), _) | (_, Err(why)) => {
            tracing::warn!(
                "Pool {pool:?} requested by address:{:?}: {why}",
                remote.to_string()
            );
            return text(StatusCode::BAD_REQUEST, why);
        }
    };
    let node = match peer {
        Peer::Node(node) | Peer::Token(node) => Some(node.clone()),
        Peer::Anonymous | Peer::NotANode(_) => None,
    };
    if let (Some(proven), Some(claimed)) = (&node, &claimed)
        && proven != claimed
    {
        let why = format!("the client claims node {claimed:?} but it proved to be node {proven:?}");
        tracing::warn!(
            "Pool {pool:?} requested by address:{:?}: {why}",
            remote.to_string()
        );
        return text(StatusCode::BAD_REQUEST, why);
    }
    let who = match (peer, &claimed) {
        (Peer::Node(n), _) => format!(" Node:{n:?} (certificate)"),
        (Peer::Token(n), _) => format!(" Node:{n:?} (bootstrap token)"),
        (Peer::NotANode(why), _) => format!(" Node: none ({why})"),
        (Peer::Anonymous, Some(n)) => format!(" Node:{n:?} (claimed, not proven)"),
        (Peer::Anonymous, None) => String::new(),
    };
    tracing::info!(
        "Pool {pool:?} requested by address:{:?} User-Agent:{user_agent:?} Accept-Header: {:?}{who}{}",
        remote.to_string(),
        accept.unwrap_or_default(),
        config
            .as_ref()
            .map(|c| format!(" Config:{c:?}"))
            .unwrap_or_default()
    );
    let spec = match negotiate::negotiate(accept) {
        Ok(spec) => spec,
        Err(err) => {
            tracing::error!("{err}");
            return text(StatusCode::BAD_REQUEST, err.to_string());
        }
    };
    let request = PoolRequest {
        pool,
        node,
        config,
        spec,
    };
    match source.config(&request) {
        Ok(body) => {
            let length = body.len();
            let mut response = Response::new(Full::new(body));
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
            response
        }
        Err(err) => {
            let status = match err {
                ServeError::NotFound(_) => StatusCode::NOT_FOUND,
                ServeError::Forbidden(_) => StatusCode::FORBIDDEN,
                ServeError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            tracing::error!("couldn't get config for pool {:?}: {err}", request.pool);
            // The MCS answers with an empty body, which leaves a person with curl guessing;
            // clients read only the status. An internal failure's details (paths, the API's
            // answer) stay in the server's log.
            match err {
                ServeError::Failed(_) => text(
                    status,
                    format!(
                        "the config of pool {:?} could not be served: the server's log says why",
                        request.pool
                    ),
                ),
                _ => text(status, err.to_string()),
            }
        }
    }
}

/// 405 for anything but GET and HEAD, with the `Allow` header HTTP asks for.
fn not_allowed(method: &Method) -> Response<Full<Bytes>> {
    let mut response = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method {method} is not allowed: this server answers GET and HEAD"),
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}

/// A plain-text answer (the reason of a refusal).
fn text(status: StatusCode, message: String) -> Response<Full<Bytes>> {
    let body = Bytes::from(message + "\n");
    let length = body.len();
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    response
}

/// The rendered config named by [`CONFIG_HEADER`], validated.
fn requested_config(headers: &HeaderMap) -> Result<Option<String>, String> {
    let Some(value) = headers.get(CONFIG_HEADER) else {
        return Ok(None);
    };
    let name = value
        .to_str()
        .map_err(|_| format!("{CONFIG_HEADER} is not ASCII text"))?
        .trim();
    if !is_dns_subdomain(name) {
        return Err(format!(
            "{CONFIG_HEADER} {name:?} is not a MachineConfig name (DNS subdomain)"
        ));
    }
    Ok(Some(name.to_string()))
}

/// 401 for a refused credential: a plain-text body saying what was refused (never the secret)
/// and the challenge `WWW-Authenticate: Bearer`.
pub(crate) fn unauthorized(why: String) -> Response<Full<Bytes>> {
    let mut response = text(StatusCode::UNAUTHORIZED, why);
    response.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer"),
    );
    response
}

/// 408 for a request whose body did not arrive within the request deadline; the connection
/// closes (the rest of the body is never read).
pub(crate) fn request_timeout(limit: std::time::Duration) -> Response<Full<Bytes>> {
    let mut response = text(
        StatusCode::REQUEST_TIMEOUT,
        format!("the request was not received within {limit:?}"),
    );
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A response with `status` and no body.
pub(crate) fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from_static("0"));
    response
}

/// `/config/<...>/<pool>` → the last non-empty segment, percent-decoded; `None` for other paths.
fn pool_from_path(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/config/")?;
    let segment = rest.split('/').rfind(|s| !s.is_empty())?;
    let decoded = percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()?;
    Some(decoded.into_owned())
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The node identity from the query and/or header, validated.
pub(crate) fn node_identity(uri: &Uri, headers: &HeaderMap) -> Result<Option<String>, String> {
    let from_header = match headers.get(NODE_HEADER) {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| format!("{NODE_HEADER} is not ASCII text"))?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    let mut from_query = None;
    for pair in uri.query().unwrap_or_default().split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key == NODE_QUERY {
            let value = percent_encoding::percent_decode_str(&value.replace('+', " "))
                .decode_utf8()
                .map_err(|_| "the node query parameter is not UTF-8".to_string())?
                .into_owned();
            from_query = Some(value);
        }
    }
    let node = match (from_header, from_query) {
        (Some(h), Some(q)) if h != q => {
            return Err(format!(
                "node identity disagrees: {NODE_HEADER} {h:?} but query node={q:?}"
            ));
        }
        (h, q) => h.or(q),
    };
    match node {
        Some(name) if !is_dns_subdomain(&name) => Err(format!(
            "node identity {name:?} is not a valid node name (DNS subdomain)"
        )),
        other => Ok(other),
    }
}

/// RFC 1123 subdomain, as Kubernetes requires of node names.
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests;
