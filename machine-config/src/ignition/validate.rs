//! Validation of the internal form, like Ignition's validator plus the MCO's own rules, collecting
//! every problem with its JSON path (`$.storage.files.3.path: path not absolute`).

use std::collections::HashMap;

use super::types::{Config, NodeOwner, Resource};
use crate::contents::parse_hash;
use crate::dataurl;
use crate::error::Issue;

/// Largest mode the MCO accepts for a file (no setuid/setgid/sticky bits).
const MCO_MAX_FILE_MODE: i64 = 0o777;

/// Unit suffixes systemd (and Ignition) accept.
const UNIT_SUFFIXES: [&str; 12] = [
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".snapshot",
    ".slice",
    ".scope",
];

/// Go's `%#o`: `0` followed by the octal digits (`0` for zero), as the MCO prints modes.
pub fn go_octal(mode: i64) -> String {
    if mode == 0 {
        "0".to_string()
    } else if mode < 0 {
        format!("-0{:o}", -mode)
    } else {
        format!("0{mode:o}")
    }
}

/// Ignition's path rule: non-empty, absolute, and already clean (no `.`/`..`/empty segments,
/// no trailing slash). A NUL byte is refused too.
pub(crate) fn check_path(p: &str) -> Result<(), &'static str> {
    if p.is_empty() {
        return Err("path not specified");
    }
    if !p.starts_with('/') {
        return Err("path not absolute");
    }
    if p.contains('\0') {
        return Err("path contains a NUL byte");
    }
    if p != "/"
        && p[1..]
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err("path is not fully simplified");
    }
    Ok(())
}

/// A unit or drop-in name must be one path segment, so it cannot leave its directory.
fn check_name_segment(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("name not specified");
    }
    if name.contains('/') || name.contains('\0') || name == "." || name == ".." {
        return Err("name must be a single path segment (no '/', NUL, '.' or '..')");
    }
    Ok(())
}

struct Report(Vec<Issue>);

impl Report {
    fn err(&mut self, path: impl Into<String>, msg: impl Into<String>) {
        self.0.push(Issue::new(path, msg));
    }
}

/// Validates a config in the internal form; every problem found, in document order.
pub fn validate(cfg: &Config) -> Result<(), Vec<Issue>> {
    let mut r = Report(Vec::new());
    validate_ignition(cfg, &mut r);
    validate_storage(cfg, &mut r);
    validate_systemd(cfg, &mut r);
    validate_passwd(cfg, &mut r);
    if r.0.is_empty() { Ok(()) } else { Err(r.0) }
}

fn validate_ignition(cfg: &Config, r: &mut Report) {
    let ign = &cfg.ignition;
    for (i, res) in ign.config.merge.iter().enumerate() {
        resource(&format!("$.ignition.config.merge.{i}"), res, true, r);
    }
    if !ign.config.replace.is_empty() {
        resource("$.ignition.config.replace", &ign.config.replace, true, r);
    }
    for (i, res) in ign.security.tls.certificate_authorities.iter().enumerate() {
        let at = format!("$.ignition.security.tls.certificateAuthorities.{i}");
        resource(&at, res, true, r);
    }
    let proxies = [
        ("httpProxy", &ign.proxy.http_proxy),
        ("httpsProxy", &ign.proxy.https_proxy),
    ];
    for (name, proxy) in proxies {
        if let Some(p) = proxy
            && !matches!(dataurl::scheme(p), Some("http" | "https"))
        {
            r.err(
                format!("$.ignition.proxy.{name}"),
                "proxies must be http(s)",
            );
        }
    }
}

/// Checks one resource. `required`: a source must be present (merged configs, CAs).
fn resource(at: &str, res: &Resource, required: bool, r: &mut Report) {
    if let Some(c) = &res.compression
        && !matches!(c.as_str(), "" | "gzip")
    {
        r.err(format!("{at}.compression"), "invalid compression method");
    }
    if let Some(h) = &res.verification.hash {
        if res.source.is_none() {
            r.err(
                format!("{at}.verification.hash"),
                "source must be specified if verification is specified",
            );
        }
        if let Err(e) = parse_hash(h) {
            r.err(format!("{at}.verification.hash"), e);
        }
    }
    match res.source.as_deref() {
        None | Some("") if required => r.err(format!("{at}.source"), "source is required"),
        None | Some("") => {}
        Some(src) => source(&format!("{at}.source"), src, r),
    }
    for (i, h) in res.http_headers.iter().enumerate() {
        if h.name.is_empty() {
            r.err(
                format!("{at}.httpHeaders.{i}.name"),
                "HTTP header name can't be empty",
            );
        }
        if h.value.as_deref() == Some("") {
            r.err(
                format!("{at}.httpHeaders.{i}.value"),
                "unable to parse HTTP header",
            );
        }
    }
    if !res.http_headers.is_empty() {
        let scheme = res.source.as_deref().and_then(dataurl::scheme);
        if !matches!(scheme, Some("http" | "https")) {
            r.err(
                format!("{at}.httpHeaders"),
                "cannot use HTTP headers with this source scheme",
            );
        }
    }
}

