//! One table per Ignition rule, for spec 3.x configs, against what Ignition's validator
//! (`config/v3_*/types`, which the MCO runs on every config at spec 3.5) and the MCO's own rules
//! (`pkg/controller/common/helpers.go`) decide. The rules for spec 2.2 are in `rules_v2_2.rs`.

mod common;

use common::{Want::*, case, check};
use serde_json::json;

/// A config of `version` with `section` merged in.
fn v(version: &str, mut section: serde_json::Value) -> serde_json::Value {
    section["ignition"]["version"] = json!(version);
    section
}

/// `ignition.config.replace`: optional; an empty source is no source (Ignition's
/// `validateURLNilOK`; `IgnitionConfig.Validate` requires only merge sources). A remote source is
/// accepted: the MCD never reads the `ignition` section.
#[test]
fn replaced_config_source_is_optional() {
    let replace = |r: serde_json::Value| json!({"ignition": {"config": {"replace": r}}});
    check(vec![
        case("absent", v("3.2.0", json!({})), Accepted),
        case("empty object", v("3.2.0", replace(json!({}))), Accepted),
        case(
            "only an empty verification (a real export)",
            v("3.2.0", replace(json!({"verification": {}}))),
            Accepted,
        ),
        case(
            "source null (Go's 3.0 marshalling)",
            v(
                "3.0.0",
                replace(json!({"source": null, "verification": {}})),
            ),
            Accepted,
        ),
        case(
            "empty source",
            v("3.4.0", replace(json!({"source": ""}))),
            Yields("/ignition/config/replace/source", json!("")),
        ),
        case(
            "remote source",
            v(
                "3.1.0",
                replace(json!({"source": "https://example.com/worker.ign"})),
            ),
            Accepted,
        ),
        case(
            "data source",
            v("3.1.0", replace(json!({"source": "data:,%7B%7D"}))),
            Accepted,
        ),
        case(
            "unknown scheme",
            v("3.1.0", replace(json!({"source": "ftp://example.com/x"}))),
            Refused(&[
                "$.ignition.config.replace.source: replacing config: invalid url scheme (ftp: URL of 19 bytes)",
            ]),
        ),
        case(
            "bad data URL",
            v("3.1.0", replace(json!({"source": "data:,a b"}))),
            Refused(&[
                "$.ignition.config.replace.source: replacing config: invalid data URL: invalid character at byte 1 of the percent-encoded data (data: URL of 9 bytes)",
            ]),
        ),
        case(
            "hash without source",
            v(
                "3.1.0",
                replace(json!({"verification": {"hash": format!("sha512-{}", "0".repeat(128))}})),
            ),
            Refused(&[
                "$.ignition.config.replace.verification.hash: replacing config: source must be specified if verification is specified",
            ]),
        ),
    ]);
}

