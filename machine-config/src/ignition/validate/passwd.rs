//! `passwd`: users and groups (duplicates, as Ignition checks them) and their password hashes.
//!
//! A password hash ends up as a field of `/etc/shadow` (or `/etc/gshadow`), whose fields are
//! separated by `:` and whose entries are lines: a hash holding either would split or add an
//! entry (a second `root::...` line is an empty root password). Ignition and the MCD write the
//! hash as it is. Here a hash is refused only where writing it would corrupt the shadow file or
//! lock the account by accident; every hash glibc's crypt(3) takes is accepted (its MD5, SHA and
//! bcrypt methods take any character but `$` in the salt, so `$1$+i1#1svK$...` is a valid
//! MD5-crypt hash). The message says what is wrong without ever showing the hash.

use std::collections::HashMap;

use super::{Report, named, unique_strings};
use crate::ignition::types::Config;

/// Characters of crypt(3)'s hash encoding (`./0-9A-Za-z`): what crypt writes after the last
/// `$`, so a hash with anything else there matches no password.
fn crypt_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '.' || c == '/'
}

/// What a method id may hold: lower-case letters and digits, and the parameters Sun's MD5 puts
/// in it (`$md5,rounds=5000$`).
fn method_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == ',' || c == '='
}

/// Length of a traditional DES hash (two salt characters, eleven of hash).
const DES_HASH_LEN: usize = 13;

/// Length of a BSDi extended DES hash (`_`, four of rounds, four of salt, eleven of hash).
const BSDI_HASH_LEN: usize = 20;

/// The forms accepted, for messages.
const FORMS: &str = "a crypt(3) hash ($id$salt$hash), \"*\", a \"!\"-locked hash, or empty";

/// Checks a password hash: empty (no password), any number of `!` (a locked account) before
/// `*`, nothing, or a crypt(3) hash: `$id$[params$]salt$hash` (the salt and parameters as glibc
/// takes them: anything but `$`, even empty; the hash in crypt's alphabet), a traditional or a
/// BSDi DES hash. Refused: what would split the shadow entry (`:`, line breaks, control
/// characters) and what no password can match. The error never contains the hash.
pub(crate) fn check_password_hash(hash: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("password hash (not shown) is not {FORMS}: {why}"));
    if hash.contains(['\n', '\r']) {
        return bad("it contains a line break, which would end the shadow entry");
    }
    if hash.contains(':') {
        return bad("it contains ':', the shadow file's field separator");
    }
    if hash.chars().any(|c| c.is_control()) {
        return bad("it contains a control character");
    }
    let body = hash.trim_start_matches('!');
    if body.is_empty() || body == "*" {
        return Ok(());
    }
    if let Some(rest) = body.strip_prefix('$') {
        let mut fields = rest.split('$');
        let id = fields.next().unwrap_or_default();
        if id.is_empty() || !id.chars().all(method_char) {
            return bad(
                "the method id between the first two '$' is not lower-case letters and digits",
            );
        }
        let fields: Vec<&str> = fields.collect();
        let Some((hashed, _salt_and_params)) = fields.split_last().filter(|_| fields.len() >= 2)
        else {
            return bad("it has no '$' between its salt and its hash");
        };
        if hashed.is_empty() {
            return bad("the hash after the last '$' is empty, so no password matches it");
        }
        if !hashed.chars().all(crypt_char) {
            return bad(
                "the hash after the last '$' has a character outside crypt(3)'s alphabet \
                 (./0-9A-Za-z), so no password matches it",
            );
        }
        return Ok(());
    }
    let des = body.len() == DES_HASH_LEN || (body.len() == BSDI_HASH_LEN && body.starts_with('_'));
    if des && body.trim_start_matches('_').chars().all(crypt_char) {
        return Ok(());
    }
    bad("it does not start with '$' and is not a 13-character DES hash")
}

/// Why an SSH key entry is not one `authorized_keys` line: each entry becomes a line, so a line
/// break (or a carriage return, a NUL, any other control character but a tab) would add lines
/// of its own (another key, or options such as `command=`) that no reviewer of the entry sees.
fn key_line_break(key: &str) -> Option<String> {
    let c = key.chars().find(|c| c.is_control() && *c != '\t')?;
    let what = match c {
        '\n' => "a line break (\\n)".to_string(),
        '\r' => "a carriage return (\\r)".to_string(),
        '\0' => "a NUL".to_string(),
        c => format!("a control character (U+{:04X})", u32::from(c)),
    };
    Some(format!(
        "SSH key (not shown) has {what}: each entry must be one authorized_keys line"
    ))
}

