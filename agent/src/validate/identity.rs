//! What an intruder would change besides a file's mode and bytes: who owns a managed file, core's
//! SSH keys and core's password hash. The MCD checks none of them; a `chown` of a managed file, a
//! key appended to core's key file or a new password hash would pass its validation. Here each
//! is a mismatch, named without printing a key or a hash.

use std::path::{Path, PathBuf};

use machine_config::ignition::NodeOwner;
use machine_config::ignition::PasswdUser;
use machine_config::{Config, File};

use super::go_quote;
use super::report::{Facts, Mismatch, MismatchKind, octal, public_digest, sha256_hex};
use crate::apply::authorized_keys_path;
use crate::rootfs::accounts::{Accounts, User};
use crate::rootfs::{Owner, Root, shadow};

/// The only user whose keys and password the agent manages.
const CORE: &str = "core";

/// Home of `core` when the user database does not say (as apply assumes).
const CORE_HOME: &str = "/home/core";

/// Mode apply gives core's keys file.
const KEYS_MODE: u32 = 0o600;

/// The owner a config gives `file` (Ignition's rule: `id`, else `name` in the root's user
/// database, else root), or why it cannot be known.
pub(super) fn expected_owner(accounts: &Accounts, file: &File) -> Result<Owner, String> {
    let uid = resolve(&file.user, |n| accounts.user(n).map(|u| u.uid), "user")?;
    let gid = resolve(&file.group, |n| accounts.group(n).map(|g| g.gid), "group")?;
    Ok(Owner { uid, gid })
}

fn resolve(
    who: &NodeOwner,
    lookup: impl Fn(&str) -> Option<u32>,
    what: &str,
) -> Result<u32, String> {
    match (who.id, who.name.as_deref().filter(|n| !n.is_empty())) {
        (Some(id), _) => u32::try_from(id).map_err(|_| format!("{what} id {id} is out of range")),
        (None, Some(name)) => lookup(name).ok_or_else(|| format!("no {what} {name:?} in the root")),
        (None, None) => Ok(0),
    }
}

/// `uid:gid`, with the names the root's user database gives them (`0:0 (root:root)`).
pub(super) fn describe_owner(accounts: &Accounts, owner: Owner) -> String {
    let user = accounts.user_by_id(owner.uid).map(|u| u.name.as_str());
    let group = accounts.group_by_id(owner.gid).map(|g| g.name.as_str());
    match (user, group) {
        (Some(u), Some(g)) => format!("{}:{} ({u}:{g})", owner.uid, owner.gid),
        _ => format!("{}:{}", owner.uid, owner.gid),
    }
}

/// Facts of an owner, for the report.
pub(super) fn owner_facts(owner: Owner) -> Facts {
    Facts {
        owner: Some(format!("{}:{}", owner.uid, owner.gid)),
        ..Facts::default()
    }
}

/// The owner mismatch of `path`, if its owner `found` is not `expected`.
pub(super) fn check_owner(
    accounts: &Accounts,
    path: &str,
    unit: Option<&str>,
    expected: Owner,
    found: Owner,
) -> Option<Mismatch> {
    (expected != found).then(|| Mismatch {
        path: path.to_string(),
        unit: unit.map(str::to_string),
        kind: MismatchKind::Owner,
        message: format!(
            "owner mismatch for file: {}; expected: {}; received: {}",
            go_quote(path),
            describe_owner(accounts, expected),
            describe_owner(accounts, found)
        ),
        expected: owner_facts(expected),
        found: Some(owner_facts(found)),
    })
}

/// What the config and the root say about `core`: the config's entries for it, the root's
/// `core` user and the path of its keys file; `None` when either has no `core` (apply manages
/// neither keys nor hash then).
struct Core<'a> {
    entries: Vec<&'a PasswdUser>,
    user: &'a User,
    keys_path: PathBuf,
}

impl<'a> Core<'a> {
    fn of(accounts: &'a Accounts, config: &'a Config) -> Option<Core<'a>> {
        let entries: Vec<_> = config
            .passwd
            .users
            .iter()
            .filter(|u| u.name == CORE)
            .collect();
        let user = accounts.user(CORE)?;
        if entries.is_empty() {
            return None;
        }
        let home = if user.home.starts_with('/') {
            user.home.as_str()
        } else {
            CORE_HOME
        };
        Some(Core {
            entries,
            user,
            keys_path: authorized_keys_path(Path::new(home)),
        })
    }

    /// The last non-empty password hash the config gives core.
    fn hash(&self) -> Option<&'a str> {
        self.entries
            .iter()
            .filter_map(|u| u.password_hash.as_deref())
            .rfind(|h| !h.is_empty())
    }
}

