//! Setting a user's password hash in the root's `etc/shadow`, the way `usermod -p` does, but as
//! one atomic rewrite of the file that keeps its mode and owner.

use std::path::Path;

use rustix::io::Errno;

use super::{Root, RootError};

/// Path of the shadow database inside the root.
pub const SHADOW: &str = "/etc/shadow";

/// Mode given to a shadow file whose mode cannot be read (Fedora ships it 0000).
const SHADOW_FALLBACK_MODE: u32 = 0o000;

/// The hash field of `user` in the root's shadow file, `None` if the user has no entry.
pub fn password_hash(root: &Root, user: &str) -> Result<Option<String>, RootError> {
    let text = root.read_to_string(Path::new(SHADOW))?.unwrap_or_default();
    Ok(text.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next() == Some(user)).then(|| fields.next().unwrap_or("").to_string())
    }))
}

/// Sets the hash field of `user` to `hash` and, when it changes, the last-change date to today
/// (as `usermod -p` does). Returns whether the file changed. A user without an entry is an error
/// (`usermod` fails the same way), and so is a user or hash that would not stay one field of one
/// line: configs are validated before they get here, this is the last line of defence.
pub fn set_password_hash(root: &Root, user: &str, hash: &str) -> Result<bool, RootError> {
    let path = Path::new(SHADOW);
    refuse_separators(user, hash)?;
    let text = root
        .read_to_string(path)?
        .ok_or_else(|| RootError::io("open", path, Errno::NOENT))?;
    let (updated, found, changed) = replace_hash(&text, user, hash, days_since_epoch());
    if !found {
        return Err(RootError::io(
            "usermod",
            path,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("user '{user}' does not exist"),
            ),
        ));
    }
    if !changed {
        return Ok(false);
    }
    let (mode, owner) = match root.lstat(path)? {
        Some(info) => (info.permissions(), info.owner),
        None => (SHADOW_FALLBACK_MODE, super::Owner::ROOT),
    };
    root.write_atomic(path, updated.as_bytes(), mode, owner)?;
    Ok(true)
}

/// Characters that would end a shadow field (`:`) or entry (a line break), or a C string.
const SEPARATORS: [char; 4] = [':', '\n', '\r', '\0'];

/// Refuses a user name or hash holding a [`SEPARATORS`] character; the hash is never shown.
fn refuse_separators(user: &str, hash: &str) -> Result<(), RootError> {
    let refuse = |what: String| {
        Err(RootError::io(
            "usermod",
            SHADOW,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{what} contains ':', a line break or NUL: refusing to write it"),
            ),
        ))
    };
    if user.is_empty() || user.contains(SEPARATORS) {
        return refuse(format!("the user name {user:?}"));
    }
    if hash.contains(SEPARATORS) {
        return refuse(format!("the password hash (not shown) of user {user:?}"));
    }
    Ok(())
}

/// Days since 1970-01-01, the unit of shadow's last-change field.
fn days_since_epoch() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    (secs / 86_400).to_string()
}

/// Rewrites `text` with `user`'s second field set to `hash` (and the third, the last change, to
/// `today` when the hash changes): (new text, user found, changed).
fn replace_hash(text: &str, user: &str, hash: &str, today: String) -> (String, bool, bool) {
    let mut found = false;
    let mut changed = false;
    let mut out = String::with_capacity(text.len() + hash.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let mut fields: Vec<&str> = body.split(':').collect();
        if !found && fields.first() == Some(&user) && fields.len() >= 2 {
            found = true;
            if fields[1] != hash {
                changed = true;
                fields[1] = hash;
                if fields.len() >= 3 {
                    fields[2] = &today;
                }
            }
            out.push_str(&fields.join(":"));
        } else {
            out.push_str(body);
        }
        out.push_str(newline);
    }
    (out, found, changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_only_the_hash_field_of_the_user() {
        let text = "root:*:19000:0:99999:7:::\ncore:!!:19000:0:99999:7:::\ncoreos:x:1::::::";
        let (out, found, changed) = replace_hash(text, "core", "$6$salt$hash", "20000".into());
        assert!(found && changed);
        assert_eq!(
            out,
            "root:*:19000:0:99999:7:::\ncore:$6$salt$hash:20000:0:99999:7:::\ncoreos:x:1::::::"
        );
        let (_, found, changed) = replace_hash(&out, "core", "$6$salt$hash", "20001".into());
        assert!(found && !changed);
        let (_, found, _) = replace_hash(text, "nobody", "x", "1".into());
        assert!(!found);
    }

    #[test]
    fn writes_atomically_keeping_mode() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        let shadow = dir.path().join("etc/shadow");
        std::fs::write(&shadow, "core:*:1:0:99999:7:::\n").unwrap();
        std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o640)).unwrap();
        let root = Root::open(dir.path()).unwrap();
        assert!(set_password_hash(&root, "core", "$6$x$y").unwrap());
        assert_eq!(
            std::fs::read_to_string(&shadow).unwrap(),
            format!("core:$6$x$y:{}:0:99999:7:::\n", days_since_epoch())
        );
        assert_eq!(
            std::fs::metadata(&shadow).unwrap().permissions().mode() & 0o7777,
            0o640
        );
        assert_eq!(
            password_hash(&root, "core").unwrap().as_deref(),
            Some("$6$x$y")
        );
        assert!(!set_password_hash(&root, "core", "$6$x$y").unwrap());
        let err = set_password_hash(&root, "alice", "x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "usermod /etc/shadow: user 'alice' does not exist"
        );
    }

    #[test]
    fn refuses_a_hash_or_user_that_would_split_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        let shadow = dir.path().join("etc/shadow");
        let text = "root:*:1:0:99999:7:::\ncore:*:1:0:99999:7:::\n";
        std::fs::write(&shadow, text).unwrap();
        let root = Root::open(dir.path()).unwrap();
        for hash in ["$6$s$h\nroot::0:0:99999:7:::", "$6$s$h:0", "x\r", "x\0"] {
            let err = set_password_hash(&root, "core", hash).unwrap_err();
            assert_eq!(
                err.to_string(),
                "usermod /etc/shadow: the password hash (not shown) of user \"core\" contains ':', \
                 a line break or NUL: refusing to write it"
            );
        }
        let err = set_password_hash(&root, "core:x", "$6$s$h").unwrap_err();
        assert_eq!(
            err.to_string(),
            "usermod /etc/shadow: the user name \"core:x\" contains ':', a line break or NUL: \
             refusing to write it"
        );
        assert_eq!(std::fs::read_to_string(&shadow).unwrap(), text);
    }
}