/// `ignition.config.merge`: each needs a source (Ignition 3.1+, and the MCD validates every
/// config at 3.5, so 3.0 too); remote sources are accepted and never fetched; a source twice is
/// a duplicate (Ignition keys merged configs by source).
#[test]
fn merged_config_sources() {
    let merge = |m: serde_json::Value| json!({"ignition": {"config": {"merge": m}}});
    check(vec![
        case(
            "remote",
            v(
                "3.2.0",
                merge(
                    json!([{"source": "https://example.com/a.ign"}, {"source": "s3://bucket/b.ign"}]),
                ),
            ),
            Accepted,
        ),
        case(
            "gs needs 3.2",
            v("3.1.0", merge(json!([{"source": "gs://bucket/a.ign"}]))),
            Refused(&[
                "$.ignition.config.merge.0.source: a gs:// source requires spec version 3.2.0 or later, but the config declares 3.1.0",
            ]),
        ),
        case(
            "absent source",
            v("3.0.0", merge(json!([{}]))),
            Refused(&["$.ignition.config.merge.0.source: merged config 0: source is required"]),
        ),
        case(
            "empty source",
            v("3.3.0", merge(json!([{"source": ""}]))),
            Refused(&["$.ignition.config.merge.0.source: merged config 0: source is required"]),
        ),
        case(
            "duplicate source",
            v(
                "3.3.0",
                merge(json!([{"source": "https://x/a"}, {"source": "https://x/a"}])),
            ),
            Refused(&[
                "$.ignition.config.merge.1: merged config 1: duplicate entry defined: the same source as $.ignition.config.merge.0",
            ]),
        ),
        case(
            "empty S3 versionId",
            v(
                "3.3.0",
                merge(json!([{"source": "s3://bucket/a?versionId="}])),
            ),
            Refused(&[
                "$.ignition.config.merge.0.source: merged config 0: invalid S3 object VersionId (s3: URL of 24 bytes)",
            ]),
        ),
        case(
            "S3 access point ARN",
            v(
                "3.4.0",
                merge(
                    json!([{"source": "arn:aws:s3:us-west-1:123456789012:accesspoint/test/object/some/path/config.ign"}]),
                ),
            ),
            Accepted,
        ),
        case(
            "ARN of another service",
            v(
                "3.4.0",
                merge(json!([{"source": "arn:aws:iam::123456789012:user/x"}])),
            ),
            Refused(&[
                "$.ignition.config.merge.0.source: merged config 0: invalid S3 ARN format (arn: URL of 32 bytes)",
            ]),
        ),
        case(
            "HTTP headers on a data source",
            v(
                "3.2.0",
                merge(
                    json!([{"source": "data:,%7B%7D", "httpHeaders": [{"name": "Authorization", "value": "Bearer s3cret"}]}]),
                ),
            ),
            Refused(&[
                "$.ignition.config.merge.0.httpHeaders: merged config 0: cannot use HTTP headers with this source scheme (data: URL of 12 bytes)",
            ]),
        ),
        case(
            "HTTP header without a value, twice",
            v(
                "3.2.0",
                merge(
                    json!([{"source": "https://x/a", "httpHeaders": [{"name": "A", "value": ""}, {"name": "A"}]}]),
                ),
            ),
            Refused(&[
                "$.ignition.config.merge.0.httpHeaders.0.value: merged config 0: unable to parse HTTP header \"A\": empty value",
                "$.ignition.config.merge.0.httpHeaders.1: merged config 0: duplicate entry defined: header \"A\" is already at $.ignition.config.merge.0.httpHeaders.0",
            ]),
        ),
    ]);
}

/// `ignition.security.tls.certificateAuthorities`: a source is required (3.0's CA source is a
/// plain string, 3.1+ requires it); remote ones are accepted (never fetched).
#[test]
fn certificate_authorities() {
    let cas = |c: serde_json::Value| json!({"ignition": {"security": {"tls": {"certificateAuthorities": c}}}});
    check(vec![
        case(
            "remote",
            v("3.0.0", cas(json!([{"source": "https://x/ca.pem"}]))),
            Accepted,
        ),
        case(
            "inline",
            v("3.1.0", cas(json!([{"source": "data:,CA"}]))),
            Accepted,
        ),
        case(
            "no source",
            v("3.1.0", cas(json!([{}]))),
            Refused(&[
                "$.ignition.security.tls.certificateAuthorities.0.source: certificate authority 0: source is required",
            ]),
        ),
        case(
            "twice",
            v(
                "3.1.0",
                cas(json!([{"source": "data:,CA"}, {"source": "data:,CA"}])),
            ),
            Refused(&[
                "$.ignition.security.tls.certificateAuthorities.1: certificate authority 1: duplicate entry defined: the same source as $.ignition.security.tls.certificateAuthorities.0",
            ]),
        ),
    ]);
}