fn source(at: &str, src: &str, r: &mut Report) {
    match dataurl::scheme(src) {
        Some("data") => {
            if let Err(e) = dataurl::decode(src) {
                r.err(at, e.to_string());
            }
        }
        Some(scheme @ ("http" | "https" | "tftp" | "s3" | "gs" | "arn")) => r.err(
            at,
            format!(
                "remote source scheme {scheme:?} cannot be fetched on a node; only data: URLs are supported"
            ),
        ),
        _ => r.err(at, "invalid url scheme"),
    }
}

fn owner(at: &str, o: &NodeOwner, r: &mut Report) {
    if o.id.is_some() && o.name.as_deref().is_some_and(|n| !n.is_empty()) {
        r.err(at, "cannot set both id and name");
    }
}

fn validate_storage(cfg: &Config, r: &mut Report) {
    let s = &cfg.storage;
    // Files, directories and links share one path namespace.
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut node = |kind: &str, i: usize, path: &str, r: &mut Report| {
        let at = format!("$.storage.{kind}.{i}");
        if let Err(e) = check_path(path) {
            r.err(format!("{at}.path"), e);
        }
        if let Some(first) = seen.get(path) {
            r.err(
                format!("{at}.path"),
                format!("duplicate entry defined: {path} is already defined at {first}"),
            );
        } else {
            seen.insert(path.to_string(), at);
        }
    };
    for (i, f) in s.files.iter().enumerate() {
        node("files", i, &f.path, r);
    }
    for (i, d) in s.directories.iter().enumerate() {
        node("directories", i, &d.path, r);
    }
    for (i, l) in s.links.iter().enumerate() {
        node("links", i, &l.path, r);
    }

    for (i, f) in s.files.iter().enumerate() {
        let at = format!("$.storage.files.{i}");
        owner(&format!("{at}.user"), &f.user, r);
        owner(&format!("{at}.group"), &f.group, r);
        if let Some(m) = f.mode {
            if !(0..=0o7777).contains(&m) {
                r.err(format!("{at}.mode"), "illegal file mode");
            } else if m > MCO_MAX_FILE_MODE {
                r.err(
                    format!("{at}.mode"),
                    format!(
                        "invalid mode {} for {}, cannot exceed {}",
                        go_octal(m),
                        f.path,
                        go_octal(MCO_MAX_FILE_MODE)
                    ),
                );
            }
        }
        if f.overwrite == Some(true) && f.contents.source.is_none() {
            r.err(
                format!("{at}.overwrite"),
                "overwrite must be false if source is unspecified",
            );
        }
        resource(&format!("{at}.contents"), &f.contents, false, r);
        for (j, a) in f.append.iter().enumerate() {
            resource(&format!("{at}.append.{j}"), a, false, r);
        }
    }
    for (i, d) in s.directories.iter().enumerate() {
        let at = format!("$.storage.directories.{i}");
        owner(&format!("{at}.user"), &d.user, r);
        owner(&format!("{at}.group"), &d.group, r);
        if let Some(m) = d.mode
            && !(0..=0o7777).contains(&m)
        {
            r.err(format!("{at}.mode"), "illegal file mode");
        }
    }
    validate_links(cfg, r);
}

