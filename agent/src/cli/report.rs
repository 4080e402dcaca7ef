//! What a one-shot command prints for people on stderr: `error: …`, `warning: …` and
//! `hint: …` lines, coloured only on a terminal (and never with `NO_COLOR` or `TERM=dumb`),
//! without timestamps or module paths.
//!
//! An error is printed as its chain of causes joined by `: `, each cause once: a cause whose
//! text the message already carries (an error that prints its source, as the file layer's
//! `open /x: no such file or directory` does) is left out, and the C library's text of an I/O
//! error is printed as the MCD prints it (`no such file or directory`, not `No such file or
//! directory (os error 2)`).

use super::exit::{exit_of, hint_of};
use crate::rootfs::go_error_text;

pub use crate::logging::human::{Label, colour_for, stderr_colour, stdout_colour};

/// `error`'s message: its causes joined by `: `, each said once (see the module's comment).
pub fn chain(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        // a classified error prints its own chain: nothing under it is printed again
        let text = match cause.downcast_ref::<std::io::Error>() {
            Some(io) => go_error_text(io),
            None => cause.to_string(),
        };
        if text.is_empty() || said(&out, &text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
        if cause.is::<super::exit::Classified>() {
            break;
        }
    }
    out
}

/// Whether `text` (or its C-library wording) is already in `message`.
fn said(message: &str, text: &str) -> bool {
    if message.contains(text) {
        return true;
    }
    // `No such file or directory (os error 2)` printed by a cause's own Display
    let plain = match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => text,
    };
    let lower = message.to_lowercase();
    lower.contains(&plain.to_lowercase())
}

/// The lines `mco-agent` prints for a failed command: `error: …`, and `hint: …` when the
/// error carries one.
pub fn error_lines(error: &anyhow::Error, colour: bool) -> String {
    let mut out = format!("{} {}\n", Label::Error.prefix(colour), chain(error));
    if let Some(hint) = hint_of(error) {
        out.push_str(&format!("{} {hint}\n", Label::Hint.prefix(colour)));
    }
    out
}

/// Prints a failed command's lines on stderr and returns its exit code.
pub fn fail(error: &anyhow::Error) -> std::process::ExitCode {
    eprint!("{}", error_lines(error, stderr_colour()));
    exit_of(error).into()
}

/// A line for people on stderr: `warning: …`, `hint: …`.
pub fn say(label: Label, message: impl std::fmt::Display) {
    eprintln!("{} {message}", label.prefix(stderr_colour()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::exit::{Classify, Exit};
    use crate::rootfs::RootError;

    #[test]
    fn each_cause_is_said_once_and_os_errors_read_like_the_mcd() {
        let io = || std::io::Error::from_raw_os_error(2);
        let rows: Vec<(anyhow::Error, &str)> = vec![
            (
                anyhow::Error::new(RootError::io("open", "/nonexistent", io())),
                "open /nonexistent: no such file or directory",
            ),
            (
                anyhow::Error::new(io()).context("reading /x.yaml"),
                "reading /x.yaml: no such file or directory",
            ),
            (anyhow::anyhow!("b").context("a").context("a"), "a: b"),
        ];
        for (e, want) in rows {
            assert_eq!(chain(&e), want);
        }
    }

    #[test]
    fn error_lines_carry_the_hint_and_colour_only_when_asked() {
        let e: anyhow::Result<()> = Err(anyhow::anyhow!("the disk differs"));
        let e = e.hint(Exit::NotAsWanted, "mco-agent recover").unwrap_err();
        assert_eq!(
            error_lines(&e, false),
            "error: the disk differs\nhint: mco-agent recover\n"
        );
        assert!(error_lines(&e, true).starts_with("\x1b[1;31merror:\x1b[0m the disk differs\n"));
    }
}
