//! What a spec 2.2 config must satisfy before translation, and what translation silently drops,
//! as the MCO's path decides it: Ignition's 2.2 validator (`config/v2_2/types`), then
//! ign-converter's `v23tov30` check with the filesystem map `{"root": "/"}`.
//!
//! Where the MCO differs from Ignition 2.2 itself, the MCO wins (it decides what the MCD
//! applies), and the difference becomes a warning:
//! - a node on a filesystem that the config does not declare is taken as a path on the root
//!   filesystem (Ignition 2.2 would fail to find the filesystem at first boot);
//! - a declared `root` filesystem is dropped (the root is implied), after Ignition's checks;
//! - a user's deprecated `create` object is dropped with everything in it.

use super::types::{Config, Mount, Node};
use crate::error::{Issue, quoted};
use crate::ignition::validate::named;

/// Errors (the config is refused) and warnings (something is dropped or reinterpreted).
#[derive(Default)]
pub(super) struct Findings {
    pub(super) errors: Vec<Issue>,
    pub(super) warnings: Vec<Issue>,
}

impl Findings {
    fn error(&mut self, at: impl Into<String>, msg: impl Into<String>) {
        self.errors.push(Issue::new(at, msg));
    }

    fn warn(&mut self, at: impl Into<String>, msg: impl Into<String>) {
        self.warnings.push(Issue::new(at, msg));
    }
}

pub(super) fn check(cfg: &Config) -> Findings {
    let mut f = Findings::default();
    if !cfg.networkd.units.is_empty() {
        f.error(
            "$.networkd.units",
            "config includes deprecated networkd section - use Files instead",
        );
    }
    filesystems(cfg, &mut f);
    users(cfg, &mut f);
    for (d, disk) in cfg.storage.disks.iter().enumerate() {
        for (p, part) in disk.partitions.iter().enumerate() {
            if part.size != 0 || part.start != 0 {
                f.error(
                    format!("$.storage.disks.{d}.partitions.{p}"),
                    format!(
                        "partition {} of disk {}: deprecated fields \"size\"/\"start\" (sectors) cannot be translated to spec 3",
                        part.number,
                        named(&disk.device)
                    ),
                );
            }
        }
    }
    nodes(cfg, &mut f);
    for (i, file) in cfg.storage.files.iter().enumerate() {
        if file.append && file.node.overwrite == Some(true) {
            f.error(
                format!("$.storage.files.{i}"),
                format!(
                    "file {}: cannot set both append and overwrite to true",
                    named(&file.node.path)
                ),
            );
        }
    }
    f
}

/// Only `root` maps to a spec 3 path; a redefinition of it must still pass Ignition's checks.
fn filesystems(cfg: &Config, f: &mut Findings) {
    for (i, fs) in cfg.storage.filesystems.iter().enumerate() {
        let at = format!("$.storage.filesystems.{i}");
        let subject = format!("filesystem {}", named(&fs.name));
        if fs.name != "root" {
            f.error(
                format!("{at}.name"),
                format!(
                    "{subject}: cannot be translated to spec 3: only the \"root\" filesystem is supported (the MCO has no mount point for another)"
                ),
            );
            continue;
        }
        match (&fs.mount, &fs.path) {
            (None, None) => f.error(
                &at,
                format!("{subject}: filesystem is missing mount or path"),
            ),
            (Some(_), Some(_)) => f.error(
                &at,
                format!("{subject}: filesystem has both mount and path defined"),
            ),
            (Some(m), None) => mount(&format!("{at}.mount"), &subject, m, f),
            (None, Some(p)) if !p.starts_with('/') => {
                f.error(
                    format!("{at}.path"),
                    format!("{subject}: path not absolute"),
                );
            }
            (None, Some(_)) => {}
        }
        f.warn(
            &at,
            format!("{subject}: the root filesystem is implied; this definition is dropped, as the MCO drops it"),
        );
    }
}