fn validate_links(cfg: &Config, r: &mut Report) {
    let s = &cfg.storage;
    let under_link = |p: &str| {
        s.links
            .iter()
            .any(|l| p.starts_with(&format!("{}/", l.path)))
    };
    for (i, f) in s.files.iter().enumerate() {
        if under_link(&f.path) {
            r.err(
                format!("$.storage.files.{i}"),
                "file path includes link in config",
            );
        }
    }
    for (i, d) in s.directories.iter().enumerate() {
        if under_link(&d.path) {
            r.err(
                format!("$.storage.directories.{i}"),
                "directory path includes link in config",
            );
        }
    }
    for (i, l) in s.links.iter().enumerate() {
        let at = format!("$.storage.links.{i}");
        owner(&format!("{at}.user"), &l.user, r);
        owner(&format!("{at}.group"), &l.group, r);
        if under_link(&l.path) {
            r.err(&at, "link path includes link in config");
        }
        let Some(target) = l.target.as_deref().filter(|t| !t.is_empty()) else {
            r.err(format!("{at}.target"), "link target is required");
            continue;
        };
        if target.contains('\0') {
            r.err(format!("{at}.target"), "link target contains a NUL byte");
        }
        if l.is_hard() {
            let joined = if target.starts_with('/') {
                target.to_string()
            } else {
                format!("{}/{target}", l.path)
            };
            let resolved = super::clean_path(&joined);
            if s.directories.iter().any(|d| d.path == resolved) {
                r.err(&at, "hard link target is a directory");
            }
        }
    }
}

fn validate_systemd(cfg: &Config, r: &mut Report) {
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut unit_paths: HashMap<String, ()> = HashMap::new();
    for (i, u) in cfg.systemd.units.iter().enumerate() {
        let at = format!("$.systemd.units.{i}");
        if let Err(e) = check_name_segment(&u.name) {
            r.err(format!("{at}.name"), e);
        } else if !UNIT_SUFFIXES.iter().any(|s| u.name.ends_with(s)) {
            r.err(format!("{at}.name"), "invalid systemd unit extension");
        }
        if let Some(first) = names.get(u.name.as_str()) {
            r.err(
                format!("{at}.name"),
                format!("duplicate entry defined: unit {} is already defined at $.systemd.units.{first}", u.name),
            );
        } else {
            names.insert(&u.name, i);
        }
        if u.contents.as_deref().is_some_and(|c| !c.is_empty()) {
            unit_paths.insert(format!("/etc/systemd/system/{}", u.name), ());
        }
        let mut dropins: HashMap<&str, usize> = HashMap::new();
        for (j, d) in u.dropins.iter().enumerate() {
            let dat = format!("{at}.dropins.{j}");
            if let Err(e) = check_name_segment(&d.name) {
                r.err(format!("{dat}.name"), e);
            } else if !d.name.ends_with(".conf") {
                r.err(format!("{dat}.name"), "invalid systemd drop-in extension");
            }
            if let Some(first) = dropins.get(d.name.as_str()) {
                r.err(
                    format!("{dat}.name"),
                    format!("duplicate entry defined: drop-in {} is already defined at {at}.dropins.{first}", d.name),
                );
            } else {
                dropins.insert(&d.name, j);
            }
            if d.contents.as_deref().is_some_and(|c| !c.is_empty()) {
                unit_paths.insert(format!("/etc/systemd/system/{}.d/{}", u.name, d.name), ());
            }
        }
    }
    let s = &cfg.storage;
    let nodes = s
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (format!("$.storage.files.{i}.path"), &f.path))
        .chain(
            s.directories
                .iter()
                .enumerate()
                .map(|(i, d)| (format!("$.storage.directories.{i}.path"), &d.path)),
        )
        .chain(
            s.links
                .iter()
                .enumerate()
                .map(|(i, l)| (format!("$.storage.links.{i}.path"), &l.path)),
        );
    for (at, path) in nodes {
        if unit_paths.contains_key(path.as_str()) {
            r.err(at, "path conflicts with systemd unit or dropin");
        }
    }
}

fn validate_passwd(cfg: &Config, r: &mut Report) {
    let mut users: HashMap<&str, usize> = HashMap::new();
    for (i, u) in cfg.passwd.users.iter().enumerate() {
        if let Some(first) = users.get(u.name.as_str()) {
            r.err(
                format!("$.passwd.users.{i}.name"),
                format!(
                    "duplicate entry defined: user {} is already defined at $.passwd.users.{first}",
                    u.name
                ),
            );
        } else {
            users.insert(&u.name, i);
        }
    }
    let mut groups: HashMap<&str, usize> = HashMap::new();
    for (i, g) in cfg.passwd.groups.iter().enumerate() {
        if let Some(first) = groups.get(g.name.as_str()) {
            r.err(
                format!("$.passwd.groups.{i}.name"),
                format!("duplicate entry defined: group {} is already defined at $.passwd.groups.{first}", g.name),
            );
        } else {
            groups.insert(&g.name, i);
        }
    }
}
