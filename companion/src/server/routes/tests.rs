use super::*;
use crate::server::PoolRequest;
use http_body_util::BodyExt;

/// Serves `pool|node|spec` for pool `worker`; 404 for `missing`; 500 for `broken`.
struct Echo;

impl ConfigSource for Echo {
    fn config(&self, r: &PoolRequest) -> Result<Bytes, ServeError> {
        match r.pool.as_str() {
            "missing" => Err(ServeError::NotFound("no pool missing".into())),
            "broken" => Err(ServeError::Failed("cannot render".into())),
            _ if r.config.as_deref() == Some("rendered-unknown") => Err(ServeError::NotFound(
                "no rendered config \"rendered-unknown\"".into(),
            )),
            _ => Ok(Bytes::from(format!(
                "{}|{}|{}{}",
                r.pool,
                r.node.clone().unwrap_or_default(),
                r.spec,
                r.config
                    .as_ref()
                    .map(|c| format!("|{c}"))
                    .unwrap_or_default()
            ))),
        }
    }
}

type Headers = Vec<(&'static str, &'static str)>;

fn call(method: &str, target: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
    call_as(&Peer::Anonymous, method, target, headers)
}

fn call_as(
    peer: &Peer,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap, String) {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.insert(
            http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let response = respond(
        &Echo,
        &Method::from_bytes(method.as_bytes()).unwrap(),
        &target.parse::<Uri>().unwrap(),
        &map,
        "127.0.0.1:4000".parse().unwrap(),
        peer,
    );
    let status = response.status();
    let headers = response.headers().clone();
    let body = futures::executor::block_on(response.into_body().collect())
        .unwrap()
        .to_bytes();
    (status, headers, String::from_utf8(body.to_vec()).unwrap())
}

#[test]
fn status_codes() {
    let v32 = "application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1";
    // (method, target, headers, status, the body or, for a refusal, a piece of its reason)
    let rows: Vec<(&str, &str, Headers, StatusCode, &str)> = vec![
        (
            "GET",
            "/config/worker",
            vec![],
            StatusCode::OK,
            "worker||2.2.0",
        ),
        (
            "GET",
            "/config/worker",
            vec![("accept", v32)],
            StatusCode::OK,
            "worker||3.2.0",
        ),
        (
            "HEAD",
            "/config/worker",
            vec![("accept", v32)],
            StatusCode::OK,
            "",
        ),
        (
            "GET",
            "/config/missing",
            vec![],
            StatusCode::NOT_FOUND,
            "no pool missing",
        ),
        (
            "GET",
            "/config/broken",
            vec![],
            StatusCode::INTERNAL_SERVER_ERROR,
            "pool \"broken\" could not be served: the server's log says why",
        ),
        (
            "POST",
            "/config/worker",
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "method POST",
        ),
        (
            "PUT",
            "/config/missing",
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "method PUT",
        ),
        (
            "DELETE",
            "/config/worker",
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "GET and HEAD",
        ),
        (
            "GET",
            "/config/worker",
            vec![(
                "accept",
                "application/vnd.coreos.ignition+json;version=4.0.0",
            )],
            StatusCode::BAD_REQUEST,
            "4.0.0",
        ),
        ("GET", "/healthz", vec![], StatusCode::OK, ""),
        ("HEAD", "/healthz", vec![], StatusCode::OK, ""),
        (
            "POST",
            "/healthz",
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "method POST",
        ),
        (
            "GET",
            "/",
            vec![],
            StatusCode::NOT_FOUND,
            "no such path \"/\"",
        ),
        ("HEAD", "/nope", vec![], StatusCode::NOT_FOUND, ""),
        (
            "GET",
            "/config",
            vec![],
            StatusCode::NOT_FOUND,
            "GET /config/<pool> and /healthz",
        ),
        (
            "GET",
            "/config/",
            vec![],
            StatusCode::NOT_FOUND,
            "\"/config/\"",
        ),
        (
            "GET",
            "/healthz/",
            vec![],
            StatusCode::NOT_FOUND,
            "\"/healthz/\"",
        ),
        (
            "PATCH",
            "/",
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "method PATCH",
        ),
        (
            "OPTIONS",
            "/healthz",
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "method OPTIONS",
        ),
        // path.Base semantics and percent-decoding of the pool
        (
            "GET",
            "/config/x/worker",
            vec![],
            StatusCode::OK,
            "worker||2.2.0",
        ),
        (
            "GET",
            "/config/worker/",
            vec![],
            StatusCode::OK,
            "worker||2.2.0",
        ),
        (
            "GET",
            "/config/wor%6Ber",
            vec![],
            StatusCode::OK,
            "worker||2.2.0",
        ),
    ];
    for (method, target, headers, status, body) in rows {
        let (got, response_headers, got_body) = call(method, target, &headers);
        assert_eq!(got, status, "{method} {target}");
        let length: usize = response_headers[CONTENT_LENGTH]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        // HEAD announces the length of what GET would send, and sends nothing
        let get_body = call("GET", target, &headers).2;
        if method == "HEAD" {
            assert_eq!(got_body, "", "{method} {target}");
        }
        if status == StatusCode::OK {
            assert_eq!(got_body, body, "{method} {target}");
        } else {
            assert!(got_body.contains(body), "{method} {target}: {got_body:?}");
        }
        match (status, target.starts_with("/config/")) {
            (StatusCode::OK, true) => {
                assert_eq!(response_headers[CONTENT_TYPE], "application/json");
                assert_eq!(length, get_body.len(), "{method} {target}");
            }
            (StatusCode::OK, false) => assert_eq!(length, 0, "{method} {target}"),
            _ => {
                // every refusal says why, to a person with curl too
                assert_eq!(
                    response_headers[CONTENT_TYPE], "text/plain; charset=utf-8",
                    "{method} {target}"
                );
                assert!(length > 1, "{method} {target}");
                if method == "GET" {
                    assert_eq!(length, got_body.len(), "{method} {target}");
                }
            }
        }
        if status == StatusCode::METHOD_NOT_ALLOWED {
            assert_eq!(response_headers[ALLOW], "GET, HEAD", "{method} {target}");
        }
    }
}

#[test]
fn only_a_certificate_proves_a_node() {
    let node = |n: &str| Peer::Node(n.to_string());
    let admin = Peer::NotANode("CN system:admin".into());
    // (peer, target, headers, status, body: the answer, or for refusals a part of the reason)
    let rows: Vec<(Peer, &str, Headers, StatusCode, &str)> = vec![
        // a claimed name is checked but selects nothing
        (
            Peer::Anonymous,
            "/config/worker?node=worker-0",
            vec![],
            StatusCode::OK,
            "worker||2.2.0",
        ),
        (
            Peer::Anonymous,
            "/config/worker",
            vec![("x-mco-node", "w1.example.com")],
            StatusCode::OK,
            "worker||2.2.0",
        ),
        (
            admin.clone(),
            "/config/worker?node=a",
            vec![],
            StatusCode::OK,
            "worker||2.2.0",
        ),
        // a certificate does, with or without a matching claim
        (
            node("a"),
            "/config/worker",
            vec![],
            StatusCode::OK,
            "worker|a|2.2.0",
        ),
        (
            node("a"),
            "/config/worker?node=a",
            vec![("x-mco-node", "a")],
            StatusCode::OK,
            "worker|a|2.2.0",
        ),
        (
            node("a"),
            "/config/worker?x=1&node=b&y",
            vec![],
            StatusCode::BAD_REQUEST,
            "it proved to be node \"a\"",
        ),
        // malformed claims
        (
            Peer::Anonymous,
            "/config/worker?node=a",
            vec![("x-mco-node", "b")],
            StatusCode::BAD_REQUEST,
            "disagrees",
        ),
        (
            Peer::Anonymous,
            "/config/worker?node=Bad_Name",
            vec![],
            StatusCode::BAD_REQUEST,
            "Bad_Name",
        ),
        (
            Peer::Anonymous,
            "/config/worker?node=",
            vec![],
            StatusCode::BAD_REQUEST,
            "not a valid node name",
        ),
        (
            Peer::Anonymous,
            "/config/worker?node=%ff",
            vec![],
            StatusCode::BAD_REQUEST,
            "not UTF-8",
        ),
        (
            Peer::Anonymous,
            "/config/worker",
            vec![("x-mco-node", "-x")],
            StatusCode::BAD_REQUEST,
            "-x",
        ),
    ];
    for (peer, target, headers, status, body) in rows {
        let (got, _, got_body) = call_as(&peer, "GET", target, &headers);
        assert_eq!(got, status, "{peer:?} {target} {headers:?}: {got_body}");
        if status == StatusCode::OK {
            assert_eq!(got_body, body, "{peer:?} {target} {headers:?}");
        } else {
            assert!(
                got_body.contains(body),
                "{peer:?} {target} {headers:?}: {got_body}"
            );
        }
    }
}

#[test]
fn a_named_config_is_passed_on_and_its_refusal_explained() {
    let (status, _, body) = call(
        "GET",
        "/config/worker",
        &[("x-mco-config", "rendered-worker-1")],
    );
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "worker||2.2.0|rendered-worker-1")
    );
    // an error names what was asked
    let (status, headers, body) = call(
        "GET",
        "/config/worker",
        &[("x-mco-config", "rendered-unknown")],
    );
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("\"rendered-unknown\""), "{body}");
    assert_eq!(headers[CONTENT_TYPE], "text/plain; charset=utf-8");
    let (status, _, body) = call("GET", "/config/missing", &[]);
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::NOT_FOUND, "not found: no pool missing\n")
    );
    let (status, _, body) = call("GET", "/config/worker", &[("x-mco-config", "Not A Name")]);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("Not A Name"), "{body}");
}

