//! Everything an apply needs, computed and checked before the disk is touched: decoded file
//! contents (data URL, gzip, hash), owners resolved against the root's user database, the
//! current→desired sets (units to write, stale files, drop-ins and units), and paths that
//! cannot be written (a directory where a file goes, a parent that is a file).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use machine_config::ignition::NodeOwner;
use machine_config::{Config, ContentsReader, DecodeError, File, Unit};

use super::InputError;
use crate::rootfs::accounts::Accounts;
use crate::rootfs::{FileKind, Owner, Root};
use crate::units::SYSTEM_UNIT_DIR;
use crate::units::install::InstallInfo;

/// The only user whose SSH keys and password the agent manages.
pub const CORE_USER: &str = "core";

/// Files a later config may drop without the agent deleting them: certificates other writers
/// keep up to date (the MCD skips them too).
const STALE_FILES_KEPT: [&str; 3] = [
    "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
    "/etc/kubernetes/kubelet-ca.crt",
    "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
];
/// Directory of registry certificates the certificate writer owns.
const REGISTRY_CERTS_DIR: &str = "/etc/docker/certs.d";

/// A file to write.
#[derive(Debug)]
pub(crate) struct PreparedFile<'c> {
    pub path: PathBuf,
    pub contents: FileContents<'c>,
    pub mode: u32,
    pub owner: Owner,
}

/// What a file is to contain.
#[derive(Debug)]
pub(crate) enum FileContents<'c> {
    /// A config file's contents, decoded again when it is written: prepare decodes each file
    /// once to check it and lets it go, so an apply holds one decoded file at a time.
    Config(&'c File),
    /// Contents the agent builds (the SSH keys file).
    Bytes(Vec<u8>),
}

impl FileContents<'_> {
    /// The bytes to write.
    pub fn bytes(&self) -> Result<Cow<'_, [u8]>, DecodeError> {
        match self {
            FileContents::Config(f) => f.decoded_contents().map(Cow::Owned),
            FileContents::Bytes(b) => Ok(Cow::Borrowed(b)),
        }
    }
}

/// The decoded size of `f`'s contents, checking that they decode (data URL, gzip, hash): read
/// as a stream and let go, never held whole (see [`FileContents`]). When they do not decode,
/// the whole decode says why, in the MCD's words.
fn decoded_size(f: &File) -> Result<u64, DecodeError> {
    let streamed = ContentsReader::new(f)
        .and_then(|mut reader| std::io::copy(&mut reader, &mut std::io::sink()).ok());
    match streamed {
        Some(size) => Ok(size),
        None => f.decoded_contents().map(|bytes| bytes.len() as u64),
    }
}

/// Upper bound on the decoded contents of all of a config's files together: each file is
/// capped on its own (a gzip bomb), and this caps what a config of many of them writes.
pub const MAX_CONFIG_CONTENTS_BYTES: u64 = 1 << 30;

/// A directory to create (first application only).
#[derive(Debug)]
pub(crate) struct PreparedDir {
    pub path: PathBuf,
    pub mode: u32,
    pub owner: Owner,
}

/// A link to create (first application only).
#[derive(Debug)]
pub(crate) struct PreparedLink {
    pub path: PathBuf,
    pub target: PathBuf,
    pub hard: bool,
    pub owner: Owner,
}

/// The SSH keys and password hash of `core` to write.
#[derive(Debug)]
pub(crate) struct PreparedPasswd {
    /// `core` in the root's user database; `None` when the root has no such user (then nothing
    /// is written, as the MCD does).
    pub core: Option<crate::rootfs::accounts::User>,
    /// Every key of the config's `core` user, each followed by a newline; `None` when the keys
    /// file is left alone: at the first application with no key, as Ignition writes no keys
    /// file then (the MCD writes one, empty, only when an update changes `passwd`).
    pub authorized_keys: Option<String>,
    /// `passwordHash`, or `*` when unset.
    pub password_hash: String,
}

