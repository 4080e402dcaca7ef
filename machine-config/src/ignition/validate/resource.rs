//! Resources (`source` + `compression` + `verification` + `httpHeaders`) and the `ignition`
//! section that holds the config and CA references.

use std::borrow::Cow;
use std::collections::HashMap;

use super::{Report, contents_base64_deferred, named, unique_strings};
use crate::dataurl;
use crate::error::{describe_source, quoted};
use crate::ignition::hash::parse_hash;
use crate::ignition::types::{Config, Resource};
use crate::source::Source;

/// What a resource is for, which decides the rules its source follows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    /// A merged config or a CA: Ignition requires a source (`source is required`).
    RequiredReference,
    /// The replacing config: optional, an empty source meaning none (Ignition's
    /// `validateURLNilOK`).
    OptionalReference,
    /// An appended fragment: written by the node, so only `data:` URLs.
    Written,
    /// A file's contents: as [`Use::Written`], their base64 data possibly left to the caller
    /// ([`super::deferring_contents_base64`]).
    Contents,
}

pub(super) fn validate_ignition(cfg: &Config, r: &mut Report) {
    let ign = &cfg.ignition;
    for (i, res) in ign.config.merge.iter().enumerate() {
        let at = format!("$.ignition.config.merge.{i}");
        resource(
            &at,
            &format!("merged config {i}"),
            res,
            Use::RequiredReference,
            r,
        );
    }
    unique_sources(
        "$.ignition.config.merge",
        "merged config",
        &ign.config.merge,
        r,
    );
    resource(
        "$.ignition.config.replace",
        "replacing config",
        &ign.config.replace,
        Use::OptionalReference,
        r,
    );
    let cas = &ign.security.tls.certificate_authorities;
    for (i, res) in cas.iter().enumerate() {
        let at = format!("$.ignition.security.tls.certificateAuthorities.{i}");
        let subject = format!("certificate authority {i}");
        resource(&at, &subject, res, Use::RequiredReference, r);
    }
    unique_sources(
        "$.ignition.security.tls.certificateAuthorities",
        "certificate authority",
        cas,
        r,
    );
    let proxies = [
        ("httpProxy", &ign.proxy.http_proxy),
        ("httpsProxy", &ign.proxy.https_proxy),
    ];
    for (name, proxy) in proxies {
        if let Some(p) = proxy
            && !matches!(dataurl::scheme(p), Some("http" | "https"))
        {
            // The URL may carry credentials: named by its scheme and length only.
            r.err(
                format!("$.ignition.proxy.{name}"),
                &format!("proxy ({})", describe_source(p)),
                "proxies must be http(s)",
            );
        }
    }
    let no_proxy = ign.proxy.no_proxy.iter().map(String::as_str);
    unique_strings(
        "$.ignition.proxy.noProxy",
        "proxy",
        "host",
        no_proxy,
        true,
        r,
    );
}

/// Ignition keys config and CA references by their source: two with the same one are duplicates.
fn unique_sources(at: &str, what: &str, list: &[Resource], r: &mut Report) {
    let mut seen: HashMap<Cow<'_, str>, usize> = HashMap::new();
    for (i, res) in list.iter().enumerate() {
        let key = match res.source.as_ref().map(Source::text).transpose() {
            Ok(key) => key.unwrap_or_default(),
            Err(e) => {
                r.err(
                    format!("{at}.{i}.source"),
                    &format!("{what} {i}"),
                    e.to_string(),
                );
                continue;
            }
        };
        if let Some(first) = seen.get(&key) {
            r.err(
                format!("{at}.{i}"),
                &format!("{what} {i}"),
                format!("duplicate entry defined: the same source as {at}.{first}"),
            );
        } else {
            seen.insert(key, i);
        }
    }
}

/// Checks one resource belonging to `subject`.
pub(super) fn resource(at: &str, subject: &str, res: &Resource, use_: Use, r: &mut Report) {
    if let Some(c) = &res.compression
        && !matches!(c.as_str(), "" | "gzip")
    {
        r.err(
            format!("{at}.compression"),
            subject,
            format!("invalid compression method {}", quoted(c)),
        );
    }
    if let Some(h) = &res.verification.hash {
        if res.source.is_none() {
            r.err(
                format!("{at}.verification.hash"),
                subject,
                "source must be specified if verification is specified",
            );
        }
        if let Err(e) = parse_hash(h) {
            r.err(
                format!("{at}.verification.hash"),
                subject,
                format!("{e}: {}", named(h)),
            );
        }
    }
    let text = match res.source.as_ref().map(Source::text).transpose() {
        Ok(text) => text,
        Err(e) => {
            r.err(format!("{at}.source"), subject, e.to_string());
            headers(at, subject, res, r);
            return;
        }
    };
    match text.as_deref() {
        None | Some("") if use_ == Use::RequiredReference => {
            r.err(format!("{at}.source"), subject, "source is required");
        }
        None | Some("") => {}
        Some(src) => source(&format!("{at}.source"), subject, src, use_, r),
    }
    headers(at, subject, res, r);
}