pub(super) fn validate_passwd(cfg: &Config, r: &mut Report) {
    let mut users: HashMap<&str, usize> = HashMap::new();
    for (i, u) in cfg.passwd.users.iter().enumerate() {
        let at = format!("$.passwd.users.{i}");
        let subject = format!("user {}", named(&u.name));
        if let Some(first) = users.get(u.name.as_str()) {
            r.err(
                format!("{at}.name"),
                &subject,
                format!("duplicate entry defined: already defined at $.passwd.users.{first}"),
            );
        } else {
            users.insert(&u.name, i);
        }
        if let Some(Err(e)) = u.password_hash.as_deref().map(check_password_hash) {
            r.err(format!("{at}.passwordHash"), &subject, e);
        }
        for (j, key) in u.ssh_authorized_keys.iter().enumerate() {
            if let Some(why) = key_line_break(key) {
                r.err(format!("{at}.sshAuthorizedKeys.{j}"), &subject, why);
            }
        }
        let keys = u.ssh_authorized_keys.iter().map(String::as_str);
        unique_strings(
            &format!("{at}.sshAuthorizedKeys"),
            &subject,
            "SSH key",
            keys,
            false,
            r,
        );
        let groups = u.groups.iter().map(String::as_str);
        unique_strings(&format!("{at}.groups"), &subject, "group", groups, true, r);
    }
    let mut groups: HashMap<&str, usize> = HashMap::new();
    for (i, g) in cfg.passwd.groups.iter().enumerate() {
        let subject = format!("group {}", named(&g.name));
        if let Some(first) = groups.get(g.name.as_str()) {
            r.err(
                format!("$.passwd.groups.{i}.name"),
                &subject,
                format!("duplicate entry defined: already defined at $.passwd.groups.{first}"),
            );
        } else {
            groups.insert(&g.name, i);
        }
        if let Some(Err(e)) = g.password_hash.as_deref().map(check_password_hash) {
            r.err(format!("$.passwd.groups.{i}.passwordHash"), &subject, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{check_password_hash, key_line_break};

    #[test]
    fn ssh_keys_are_one_line_each() {
        for (key, want) in [
            ("ssh-ed25519 AAAA user@host", None),
            ("ssh-ed25519\tAAAA\tuser", None),
            (
                "ssh-ed25519 AAAA a\ncommand=\"sh\" ssh-ed25519 BBBB",
                Some("a line break (\\n)"),
            ),
            ("ssh-ed25519 AAAA a\r", Some("a carriage return (\\r)")),
            ("ssh-ed25519 AAAA\0", Some("a NUL")),
            (
                "ssh-ed25519 AAAA\u{1b}[2J",
                Some("a control character (U+001B)"),
            ),
        ] {
            let got = key_line_break(key);
            match want {
                None => assert_eq!(got, None, "{key:?}"),
                Some(part) => {
                    let got = got.unwrap_or_else(|| panic!("{key:?} passed"));
                    assert!(got.contains(part), "{key:?}: {got}");
                    assert!(!got.contains("AAAA"), "the key is shown: {got}");
                }
            }
        }
    }

    /// One row per form: the hash, and whether glibc's crypt(3) and shadow(5) take it (the MCD
    /// writes `passwordHash` as given, `update.go` `SetPasswordHash`; so does Ignition).
    #[test]
    fn accepts_every_form_crypt_and_shadow_take() {
        for (ok, form) in [
            ("", "empty: no password"),
            ("*", "no password login"),
            ("!", "locked, no password"),
            ("!!", "locked twice (useradd's default)"),
            ("!*", "locked"),
            ("!$6$salt$hash", "a locked SHA-512 hash"),
            ("$6$saltsalt$Gz0r8G5sQ0Ji5F1a/x.Y", "SHA-512"),
            ("$6$rounds=5000$salt$hash", "SHA-512 with rounds"),
            ("$6$$hash", "SHA-512, empty salt"),
            (
                "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$X3DX6M94c7o.9agCG9G317fhZg9SqC.5i5rd.RhAtQ7",
                "yescrypt",
            ),
            (
                "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW",
                "bcrypt",
            ),
            ("$1$abc$def", "MD5"),
            (
                "$1$+i1#1svK$cS8m8U0tQ/7zqvGAVcCk01",
                "MD5 with '+' and '#' in its salt (the regression)",
            ),
            (
                "$5$s@lt %&$hash",
                "SHA-256: any character but '$' in the salt",
            ),
            ("$6$sälz$hash", "a non-ASCII salt (glibc takes bytes)"),
            ("$3$$8846f7eaee8fb117ad06bdd830b7586c", "NT hash, no salt"),
            (
                "$md5,rounds=5000$GUBv0xjJ$$mSwgIswdjlTY0YxV7HBVm0",
                "Sun MD5",
            ),
            ("abJnggxhB/yWI", "traditional DES"),
            ("_J9..CCCCXBrJUJV154M", "BSDi extended DES"),
        ] {
            assert_eq!(check_password_hash(ok), Ok(()), "{form}: {ok:?}");
        }
    }

    /// One row per refusal: what would corrupt the shadow file or lock the account by accident.
    #[test]
    fn refuses_what_would_corrupt_shadow_without_showing_it() {
        for (bad, why) in [
            ("$6$s$h\nroot::0:0:99999:7:::", "line break"),
            ("$6$s$h\r", "line break"),
            ("$6$s:$h", "':'"),
            ("$6$s\u{7}$h", "control character"),
            ("$6$x", "no '$' between"),
            ("$6$s$", "hash after the last '$' is empty"),
            ("$$s$h", "method id"),
            ("$SHA$s$h", "method id"),
            ("$6$s$h h", "outside crypt(3)'s alphabet"),
            ("$6$s$hé", "outside crypt(3)'s alphabet"),
            ("hunter2", "does not start with '$'"),
            ("*LK*", "does not start with '$'"),
            ("_J9..CCCCXBrJUJV154", "does not start with '$'"),
        ] {
            let e = check_password_hash(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(
                e.starts_with("password hash (not shown) is not a crypt(3) hash"),
                "{e}"
            );
            assert!(!e.contains(bad), "{bad:?} shown in {e}");
        }
    }
}