/// A checked, decoded current→desired change.
#[derive(Debug)]
pub(crate) struct Prepared<'c> {
    pub dirs: Vec<PreparedDir>,
    pub files: Vec<PreparedFile<'c>>,
    pub links: Vec<PreparedLink>,
    /// Units of the desired config to write (added or changed, or all when forced).
    pub units: Vec<&'c Unit>,
    /// Files of the current config the desired one drops.
    pub stale_files: Vec<PathBuf>,
    /// Drop-ins (with contents) of the current config the desired one drops.
    pub stale_dropins: Vec<PathBuf>,
    /// Units of the current config the desired one drops.
    pub stale_units: Vec<&'c Unit>,
    /// Set when the passwd section changed (or the apply is forced).
    pub passwd: Option<PreparedPasswd>,
}

/// How [`prepare`] decides what to write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PrepareMode<'a> {
    /// JSON-path prefix of the config inside the input document (`$` or `$.spec.config`).
    pub field_prefix: &'a str,
    /// Write every unit and the passwd section, not only what changed.
    pub write_all: bool,
    /// Also create directories and links (nothing was applied to this root yet).
    pub first_application: bool,
}

pub(crate) fn prepare<'c>(
    root: &Root,
    accounts: &Accounts,
    old: &'c Config,
    new: &'c Config,
    mode: PrepareMode<'_>,
) -> Result<Prepared<'c>, InputError> {
    let prefix = mode.field_prefix;
    let mut files = Vec::with_capacity(new.storage.files.len());
    let mut total: u64 = 0;
    for (i, f) in new.storage.files.iter().enumerate() {
        let field = format!("{prefix}.storage.files.{i}");
        if !f.append.is_empty() {
            return Err(InputError::new(
                format!("{field}.append"),
                format!("file {:?} includes append, which is not supported", f.path),
            ));
        }
        let size = decoded_size(f)
            .map_err(|e| InputError::new(format!("{field}.contents"), e.to_string()))?;
        total = total.saturating_add(size);
        if total > MAX_CONFIG_CONTENTS_BYTES {
            return Err(InputError::new(
                format!("{field}.contents"),
                format!(
                    "file {:?} takes the config's decoded contents past {MAX_CONFIG_CONTENTS_BYTES} bytes",
                    f.path
                ),
            ));
        }
        let owner = resolve_owner(accounts, &f.user, &f.group, &field)?;
        check_writable_path(root, &f.path, &field, false)?;
        files.push(PreparedFile {
            path: PathBuf::from(&f.path),
            contents: FileContents::Config(f),
            mode: f.mode_or_default(),
            owner,
        });
    }

    let (mut dirs, mut links) = (Vec::new(), Vec::new());
    if mode.first_application {
        for (i, d) in new.storage.directories.iter().enumerate() {
            let field = format!("{prefix}.storage.directories.{i}");
            check_writable_path(root, &d.path, &field, true)?;
            dirs.push(PreparedDir {
                path: PathBuf::from(&d.path),
                mode: d.mode_or_default(),
                owner: resolve_owner(accounts, &d.user, &d.group, &field)?,
            });
        }
        dirs.sort_by(|a, b| a.path.cmp(&b.path));
        let file_paths: BTreeSet<&str> =
            new.storage.files.iter().map(|f| f.path.as_str()).collect();
        for (i, l) in new.storage.links.iter().enumerate() {
            let field = format!("{prefix}.storage.links.{i}");
            let target = l
                .target
                .as_deref()
                .filter(|t| !t.is_empty())
                .ok_or_else(|| InputError::new(format!("{field}.target"), "link has no target"))?;
            check_writable_path(root, &l.path, &field, false)?;
            if l.is_hard() {
                let exists = file_paths.contains(target)
                    || matches!(root.lstat(Path::new(target)), Ok(Some(i)) if i.kind == FileKind::File);
                if !exists || !target.starts_with('/') {
                    return Err(InputError::new(
                        format!("{field}.target"),
                        format!(
                            "hard link target {target:?} is not a file in the config or in the root"
                        ),
                    ));
                }
            }
            links.push(PreparedLink {
                path: PathBuf::from(&l.path),
                target: PathBuf::from(target),
                hard: l.is_hard(),
                owner: resolve_owner(accounts, &l.user, &l.group, &field)?,
            });
        }
        // Symlinks first, then hard links (whose targets may be symlinked parents).
        links.sort_by_key(|l| l.hard);
    }

    let old_units: BTreeMap<&str, &Unit> = old
        .systemd
        .units
        .iter()
        .map(|u| (u.name.as_str(), u))
        .collect();
    let new_units: BTreeMap<&str, &Unit> = new
        .systemd
        .units
        .iter()
        .map(|u| (u.name.as_str(), u))
        .collect();
    let mut units = Vec::new();
    for (i, u) in new.systemd.units.iter().enumerate() {
        let field = format!("{prefix}.systemd.units.{i}");
        if u.is_masked() || u.contents.as_deref().is_some_and(|c| !c.is_empty()) {
            check_writable_path(root, &unit_path(&u.name), &field, false)?;
        }
        if let Some(contents) = u.contents.as_deref().filter(|_| !u.is_masked()) {
            InstallInfo::parse(contents).check(&u.name).map_err(|e| {
                InputError::new(
                    format!("{field}.contents"),
                    format!("unit {:?}: {e}", u.name),
                )
            })?;
        }
        for (j, d) in u.dropins.iter().enumerate() {
            check_writable_path(
                root,
                &dropin_path(&u.name, &d.name),
                &format!("{field}.dropins.{j}"),
                false,
            )?;
        }
        if mode.write_all || old_units.get(u.name.as_str()) != Some(&u) {
            units.push(u);
        }
    }

    let new_dropins: BTreeSet<String> = new
        .systemd
        .units
        .iter()
        .flat_map(|u| u.dropins.iter().map(move |d| dropin_path(&u.name, &d.name)))
        .collect();
    let new_files: BTreeSet<&str> = new.storage.files.iter().map(|f| f.path.as_str()).collect();
    let stale_files = old
        .storage
        .files
        .iter()
        .map(|f| f.path.as_str())
        .filter(|p| !new_files.contains(p))
        .filter(|p| !STALE_FILES_KEPT.contains(p) && !Path::new(p).starts_with(REGISTRY_CERTS_DIR))
        // A file that became a drop-in stays: the drop-in now owns the path.
        .filter(|p| !new_dropins.contains(*p))
        .map(PathBuf::from)
        .collect();
    let stale_dropins = old
        .systemd
        .units
        .iter()
        .flat_map(|u| {
            u.dropins
                .iter()
                .filter(|d| d.contents.as_deref().is_some_and(|c| !c.is_empty()))
                .map(move |d| dropin_path(&u.name, &d.name))
        })
        .filter(|p| !new_dropins.contains(p))
        .map(PathBuf::from)
        .collect();
    let stale_units = old
        .systemd
        .units
        .iter()
        .filter(|u| !new_units.contains_key(u.name.as_str()))
        .collect();

    let passwd = (mode.write_all || old.passwd != new.passwd).then(|| {
        let users = new.passwd.users.iter().filter(|u| u.name == CORE_USER);
        let keys: String = users
            .clone()
            .flat_map(|u| u.ssh_authorized_keys.iter())
            .map(|k| format!("{k}\n"))
            .collect();
        PreparedPasswd {
            core: accounts.user(CORE_USER).cloned(),
            authorized_keys: (!mode.first_application || !keys.is_empty()).then_some(keys),
            password_hash: users
                .filter_map(|u| u.password_hash.clone())
                .rfind(|h| !h.is_empty())
                .unwrap_or_else(|| "*".to_string()),
        }
    });

    if let Some(p) = &passwd {
        check_keys_path(root, new, p, prefix)?;
    }

    Ok(Prepared {
        dirs,
        files,
        links,
        units,
        stale_files,
        stale_dropins,
        stale_units,
        passwd,
    })
}

