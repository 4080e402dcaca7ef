//! `systemd.units`: names, drop-ins, contents, and the paths they occupy.

use std::collections::{HashMap, HashSet};

use super::storage::file_subject;
use super::unit_syntax::check_unit_syntax;
use super::{Report, named};
use crate::ignition::types::Config;

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

/// A unit or drop-in name must be one path segment, so it cannot leave its directory (stricter
/// than Ignition and the MCD, which join the name to the directory as it is).
fn check_name_segment(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("name not specified");
    }
    if name.contains('/') || name.contains('\0') || name == "." || name == ".." {
        return Err("name must be a single path segment (no '/', NUL, '.' or '..')");
    }
    // A line break in a unit name is written and enabled, and breaks every list of units
    // (systemctl's output, the agent's own records) it appears in.
    if name.chars().any(char::is_control) {
        return Err("name has a control character (such as a line break)");
    }
    Ok(())
}

pub(super) fn validate_systemd(cfg: &Config, r: &mut Report) {
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut unit_paths: HashSet<String> = HashSet::new();
    for (i, u) in cfg.systemd.units.iter().enumerate() {
        let at = format!("$.systemd.units.{i}");
        let subject = format!("unit {}", named(&u.name));
        if let Err(e) = check_name_segment(&u.name) {
            r.err(format!("{at}.name"), &subject, e);
        } else if !UNIT_SUFFIXES.iter().any(|s| u.name.ends_with(s)) {
            r.err(
                format!("{at}.name"),
                &subject,
                "invalid systemd unit extension",
            );
        }
        if let Some(first) = names.get(u.name.as_str()) {
            r.err(
                format!("{at}.name"),
                &subject,
                format!("duplicate entry defined: already defined at $.systemd.units.{first}"),
            );
        } else {
            names.insert(&u.name, i);
        }
        if let Some(contents) = u.contents.as_deref() {
            if let Err(e) = check_unit_syntax(contents) {
                r.err(format!("{at}.contents"), &subject, e);
            }
            if !contents.is_empty() {
                unit_paths.insert(format!("/etc/systemd/system/{}", u.name));
            }
        }
        let mut dropins: HashMap<&str, usize> = HashMap::new();
        for (j, d) in u.dropins.iter().enumerate() {
            let dat = format!("{at}.dropins.{j}");
            let dsubject = format!("drop-in {} of unit {}", named(&d.name), named(&u.name));
            if let Err(e) = check_name_segment(&d.name) {
                r.err(format!("{dat}.name"), &dsubject, e);
            } else if !d.name.ends_with(".conf") {
                r.err(
                    format!("{dat}.name"),
                    &dsubject,
                    "invalid systemd drop-in extension",
                );
            }
            if let Some(first) = dropins.get(d.name.as_str()) {
                r.err(
                    format!("{dat}.name"),
                    &dsubject,
                    format!("duplicate entry defined: already defined at {at}.dropins.{first}"),
                );
            } else {
                dropins.insert(&d.name, j);
            }
            if let Some(contents) = d.contents.as_deref() {
                if let Err(e) = check_unit_syntax(contents) {
                    r.err(format!("{dat}.contents"), &dsubject, e);
                }
                if !contents.is_empty() {
                    unit_paths.insert(format!("/etc/systemd/system/{}.d/{}", u.name, d.name));
                }
            }
        }
    }
    conflicts_with_units(cfg, &unit_paths, r);
}

/// A file, directory or link at the path of a unit or drop-in with contents.
fn conflicts_with_units(cfg: &Config, unit_paths: &HashSet<String>, r: &mut Report) {
    let s = &cfg.storage;
    let nodes = s
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            (
                format!("$.storage.files.{i}.path"),
                file_subject(&f.path),
                &f.path,
            )
        })
        .chain(s.directories.iter().enumerate().map(|(i, d)| {
            let subject = format!("directory {}", named(&d.path));
            (format!("$.storage.directories.{i}.path"), subject, &d.path)
        }))
        .chain(s.links.iter().enumerate().map(|(i, l)| {
            let subject = format!("link {}", named(&l.path));
            (format!("$.storage.links.{i}.path"), subject, &l.path)
        }));
    for (at, subject, path) in nodes {
        if unit_paths.contains(path.as_str()) {
            r.err(at, &subject, "path conflicts with systemd unit or dropin");
        }
    }
}
