//! The config server's request handling: the input is a raw HTTP/1.1 request head, parsed with
//! httparse (hyper's parser) into what hyper hands the server, then answered by
//! `server::routes::respond` from the companion's test manifests (pools `worker` and `infra`, a
//! per-node config for `worker-0`), as an anonymous client or as node `worker-0` proven by its
//! certificate: routing, node identity, the `Accept` negotiation, serving.
//! Every answer has a known status and a true `Content-Length`; HEAD has no body; a config
//! served is Ignition of the spec `negotiate` picked for the request's `Accept` header.
#![no_main]

use std::sync::LazyLock;

use http::header::{ACCEPT, CONTENT_LENGTH};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use http_body_util::BodyExt as _;
use libfuzzer_sys::fuzz_target;
use machine_config::ParsedConfig;
use machine_config::render::RenderOptions;
use mco_companion::negotiate::negotiate;
use mco_companion::server::Peer;
use mco_companion::server::routes::respond;
use mco_companion::standalone::Standalone;

static SOURCE: LazyLock<Standalone> = LazyLock::new(|| {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../companion/tests/fixtures/manifests"
    );
    Standalone::open(dir.as_ref(), RenderOptions::default())
        .unwrap_or_else(|e| panic!("loading {dir}: {e:#}"))
});

fuzz_target!(|data: &[u8]| {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut slots);
    let Ok(httparse::Status::Complete(_)) = request.parse(data) else {
        return;
    };
    let (Some(method), Some(target)) = (request.method, request.path) else {
        return;
    };
    let (Ok(method), Ok(uri)) = (Method::from_bytes(method.as_bytes()), target.parse::<Uri>())
    else {
        return;
    };
    let mut headers = HeaderMap::new();
    for h in request.headers.iter() {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(h.name.as_bytes()),
            HeaderValue::from_bytes(h.value),
        ) else {
            return;
        };
        headers.append(name, value);
    }

    // Who the TLS layer says the client is: anonymous, or node worker-0 proven by its client
    // certificate (chosen by the input's length, so both are explored).
    let peer = if data.len() % 2 == 0 {
        Peer::Node("worker-0".to_string())
    } else {
        Peer::Anonymous
    };
    let response = respond(
        &*SOURCE,
        &method,
        &uri,
        &headers,
        "192.0.2.1:4000".parse().unwrap(),
        &peer,
    );
    let status = response.status();
    assert!(
        [200, 400, 403, 404, 405, 500].contains(&status.as_u16()),
        "unexpected status {status}"
    );
    let length: usize = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .expect("every answer has a numeric Content-Length");
    let body = futures::executor::block_on(response.into_body().collect())
        .expect("a full body")
        .to_bytes();
    if method == Method::HEAD {
        assert!(body.is_empty(), "HEAD answered with a body");
        return;
    }
    assert_eq!(body.len(), length, "Content-Length disagrees with the body");
    if status == StatusCode::OK && uri.path() != "/healthz" {
        let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
        let spec = negotiate(accept).expect("a config served for a refused Accept header");
        let served = ParsedConfig::parse(&body)
            .unwrap_or_else(|e| panic!("the config served for {spec} does not parse: {e}"));
        assert_eq!(
            served.source_version, spec,
            "served in another spec than negotiated"
        );
    }
});