/// `/etc/systemd/system/<unit>`.
pub(crate) fn unit_path(unit: &str) -> String {
    format!("{SYSTEM_UNIT_DIR}/{unit}")
}

/// `/etc/systemd/system/<unit>.d/<dropin>`.
pub(crate) fn dropin_path(unit: &str, dropin: &str) -> String {
    format!("{SYSTEM_UNIT_DIR}/{unit}.d/{dropin}")
}

/// Ignition's owner rule: `id`, else `name` looked up in the root, else root (0).
fn resolve_owner(
    accounts: &Accounts,
    user: &NodeOwner,
    group: &NodeOwner,
    field: &str,
) -> Result<Owner, InputError> {
    let id = |v: i64, f: String| {
        u32::try_from(v).map_err(|_| InputError::new(f, format!("id {v} is out of range")))
    };
    let uid = match (user.id, user.name.as_deref().filter(|n| !n.is_empty())) {
        (Some(v), _) => id(v, format!("{field}.user.id"))?,
        (None, Some(name)) => accounts.user(name).map(|u| u.uid).ok_or_else(|| {
            InputError::new(
                format!("{field}.user.name"),
                format!("no user {name:?} in the root's /etc/passwd"),
            )
        })?,
        (None, None) => 0,
    };
    let gid = match (group.id, group.name.as_deref().filter(|n| !n.is_empty())) {
        (Some(v), _) => id(v, format!("{field}.group.id"))?,
        (None, Some(name)) => accounts.group(name).map(|g| g.gid).ok_or_else(|| {
            InputError::new(
                format!("{field}.group.name"),
                format!("no group {name:?} in the root's /etc/group"),
            )
        })?,
        (None, None) => 0,
    };
    Ok(Owner { uid, gid })
}