fn headers(at: &str, subject: &str, res: &Resource, r: &mut Report) {
    for (i, h) in res.http_headers.iter().enumerate() {
        if h.name.is_empty() {
            r.err(
                format!("{at}.httpHeaders.{i}.name"),
                subject,
                "HTTP header name can't be empty",
            );
        }
        if h.value.as_deref() == Some("") {
            r.err(
                format!("{at}.httpHeaders.{i}.value"),
                subject,
                format!(
                    "unable to parse HTTP header {}: empty value",
                    named(&h.name)
                ),
            );
        }
    }
    let names = res.http_headers.iter().map(|h| h.name.as_str());
    unique_strings(
        &format!("{at}.httpHeaders"),
        subject,
        "header",
        names,
        true,
        r,
    );
    if res.http_headers.is_empty() {
        return;
    }
    let text = res.source.as_ref().map(Source::text).transpose();
    // An unreadable source was reported by `resource`.
    let Ok(text) = text else { return };
    match text.as_deref().filter(|s| !s.is_empty()) {
        None => r.err(
            format!("{at}.httpHeaders"),
            subject,
            "unable to parse url: HTTP headers need an http(s) source",
        ),
        Some(src) if !matches!(dataurl::scheme(src), Some("http" | "https")) => r.err(
            format!("{at}.httpHeaders"),
            subject,
            format!(
                "cannot use HTTP headers with this source scheme ({})",
                describe_source(src)
            ),
        ),
        Some(_) => {}
    }
}

/// Ignition's URL rules (`validateURL`), then the node's for written resources.
fn source(at: &str, subject: &str, src: &str, use_: Use, r: &mut Report) {
    let what = describe_source(src);
    match dataurl::scheme(src) {
        Some("data") => {
            // checked without keeping the decoded data: every parse validates every source
            let checked = if use_ == Use::Contents && contents_base64_deferred() {
                dataurl::check_unless_base64(src)
            } else {
                dataurl::check(src)
            };
            if let Err(e) = checked {
                r.err(at, subject, format!("{e} ({what})"));
            }
        }
        Some(scheme @ ("http" | "https" | "tftp" | "s3" | "gs" | "arn")) => {
            if let Err(e) = remote_url(scheme, src) {
                r.err(at, subject, format!("{e} ({what})"));
            } else if matches!(use_, Use::Written | Use::Contents) {
                r.err(
                    at,
                    subject,
                    format!(
                        "remote source scheme {scheme:?} cannot be fetched on a node; only data: URLs are supported"
                    ),
                );
            }
        }
        _ => r.err(at, subject, format!("invalid url scheme ({what})")),
    }
}

/// The value of `versionId` when the URL's query has that key.
fn version_id(url: &str) -> Option<&str> {
    let query = url.split_once('?')?.1;
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    query
        .split('&')
        .find_map(|pair| match pair.split_once('=') {
            Some(("versionId", v)) => Some(v),
            None if pair == "versionId" => Some(""),
            _ => None,
        })
}

/// Ignition's checks of S3 URLs and S3 access-point ARNs.
fn remote_url(scheme: &str, src: &str) -> Result<(), &'static str> {
    if matches!(scheme, "s3" | "arn") && version_id(src) == Some("") {
        return Err("invalid S3 object VersionId");
    }
    if scheme != "arn" {
        return Ok(());
    }
    // `arn:partition:service:region:account:resource`, service `s3`; an access point
    // (`accesspoint/NAME/...`) must name an object after it, a bucket too.
    let full = src.split(['?', '#']).next().unwrap_or(src);
    let sections: Vec<&str> = full.splitn(6, ':').collect();
    let valid = sections.len() == 6
        && !sections[1].is_empty()
        && sections[2] == "s3"
        && !sections[5].is_empty();
    let slashes = full.split('/').count();
    let enough = if sections
        .get(5)
        .is_some_and(|s| s.starts_with("accesspoint/"))
    {
        slashes >= 3
    } else {
        slashes >= 2
    };
    if valid && enough {
        Ok(())
    } else {
        Err("invalid S3 ARN format")
    }
}