/// The paths [`check_core`] reads for `config` on this root: core's keys file and, when the
/// config gives core a password hash, the shadow file (what the drift monitor watches besides
/// the managed files). Empty when the config or the root has no `core`.
pub(super) fn core_paths(accounts: &Accounts, config: &Config) -> Vec<String> {
    let Some(core) = Core::of(accounts, config) else {
        return Vec::new();
    };
    let mut paths = vec![core.keys_path.display().to_string()];
    if core.hash().is_some() {
        paths.push(shadow::SHADOW.to_string());
    }
    paths
}

/// core's keys file and password hash against `config`, when the config has a `core` entry and
/// the root a `core` user (apply manages neither otherwise). The keys file must hold exactly the
/// config's keys (none: absent or empty), mode 0600, owned by core; the hash must be the
/// config's when it gives one.
pub(super) fn check_core(
    root: &Root,
    accounts: &Accounts,
    config: &Config,
    out: &mut Vec<Mismatch>,
) {
    let Some(core) = Core::of(accounts, config) else {
        return;
    };
    let keys: String = core
        .entries
        .iter()
        .flat_map(|u| u.ssh_authorized_keys.iter())
        .map(|k| format!("{k}\n"))
        .collect();
    let path = core.keys_path.clone();
    let shown = path.display().to_string();
    let owner = Owner {
        uid: core.user.uid,
        gid: core.user.gid,
    };
    let expected = Facts {
        owner: Some(format!("{}:{}", owner.uid, owner.gid)),
        ..Facts::of_contents(KEYS_MODE, keys.as_bytes())
    };
    let keys_mismatch = |kind, message: String, found| Mismatch {
        path: shown.clone(),
        unit: None,
        kind,
        message,
        expected: expected.clone(),
        found,
    };
    let subject = format!("SSH keys of user {}", go_quote(CORE));
    match (root.lstat(&path), root.read(&path)) {
        (Ok(None), _) if keys.is_empty() => {}
        (Ok(Some(info)), Ok(Some(bytes))) => {
            let found = Facts {
                kind: Some("file"),
                mode: Some(octal(info.permissions())),
                size: Some(bytes.len() as u64),
                sha256: public_digest(info.permissions(), || sha256_hex(&bytes)),
                owner: Some(format!("{}:{}", info.owner.uid, info.owner.gid)),
                ..Facts::default()
            };
            if bytes != keys.as_bytes() {
                out.push(keys_mismatch(
                    MismatchKind::Content,
                    format!("content mismatch for {subject} in {}", go_quote(&shown)),
                    Some(found.clone()),
                ));
            }
            if info.permissions() != KEYS_MODE {
                out.push(keys_mismatch(
                    MismatchKind::Mode,
                    format!(
                        "mode mismatch for {subject} in {}; expected: {}; received: {}",
                        go_quote(&shown),
                        octal(KEYS_MODE),
                        octal(info.permissions())
                    ),
                    Some(found.clone()),
                ));
            }
            out.extend(check_owner(accounts, &shown, None, owner, info.owner));
        }
        (Ok(None), _) | (Ok(Some(_)), Ok(None)) => out.push(keys_mismatch(
            MismatchKind::Missing,
            format!("missing {subject}: {} does not exist", go_quote(&shown)),
            None,
        )),
        (Err(e), _) | (_, Err(e)) => out.push(keys_mismatch(
            MismatchKind::Unreadable,
            format!("could not read {subject} in {}: {e}", go_quote(&shown)),
            None,
        )),
    }

    let Some(hash) = core.hash() else {
        return;
    };
    let hash_mismatch = |kind, message: String| Mismatch {
        path: shadow::SHADOW.to_string(),
        unit: None,
        kind,
        message,
        expected: Facts::default(),
        found: None,
    };
    match shadow::password_hash(root, CORE) {
        Ok(Some(found)) if found == hash => {}
        Ok(Some(_)) => out.push(hash_mismatch(
            MismatchKind::PasswordHash,
            format!("password hash mismatch for user {}", go_quote(CORE)),
        )),
        Ok(None) => out.push(hash_mismatch(
            MismatchKind::Missing,
            format!("no entry for user {} in {}", go_quote(CORE), shadow::SHADOW),
        )),
        Err(e) => out.push(hash_mismatch(
            MismatchKind::Unreadable,
            format!(
                "could not read the password hash of user {}: {e}",
                go_quote(CORE)
            ),
        )),
    }
}