/// Refuses a path that cannot take a file (or, with `dir`, a directory): one of its parents is
/// not a directory, or a directory is where a file must go.
fn check_writable_path(root: &Root, path: &str, field: &str, dir: bool) -> Result<(), InputError> {
    match root.lstat(Path::new(path)) {
        Ok(Some(info)) if !dir && info.kind == FileKind::Dir => Err(InputError::new(
            format!("{field}.path"),
            format!("{path:?} is a directory in the root; refusing to replace it"),
        )),
        // A FIFO, socket or device: its original cannot be kept, so it is refused before
        // anything is written (a failed write's rollback would otherwise find no original).
        Ok(Some(info)) if !dir && info.kind == FileKind::Other => Err(InputError::new(
            format!("{field}.path"),
            format!(
                "{path:?} is a FIFO, socket or device in the root, not a regular file; refusing \
                 to replace it"
            ),
        )),
        Ok(Some(info)) if dir && !matches!(info.kind, FileKind::Dir | FileKind::Symlink) => {
            Err(InputError::new(
                format!("{field}.path"),
                format!("{path:?} exists in the root and is not a directory"),
            ))
        }
        Ok(_) => Ok(()),
        Err(e) => Err(InputError::new(
            format!("{field}.path"),
            format!("cannot write {path:?}: {e}"),
        )),
    }
}

/// Refuses the change when core's keys file cannot be written safely: resolving its path meets a
/// symlink that core (or anyone but root) could have put there, or a parent that is not a
/// directory. The write itself resolves the path again under the same rule, so a link swapped
/// in after this check is refused then too; checking here keeps the disk untouched.
fn check_keys_path(
    root: &Root,
    new: &Config,
    passwd: &PreparedPasswd,
    prefix: &str,
) -> Result<(), InputError> {
    let (Some(core), Some(_)) = (&passwd.core, &passwd.authorized_keys) else {
        return Ok(());
    };
    let path = super::core_paths::authorized_keys_path(&super::core_paths::core_home(core));
    let field = match new.passwd.users.iter().position(|u| u.name == CORE_USER) {
        Some(i) => format!("{prefix}.passwd.users.{i}.sshAuthorizedKeys"),
        None => format!("{prefix}.passwd"),
    };
    let cannot = |why: String| {
        InputError::new(
            field.clone(),
            format!(
                "cannot write the SSH keys of user {CORE_USER:?} to {:?}: {why}",
                path.display().to_string()
            ),
        )
    };
    match root.lstat(&path) {
        Ok(Some(info)) if info.kind == FileKind::Dir => {
            Err(cannot("it is a directory".to_string()))
        }
        Ok(Some(info)) if info.kind == FileKind::Other => Err(cannot(
            "it is a FIFO, socket or device, not a regular file".to_string(),
        )),
        Ok(_) => Ok(()),
        Err(e) => Err(cannot(e.to_string())),
    }
}
