//! Go's renderings that the MCD's messages embed: `os.FileMode` (`%v`, `%d`, `%#o`) and `%q`.

/// Go's `os.FileMode` type bits, in the order `FileMode.String` prints their letters.
const GO_TYPE_LETTERS: &str = "dalTLDpSugct?";
const MODE_DIR: u32 = 1 << 31;
const MODE_SYMLINK: u32 = 1 << 27;
const MODE_DEVICE: u32 = 1 << 26;
const MODE_NAMED_PIPE: u32 = 1 << 25;
const MODE_SOCKET: u32 = 1 << 24;
const MODE_SETUID: u32 = 1 << 23;
const MODE_SETGID: u32 = 1 << 22;
const MODE_CHAR_DEVICE: u32 = 1 << 21;
const MODE_STICKY: u32 = 1 << 20;

/// The Go `os.FileMode` that `os.Lstat` reports for a Unix `st_mode`.
pub fn go_file_mode(st_mode: u32) -> u32 {
    let mut mode = st_mode & 0o777;
    mode |= match st_mode & 0o170000 {
        0o060000 => MODE_DEVICE,
        0o020000 => MODE_DEVICE | MODE_CHAR_DEVICE,
        0o040000 => MODE_DIR,
        0o010000 => MODE_NAMED_PIPE,
        0o120000 => MODE_SYMLINK,
        0o140000 => MODE_SOCKET,
        _ => 0,
    };
    if st_mode & 0o4000 != 0 {
        mode |= MODE_SETUID;
    }
    if st_mode & 0o2000 != 0 {
        mode |= MODE_SETGID;
    }
    if st_mode & 0o1000 != 0 {
        mode |= MODE_STICKY;
    }
    mode
}

/// `FileMode.String()`: type letters (or `-`) then `rwxrwxrwx`.
pub fn go_mode_string(mode: u32) -> String {
    let mut out = String::with_capacity(12);
    for (i, c) in GO_TYPE_LETTERS.chars().enumerate() {
        if mode & (1 << (31 - i)) != 0 {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push('-');
    }
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        out.push(if mode & (1 << (8 - i)) != 0 { c } else { '-' });
    }
    out
}

/// `%[1]v/%[1]d/%#[1]o` of a `FileMode`, as in `-rw-r--r--/420/0644`.
pub fn go_mode_triple(mode: u32) -> String {
    let octal = if mode == 0 {
        "0".to_string()
    } else {
        format!("0{mode:o}")
    };
    format!("{}/{mode}/{octal}", go_mode_string(mode))
}

/// Go's `%q` of a string: double-quoted with Go escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_triples_match_go() {
        let cases = [
            (0o100644, "-rw-r--r--/420/0644"),
            (0o100755, "-rwxr-xr-x/493/0755"),
            (0o120777, "Lrwxrwxrwx/134218239/01000000777"),
            (0o040755, "drwxr-xr-x/2147484141/020000000755"),
            (0o020666, "Dcrw-rw-rw-/69206454/0410000666"),
            (0o104755, "urwxr-xr-x/8389101/040000755"),
            (0o101777, "trwxrwxrwx/1049087/04000777"),
            (0o100000, "----------/0/0"),
        ];
        for (st_mode, want) in cases {
            assert_eq!(go_mode_triple(go_file_mode(st_mode)), want, "{st_mode:o}");
        }
    }

    #[test]
    fn quoting_matches_go() {
        assert_eq!(go_quote("/etc/foo"), "\"/etc/foo\"");
        assert_eq!(go_quote("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\x01\"");
        assert_eq!(go_quote("/etc/é"), "\"/etc/é\"");
    }
}