/// Ignition 2.2's checks of a filesystem's `mount`.
fn mount(at: &str, subject: &str, m: &Mount, f: &mut Findings) {
    let max_label = match m.format.as_str() {
        "ext4" => 16,
        "btrfs" => 256,
        "xfs" => 12,
        "swap" => 15,
        "vfat" => 11,
        other => {
            let msg = format!("{subject}: invalid filesystem format {}", quoted(other));
            f.error(format!("{at}.format"), msg);
            usize::MAX
        }
    };
    if m.label.as_ref().is_some_and(|l| l.len() > max_label) {
        let msg = format!(
            "{subject}: filesystem labels cannot be longer than {max_label} characters when using {}",
            m.format
        );
        f.error(format!("{at}.label"), msg);
    }
    if !m.device.starts_with('/') {
        let msg = format!("{subject}: device {}: path not absolute", named(&m.device));
        f.error(format!("{at}.device"), msg);
    }
    if m.create.is_some() {
        if m.wipe_filesystem {
            let msg = format!("{subject}: cannot use both create object and wipeFilesystem field");
            f.error(format!("{at}.create"), msg);
        }
        if !m.options.is_empty() {
            let msg =
                format!("{subject}: cannot use both create object and mount-level options field");
            f.error(format!("{at}.create"), msg);
        }
    }
}

/// Only `core` can be translated; `create` must not be combined with the user-level fields it
/// duplicates (Ignition 2.2), and is then dropped (the MCO's translation ignores it).
fn users(cfg: &Config, f: &mut Findings) {
    for (i, user) in cfg.passwd.users.iter().enumerate() {
        let at = format!("$.passwd.users.{i}");
        if user.name != "core" {
            f.error(
                format!("{at}.name"),
                format!(
                    "unexpected user with name: {}. Only core user is supported",
                    user.name
                ),
            );
        }
        if user.create.is_none() {
            continue;
        }
        let subject = format!("user {}", named(&user.name));
        let set = [
            ("gecos", !user.gecos.is_empty()),
            ("groups", !user.groups.is_empty()),
            ("homeDir", !user.home_dir.is_empty()),
            ("noCreateHome", user.no_create_home),
            ("noLogInit", user.no_log_init),
            ("noUserGroup", user.no_user_group),
            ("primaryGroup", !user.primary_group.is_empty()),
            ("shell", !user.shell.is_empty()),
            ("system", user.system),
            ("uid", user.uid.is_some()),
        ];
        for (field, _) in set.iter().filter(|(_, is_set)| *is_set) {
            f.error(
                format!("{at}.{field}"),
                format!(
                    "{subject}: cannot use both the create object and the user-level {field} field"
                ),
            );
        }
        f.warn(
            format!("{at}.create"),
            format!("{subject}: the deprecated create object is dropped, as the MCO drops it"),
        );
    }
}

/// Every file, directory and link needs a filesystem and an absolute path.
fn nodes(cfg: &Config, f: &mut Findings) {
    let declared = |name: &str| cfg.storage.filesystems.iter().any(|fs| fs.name == name);
    let s = &cfg.storage;
    let all: Vec<(&str, &str, usize, &Node)> = s
        .files
        .iter()
        .enumerate()
        .map(|(i, x)| ("files", "file", i, &x.node))
        .chain(
            s.directories
                .iter()
                .enumerate()
                .map(|(i, x)| ("directories", "directory", i, &x.node)),
        )
        .chain(
            s.links
                .iter()
                .enumerate()
                .map(|(i, x)| ("links", "link", i, &x.node)),
        )
        .collect();
    for (list, kind, i, node) in all {
        let at = format!("$.storage.{list}.{i}");
        let subject = format!("{kind} {}", named(&node.path));
        if node.filesystem.is_empty() {
            f.error(
                format!("{at}.filesystem"),
                format!("{subject}: no filesystem specified"),
            );
        } else if node.filesystem != "root" && !declared(&node.filesystem) {
            f.warn(
                format!("{at}.filesystem"),
                format!(
                    "{subject}: references nonexistent filesystem {}; the path is taken on the root filesystem, as the MCO takes it",
                    named(&node.filesystem)
                ),
            );
        }
        if node.path.is_empty() {
            f.error(
                format!("{at}.path"),
                format!("{subject}: path not specified"),
            );
        } else if !node.path.starts_with('/') {
            f.error(
                format!("{at}.path"),
                format!("{subject}: path not absolute"),
            );
        }
    }
}
