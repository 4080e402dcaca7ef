//! The unit-file syntax Ignition checks (`invalid unit content: ...`), which the MCO and the MCD
//! apply to every unit and drop-in through Ignition's validator. It is go-systemd's
//! deserializer: text before the first section is skipped, `#`/`;` lines are comments (a
//! trailing `\` continues them), a section header must close on its line with nothing after
//! it, and every other non-blank line must have `=` before its end.
//!
//! go-systemd also refuses a line of 2048 bytes or more when it happens to look ahead far enough
//! (it depends on its read buffer); that check is not reproduced here.
//!
//! Messages give the line number, never the text (unit contents may hold secrets).

/// Where the lexer is: between sections' lines, or inside a section.
#[derive(Clone, Copy, PartialEq)]
enum State {
    BeforeSection,
    InSection,
}

/// Checks `contents` as go-systemd's `DeserializeOptions` would.
pub(super) fn check_unit_syntax(contents: &str) -> Result<(), String> {
    let bytes = contents.as_bytes();
    let mut pos = 0;
    let mut state = State::BeforeSection;
    let line_at = |p: usize| {
        bytes[..p.min(bytes.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    };
    let fail = |what: &str, p: usize| {
        Err(format!(
            "invalid unit content: {what} (line {})",
            line_at(p)
        ))
    };
    while pos < bytes.len() {
        let c = contents[pos..].chars().next().unwrap_or_default();
        let start = pos;
        pos += c.len_utf8();
        match c {
            '[' => {
                // The section name runs to the next `]`, newlines included.
                let Some(close) = bytes[pos..].iter().position(|b| *b == b']') else {
                    return fail("unable to find end of section", start);
                };
                pos += close + 1;
                let (rest, next) = to_eol(bytes, pos);
                if !blank(rest) {
                    return fail("found garbage after section name", start);
                }
                pos = next;
                state = State::InSection;
            }
            '#' | ';' => pos = skip_comment(bytes, pos),
            c if state == State::BeforeSection || c.is_whitespace() => {}
            _ => {
                // An option: its name runs to `=`, which must come before the line ends.
                let Some(eq) = bytes[start..]
                    .iter()
                    .position(|b| matches!(b, b'=' | b'\n' | b'\r'))
                else {
                    return fail("EOF (an option name without \"=\")", start);
                };
                if bytes[start + eq] != b'=' {
                    return fail(
                        "unexpected newline encountered while parsing option name",
                        start,
                    );
                }
                pos = skip_value(bytes, start + eq + 1);
            }
        }
    }
    Ok(())
}

/// The rest of the line from `pos` and where the next line starts, like go-systemd's `toEOL`:
/// without its `\n`, or without a final `\r` on the last line.
fn to_eol(bytes: &[u8], pos: usize) -> (&[u8], usize) {
    match bytes[pos..].iter().position(|b| *b == b'\n') {
        Some(i) => (&bytes[pos..pos + i], pos + i + 1),
        None => {
            let line = &bytes[pos..];
            (line.strip_suffix(b"\r").unwrap_or(line), bytes.len())
        }
    }
}

/// Whether a line is empty once trimmed (Unicode white space, like Go's `TrimSpace`).
fn blank(line: &[u8]) -> bool {
    std::str::from_utf8(line).is_ok_and(|s| s.trim().is_empty())
}

/// Skips a comment line and the lines its trailing backslashes continue.
fn skip_comment(bytes: &[u8], mut pos: usize) -> usize {
    loop {
        let (line, next) = to_eol(bytes, pos);
        let line = line.strip_suffix(b" ").unwrap_or(line);
        pos = next;
        if !line.ends_with(b"\\") || pos >= bytes.len() {
            return pos;
        }
    }
}

/// Skips an option's value and the lines its trailing backslashes continue (a blank line ends
/// it).
fn skip_value(bytes: &[u8], mut pos: usize) -> usize {
    loop {
        let (line, next) = to_eol(bytes, pos);
        pos = next;
        if blank(line) || !line.ends_with(b"\\") || pos >= bytes.len() {
            return pos;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_unit_syntax;

    #[test]
    fn go_systemd_syntax() {
        let ok = [
            "",
            "[Unit]\n",
            "[Service]\nExecStart=/bin/true\n",
            "text before any section is skipped\n[Unit]\nA=b\n",
            "[Unit]\n# comment without equals\n; another\nA=b\n",
            "[Unit]\n# continued \\\nstill a comment\nA=b",
            "[Service]\nExecStart=/bin/sh -c \\\n  'echo hi'\n",
            "[Unit]\nA=\n\n   \n[Install]\nWantedBy=multi-user.target\n",
            "[Unit]   \nA=b\r\n",
            "x",
        ];
        for c in ok {
            assert_eq!(check_unit_syntax(c), Ok(()), "{c:?}");
        }
        let bad = [
            ("[Unit", "unable to find end of section (line 1)"),
            (
                "[Unit] trailing\nA=b\n",
                "found garbage after section name (line 1)",
            ),
            (
                "[Unit]\nA=b\n[X]y\n",
                "found garbage after section name (line 3)",
            ),
            (
                "[Unit]\nsecret-without-equals\nA=b\n",
                "unexpected newline encountered while parsing option name (line 2)",
            ),
            (
                "[Unit]\nA=b\nsecret",
                "EOF (an option name without \"=\") (line 3)",
            ),
        ];
        for (c, want) in bad {
            let got = check_unit_syntax(c).expect_err(c);
            assert_eq!(got, format!("invalid unit content: {want}"), "{c:?}");
            assert!(!got.contains("secret"), "{got}");
        }
    }
}