/// `ignition.proxy` (3.1+) and `ignition.timeouts`: Ignition checks a proxy's scheme and repeated
/// `noProxy` entries, and nothing of the timeouts. A proxy URL is never shown (credentials).
#[test]
fn proxy_and_timeouts() {
    check(vec![
        case(
            "http proxies and timeouts",
            v(
                "3.1.0",
                json!({"ignition": {"proxy": {"httpProxy": "http://p:3128", "httpsProxy": "https://p:3129", "noProxy": ["a", "b"]},
                "timeouts": {"httpResponseHeaders": 0, "httpTotal": 600}}}),
            ),
            Yields("/ignition/timeouts/httpTotal", json!(600)),
        ),
        case(
            "socks proxy with credentials",
            v(
                "3.1.0",
                json!({"ignition": {"proxy": {"httpsProxy": "socks5://user:pa55word@p:1080"}}}),
            ),
            Refused(&[
                "$.ignition.proxy.httpsProxy: proxy (socks5: URL of 29 bytes): proxies must be http(s)",
            ]),
        ),
        case(
            "noProxy twice",
            v(
                "3.1.0",
                json!({"ignition": {"proxy": {"noProxy": ["a", "a"]}}}),
            ),
            Refused(&[
                "$.ignition.proxy.noProxy.1: proxy: duplicate entry defined: host \"a\" is already at $.ignition.proxy.noProxy.0",
            ]),
        ),
    ]);
}

/// `overwrite`: absent means false in spec 3; true needs a source (Ignition's
/// `ErrOverwriteAndNilSource`), an empty one included.
#[test]
fn overwrite() {
    let file = |f: serde_json::Value| v("3.2.0", json!({"storage": {"files": [f]}}));
    check(vec![
        case(
            "absent stays absent (false)",
            file(json!({"path": "/etc/a", "contents": {"source": "data:,a"}})),
            Yields(
                "/storage/files/0",
                json!({"path": "/etc/a", "contents": {"source": "data:,a"}}),
            ),
        ),
        case(
            "true without source",
            file(json!({"path": "/etc/a", "overwrite": true})),
            Refused(&[
                "$.storage.files.0.overwrite: file \"/etc/a\": overwrite must be false if source is unspecified",
            ]),
        ),
        case(
            "true with an empty source",
            file(json!({"path": "/etc/a", "overwrite": true, "contents": {"source": ""}})),
            Accepted,
        ),
        case(
            "directories and links keep theirs",
            v(
                "3.2.0",
                json!({"storage": {"directories": [{"path": "/d", "overwrite": true}],
                "links": [{"path": "/l", "target": "/d", "overwrite": false}]}}),
            ),
            Yields("/storage/directories/0/overwrite", json!(true)),
        ),
    ]);
}

/// `append`: parsed and kept (the MCD then refuses it: `ignition file X includes append`);
/// its entries follow the node's source rule.
#[test]
fn append() {
    check(vec![
        case(
            "kept",
            v(
                "3.2.0",
                json!({"storage": {"files": [{"path": "/etc/a", "append": [{"source": "data:,x"}, {"source": "data:,x"}]}]}}),
            ),
            Yields("/storage/files/0/append/1/source", json!("data:,x")),
        ),
        case(
            "remote fragment",
            v(
                "3.2.0",
                json!({"storage": {"files": [{"path": "/etc/a", "append": [{"source": "https://x/y"}]}]}}),
            ),
            Refused(&[
                "$.storage.files.0.append.0.source: file \"/etc/a\": remote source scheme \"https\" cannot be fetched on a node; only data: URLs are supported",
            ]),
        ),
    ]);
}

/// Owners: an id or a name, not both (`ErrBothIDAndNameSet`); an empty name is no name.
#[test]
fn owners() {
    let file = |user: serde_json::Value, group: serde_json::Value| {
        v(
            "3.2.0",
            json!({"storage": {"files": [{"path": "/etc/a", "user": user, "group": group}]}}),
        )
    };
    check(vec![
        case("ids", file(json!({"id": 0}), json!({"id": 1000})), Accepted),
        case(
            "names",
            file(json!({"name": "core"}), json!({"name": "wheel"})),
            Accepted,
        ),
        case(
            "id and an empty name",
            file(json!({"id": 0, "name": ""}), json!({})),
            Accepted,
        ),
        case(
            "both",
            file(
                json!({"id": 0, "name": "root"}),
                json!({"id": 10, "name": "wheel"}),
            ),
            Refused(&[
                "$.storage.files.0.user: file \"/etc/a\": cannot set both id and name (id 0, name \"root\")",
                "$.storage.files.0.group: file \"/etc/a\": cannot set both id and name (id 10, name \"wheel\")",
            ]),
        ),
    ]);
}
