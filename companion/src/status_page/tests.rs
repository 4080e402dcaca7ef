use http_body_util::BodyExt;
use mco_kube::fleet::PoolSummary;

use super::*;

#[test]
fn routes() {
    let cases = [
        (Method::GET, "/", Route::Page),
        (Method::HEAD, "/", Route::Page),
        (Method::GET, "/status.json", Route::Json),
        (Method::GET, "/healthz", Route::Healthz),
        (Method::GET, "/index.html", Route::NotFound),
        (Method::GET, "/config/worker", Route::NotFound),
        (Method::GET, "/v1/pre-reboot", Route::NotFound),
        (Method::POST, "/", Route::MethodNotAllowed),
        (Method::PUT, "/status.json", Route::MethodNotAllowed),
    ];
    for (method, path, want) in cases {
        assert_eq!(route(&method, path), want, "{method} {path}");
    }
}

fn body(response: Response<Full<Bytes>>) -> (StatusCode, http::HeaderMap, String) {
    let (parts, body) = response.into_parts();
    let bytes = futures::executor::block_on(body.collect())
        .unwrap()
        .to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8(bytes.to_vec()).unwrap(),
    )
}

#[test]
fn answers_of_reads() {
    let fleet = FleetStatus {
        pools: vec![PoolSummary {
            name: "worker".into(),
            ..PoolSummary::default()
        }],
        ..FleetStatus::default()
    };
    let ok = Read {
        at: SystemTime::UNIX_EPOCH,
        fleet: Ok(Arc::new(fleet.clone())),
    };
    let failed = Read {
        at: SystemTime::UNIX_EPOCH,
        fleet: Err("listing nodes: connection refused".into()),
    };
    // (route, read, status, content type, a piece of the body)
    let cases = [
        (
            Route::Page,
            Some(&ok),
            200,
            "text/html; charset=utf-8",
            "Pool worker",
        ),
        (
            Route::Page,
            Some(&failed),
            503,
            "text/html; charset=utf-8",
            "listing nodes: connection refused",
        ),
        (
            Route::Json,
            Some(&ok),
            200,
            "application/json",
            "\"name\": \"worker\"",
        ),
        (
            Route::Json,
            Some(&failed),
            503,
            "text/plain; charset=utf-8",
            "reading the fleet from the API: listing nodes: connection refused",
        ),
        (Route::Healthz, None, 200, "", ""),
        (
            Route::NotFound,
            None,
            404,
            "text/plain; charset=utf-8",
            "this server serves /, /status.json and /healthz",
        ),
        (
            Route::MethodNotAllowed,
            None,
            405,
            "text/plain; charset=utf-8",
            "GET and HEAD only",
        ),
    ];
    for (route, read, status, content_type, piece) in cases {
        let (got, headers, text) = body(respond(route, read, "companion-0"));
        assert_eq!(got.as_u16(), status, "{route:?}");
        let header = |name: &str| {
            headers
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default()
        };
        assert_eq!(header("content-type"), content_type, "{route:?}");
        assert_eq!(
            header("content-length"),
            text.len().to_string(),
            "{route:?}"
        );
        assert!(text.contains(piece), "{route:?}: {text}");
        if !content_type.is_empty() {
            assert_eq!(header("content-security-policy"), CONTENT_SECURITY_POLICY);
            assert_eq!(header("cache-control"), "no-store");
        }
    }
    // the JSON is the plugin's, byte for byte
    let (_, _, json) = body(respond(Route::Json, Some(&ok), "companion-0"));
    assert_eq!(json, fleet::to_json(&fleet).unwrap());
    assert_eq!(
        serde_json::from_str::<FleetStatus>(&json).unwrap(),
        fleet,
        "the JSON reads back as the fleet"
    );
}
