//! `storage`: files, directories and links (one path namespace), and the keys of the sections the
//! node never writes (disks, filesystems, RAID, LUKS), which Ignition also refuses to repeat.

use std::collections::HashMap;

use serde_json::Value;

use super::resource::{Use, resource};
use super::{Report, check_path, go_octal, named, owner};
use crate::ignition::types::Config;

/// Largest mode the MCO accepts for a file (no setuid/setgid/sticky bits).
const MCO_MAX_FILE_MODE: i64 = 0o777;

pub(super) fn file_subject(path: &str) -> String {
    format!("file {}", named(path))
}

pub(super) fn validate_storage(cfg: &Config, r: &mut Report) {
    let s = &cfg.storage;
    // Files, directories and links share one path namespace.
    let mut seen: HashMap<&str, String> = HashMap::new();
    let nodes = s
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| ("files", "file", i, f.path.as_str()))
        .chain(
            s.directories
                .iter()
                .enumerate()
                .map(|(i, d)| ("directories", "directory", i, d.path.as_str())),
        )
        .chain(
            s.links
                .iter()
                .enumerate()
                .map(|(i, l)| ("links", "link", i, l.path.as_str())),
        );
    for (list, kind, i, path) in nodes {
        let at = format!("$.storage.{list}.{i}");
        let subject = format!("{kind} {}", named(path));
        if let Err(e) = check_path(path) {
            r.err(format!("{at}.path"), &subject, e);
        }
        if let Some(first) = seen.get(path) {
            r.err(
                format!("{at}.path"),
                &subject,
                format!("duplicate entry defined: the path is already defined at {first}"),
            );
        } else {
            seen.insert(path, at);
        }
    }

    for (i, f) in s.files.iter().enumerate() {
        let at = format!("$.storage.files.{i}");
        let subject = file_subject(&f.path);
        owner(&format!("{at}.user"), &subject, &f.user, r);
        owner(&format!("{at}.group"), &subject, &f.group, r);
        if let Some(m) = f.mode {
            if !(0..=0o7777).contains(&m) {
                r.err(
                    format!("{at}.mode"),
                    &subject,
                    format!("illegal file mode {m} (octal {})", go_octal(m)),
                );
            } else if m > MCO_MAX_FILE_MODE {
                // The MCO's own message, which already names the file and the mode.
                r.0.push(crate::error::Issue::new(
                    format!("{at}.mode"),
                    format!(
                        "invalid mode {} for {}, cannot exceed {}",
                        go_octal(m),
                        f.path,
                        go_octal(MCO_MAX_FILE_MODE)
                    ),
                ));
            }
        }
        if f.overwrite == Some(true) && f.contents.source.is_none() {
            r.err(
                format!("{at}.overwrite"),
                &subject,
                "overwrite must be false if source is unspecified",
            );
        }
        let contents = format!("{at}.contents");
        resource(&contents, &subject, &f.contents, Use::Contents, r);
        for (j, a) in f.append.iter().enumerate() {
            resource(&format!("{at}.append.{j}"), &subject, a, Use::Written, r);
        }
    }
    for (i, d) in s.directories.iter().enumerate() {
        let at = format!("$.storage.directories.{i}");
        let subject = format!("directory {}", named(&d.path));
        owner(&format!("{at}.user"), &subject, &d.user, r);
        owner(&format!("{at}.group"), &subject, &d.group, r);
        if let Some(m) = d.mode
            && !(0..=0o7777).contains(&m)
        {
            r.err(
                format!("{at}.mode"),
                &subject,
                format!("illegal file mode {m} (octal {})", go_octal(m)),
            );
        }
    }
    validate_links(cfg, r);
    unwritten_sections(cfg, r);
}

fn validate_links(cfg: &Config, r: &mut Report) {
    let s = &cfg.storage;
    let link_above = |p: &str| {
        s.links
            .iter()
            .find(|l| p.starts_with(&format!("{}/", l.path)))
            .map(|l| named(&l.path))
    };
    for (i, f) in s.files.iter().enumerate() {
        if let Some(link) = link_above(&f.path) {
            let msg = format!("file path includes link in config ({link})");
            r.err(format!("$.storage.files.{i}"), &file_subject(&f.path), msg);
        }
    }
    for (i, d) in s.directories.iter().enumerate() {
        if let Some(link) = link_above(&d.path) {
            r.err(
                format!("$.storage.directories.{i}"),
                &format!("directory {}", named(&d.path)),
                format!("directory path includes link in config ({link})"),
            );
        }
    }
    for (i, l) in s.links.iter().enumerate() {
        let at = format!("$.storage.links.{i}");
        let subject = format!("link {}", named(&l.path));
        owner(&format!("{at}.user"), &subject, &l.user, r);
        owner(&format!("{at}.group"), &subject, &l.group, r);
        if let Some(link) = link_above(&l.path) {
            let msg = format!("link path includes link in config ({link})");
            r.err(&at, &subject, msg);
        }
        let Some(target) = l.target.as_deref().filter(|t| !t.is_empty()) else {
            r.err(format!("{at}.target"), &subject, "link target is required");
            continue;
        };
        if target.contains('\0') {
            r.err(
                format!("{at}.target"),
                &subject,
                "link target contains a NUL byte",
            );
        }
        if l.is_hard() {
            // Ignition resolves a relative hard-link target against the link's own path.
            let joined = if target.starts_with('/') {
                target.to_string()
            } else {
                format!("{}/{target}", l.path)
            };
            let resolved = crate::ignition::clean_path(&joined);
            if s.directories.iter().any(|d| d.path == resolved) {
                r.err(
                    &at,
                    &subject,
                    format!("hard link target is a directory ({})", named(target)),
                );
            }
        }
    }
}

/// Ignition's keys for the sections the node only compares: a disk and a filesystem by
/// `device`, a RAID array and a LUKS volume by `name`.
fn unwritten_sections(cfg: &Config, r: &mut Report) {
    let s = &cfg.storage;
    let sections: [(&str, &[Value], &str, &str); 4] = [
        ("disks", &s.disks, "device", "disk"),
        ("filesystems", &s.filesystems, "device", "filesystem"),
        ("raid", &s.raid, "name", "RAID array"),
        ("luks", &s.luks, "name", "LUKS volume"),
    ];
    for (section, items, key, kind) in sections {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            let Some(k) = item.get(key).and_then(Value::as_str) else {
                continue;
            };
            if let Some(first) = seen.get(k) {
                r.err(
                    format!("$.storage.{section}.{i}.{key}"),
                    &format!("{kind} {}", named(k)),
                    format!(
                        "duplicate entry defined: already defined at $.storage.{section}.{first}"
                    ),
                );
            } else {
                seen.insert(k, i);
            }
        }
    }
}
