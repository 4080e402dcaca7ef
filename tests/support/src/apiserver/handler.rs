//! The HTTP front: authentication, impersonation, authorization and its audit, fault
//! injection, request log, then discovery or the resource verbs (see `resource`).

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::{BodyExt, Full, Limited, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use serde_json::Value;

use super::attributes::{self, Attributes};
use super::audit::AuditEvent;
use super::faults::FaultAction;
use super::identity::Identity;
use super::openapi;
use super::registry;
use super::resource::{Call, Query};
use super::routes::{self, Route};
use super::status::ApiError;
use super::{RequestRecord, ServerState};
use super::{authn, authz};

pub type Body = BoxBody<Bytes, std::io::Error>;

const MAX_BODY: usize = 3 * 1024 * 1024;

fn full(bytes: Vec<u8>) -> Body {
    Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed()
}

pub(super) fn json_response(code: u16, body: &Value) -> Response<Body> {
    let mut response = Response::new(full(serde_json::to_vec(body).unwrap_or_default()));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(err: &ApiError) -> Response<Body> {
    let mut response = json_response(err.code, &err.to_status());
    if err.code == 429 && err.details.is_none() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}

/// Entry point for every request: authentication, impersonation, authorization (each
/// decision audited), fault injection, then the request itself.
pub async fn handle(
    state: Arc<ServerState>,
    req: Request<Incoming>,
    peer: Option<Identity>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().unwrap_or_default().to_string();
    let query = Query::parse(&raw_query);
    let attrs = attributes::from_request(method.as_str(), &path, query.pairs());
    let public = matches!(routes::parse(&path), Route::Health | Route::Version);
    let (response, user) = match state
        .authn
        .authenticate(req.headers(), peer.as_ref(), public)
    {
        Err(err) => (error_response(&err), String::new()),
        Ok(requester) => {
            let user = requester.user.clone();
            let response = authorized(&state, req, requester, &attrs, query, &raw_query).await;
            (response, user)
        }
    };
    state.record(RequestRecord {
        method: method.to_string(),
        path,
        query: raw_query,
        user,
        status: response.status().as_u16(),
    });
    Ok(response)
}

/// Serves an authenticated request as the identity it impersonates, if allowed to.
async fn authorized(
    state: &Arc<ServerState>,
    req: Request<Incoming>,
    requester: Identity,
    attrs: &Attributes,
    query: Query,
    raw_query: &str,
) -> Response<Body> {
    let may = |a: &Attributes| {
        let verdict = authz::authorize(state.authorization, &state.store, &requester, a);
        if verdict.allowed {
            Ok(())
        } else {
            Err(authz::forbidden(&requester, a, &verdict.reason))
        }
    };
    let (who, impersonator) = match authn::impersonate(req.headers(), &may) {
        Err(err) => return error_response(&err),
        Ok(Some(target)) => (target, Some(requester.clone())),
        Ok(None) => (requester.clone(), None),
    };
    let verdict = authz::authorize(state.authorization, &state.store, &who, attrs);
    let response = if !verdict.allowed {
        error_response(&authz::forbidden(&who, attrs, &verdict.reason))
    } else {
        let path = attrs.path.clone();
        match inject_faults(state, req.method().as_str(), &path, raw_query).await {
            Some(response) => response,
            None => serve(state, req, &path, query, &who).await,
        }
    };
    let code = response.status().as_u16();
    state.audit.record(AuditEvent::new(
        &who,
        impersonator.as_ref(),
        attrs,
        &verdict,
        code,
    ));
    response
}

async fn inject_faults(
    state: &ServerState,
    method: &str,
    path: &str,
    query: &str,
) -> Option<Response<Body>> {
    for action in state.faults.check(method, path, query) {
        match action {
            FaultAction::Delay(delay) => tokio::time::sleep(delay).await,
            FaultAction::Fail(code) => return Some(error_response(&ApiError::injected(code))),
            FaultAction::Hang => std::future::pending::<()>().await,
        }
    }
    None
}

async fn serve(
    state: &Arc<ServerState>,
    req: Request<Incoming>,
    path: &str,
    query: Query,
    who: &Identity,
) -> Response<Body> {
    let method = req.method().clone();
    let headers = req.headers().clone();
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return error_response(&ApiError::new(
                413,
                "RequestEntityTooLarge",
                "the request body is too large or was not received",
            ));
        }
    };
    let route = routes::parse(path);
    let discovery = |doc: Option<Value>| match doc {
        Some(doc) => json_response(200, &doc),
        None => error_response(&ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    };
    if method != Method::GET && !matches!(route, Route::Resource(_)) {
        return error_response(&ApiError::method_not_allowed(format!(
            "{method} is not allowed on {path}"
        )));
    }
    match route {
        Route::Health => {
            let mut r = Response::new(full(b"ok".to_vec()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain"),
            );
            r
        }
        Route::Version => json_response(200, &registry::version()),
        Route::CoreVersions => json_response(200, &registry::core_versions(&state.address)),
        Route::Groups => json_response(200, &registry::group_list()),
        Route::Group(g) => discovery(registry::group(&g)),
        Route::GroupVersion(g, v) => discovery(registry::resource_list(&g, &v)),
        Route::OpenApiV2 => {
            let mut r = Response::new(full(openapi::v2_document()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(openapi::V2_PROTOBUF),
            );
            r
        }
        Route::OpenApiV3(None) => json_response(200, &openapi::root()),
        Route::OpenApiV3(Some(gv)) => discovery(openapi::group_version(&gv)),
        Route::OpenApi | Route::NotFound => discovery(None),
        Route::Resource(rp) => {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_string();
            let accept = headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_string();
            let call = Call {
                state,
                who,
                rp,
                query,
                body,
                content_type,
                accept,
            };
            match call.dispatch(&method).await {
                Ok(response) => response,
                Err(err) => error_response(&err),
            }
        }
    }
}