/// Found by the fuzzer: a refusal with a reason (a bad node name here) answered HEAD with the
/// reason as its body. HEAD gets the GET's status and headers, its length included, and no body.
#[test]
fn head_gets_the_headers_of_a_refusal_and_no_body() {
    let cases: [&[(&str, &str)]; 3] = [
        &[("x-mco-node", "not a node")],
        &[("x-mco-config", "Not A Name")],
        &[("x-mco-config", "rendered-unknown")],
    ];
    for headers in cases {
        let (get_status, get_headers, get_body) = call("GET", "/config/worker", headers);
        assert!(!get_body.is_empty(), "{headers:?}: the GET explains");
        let (status, head_headers, body) = call("HEAD", "/config/worker", headers);
        assert_eq!(status, get_status, "{headers:?}");
        assert_eq!(body, "", "{headers:?}");
        assert_eq!(head_headers, get_headers, "{headers:?}");
    }
}

#[test]
fn dns_subdomain_rules() {
    for ok in ["a", "node-1", "n1.example.com", &"a".repeat(63)] {
        assert!(is_dns_subdomain(ok), "{ok}");
    }
    for bad in [
        "",
        "A",
        "a_b",
        "-a",
        "a-",
        "a..b",
        ".a",
        &"a".repeat(64),
        &"a.".repeat(127),
    ] {
        assert!(!is_dns_subdomain(bad), "{bad}");
    }
}
