//! Writing `core`'s SSH keys and password hash.

use std::path::Path;

use anyhow::{Context, Result};

use super::ApplyOutcome;
use super::core_paths::{authorized_keys_path, core_home};
use super::files;
use super::prepare::{FileContents, PreparedFile, PreparedPasswd};
use crate::rootfs::{Owner, Root, shadow};

/// Mode of `~/.ssh` and `~/.ssh/authorized_keys.d`.
const SSH_DIR_MODE: u32 = 0o700;
/// Mode of the keys file.
const KEYS_MODE: u32 = 0o600;
/// Mode of a home directory the agent has to create.
const HOME_MODE: u32 = 0o755;

/// Writes the keys file (0600, directories 0700, all owned by core) unless it is left alone
/// (see [`PreparedPasswd::authorized_keys`]), and the password hash. A root without a `core`
/// user gets neither (recorded in `out.skipped`), as the MCD skips them.
pub(crate) fn write_passwd(
    root: &Root,
    passwd: &PreparedPasswd,
    out: &mut ApplyOutcome,
) -> Result<()> {
    let Some(core) = &passwd.core else {
        out.skipped.push(
            "SSH keys and password hash of core: the root has no user core in /etc/passwd"
                .to_string(),
        );
        return Ok(());
    };
    let owner = Owner {
        uid: core.uid,
        gid: core.gid,
    };
    if let Some(keys) = &passwd.authorized_keys {
        write_keys(root, &core_home(core), owner, keys, out)?;
    }

    match shadow::password_hash(root, &core.name)? {
        None => out
            .skipped
            .push("password hash of core: the root has no core entry in /etc/shadow".to_string()),
        Some(current) if current == passwd.password_hash => {}
        Some(_) => {
            shadow::set_password_hash(root, &core.name, &passwd.password_hash)?;
            tracing::info!("set the password hash of core");
            out.password_changed = true;
        }
    }
    Ok(())
}

fn write_keys(
    root: &Root,
    home: &Path,
    owner: Owner,
    keys: &str,
    out: &mut ApplyOutcome,
) -> Result<()> {
    if root.lstat(home)?.is_none() {
        root.create_dir(home, HOME_MODE, owner)?;
    }
    // A `.ssh` made by root (OCPBUGS-11832) is handed back to core rather than deleted.
    let ssh = home.join(".ssh");
    root.create_dir(&ssh, SSH_DIR_MODE, owner)?;
    root.create_dir(&ssh.join("authorized_keys.d"), SSH_DIR_MODE, owner)?;
    let keys = PreparedFile {
        path: authorized_keys_path(home),
        contents: FileContents::Bytes(keys.as_bytes().to_vec()),
        mode: KEYS_MODE,
        owner,
    };
    out.ssh_keys_written =
        files::write_if_different(root, &keys).context("writing SSH keys of core")?;
    Ok(())
}
