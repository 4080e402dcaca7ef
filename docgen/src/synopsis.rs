//! A page's SYNOPSIS with the placeholder of every option that takes a value
//! (`[--root ROOT]`, `[-o|--output FORMAT]`): clap_mangen's leaves them out (`[--root]`), which
//! reads as a switch. Hidden options stay out, as in `--help`; so do `--help` and `--version`,
//! as in clap's usage line.

use clap::{Arg, ArgAction, Command};
use roff::{Inline, Roff, bold, italic, roman};

/// The SYNOPSIS section of `command` (its `bin_name` is what the line starts with).
pub fn render(command: &Command) -> Roff {
    let mut line = vec![bold(
        command
            .get_bin_name()
            .unwrap_or(command.get_name())
            .to_string(),
    )];
    let options = command
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        // --help and --version are under OPTIONS, as clap's usage line leaves them out
        .filter(|a| !matches!(a.get_action(), ArgAction::Help | ArgAction::Version));
    for arg in options {
        line.push(roman(" "));
        line.extend(option(arg));
    }
    for arg in command.get_positionals().filter(|a| !a.is_hide_set()) {
        line.push(roman(" "));
        line.extend(positional(arg));
    }
    if command.get_subcommands().any(|s| !s.is_hide_set()) {
        line.push(roman(" "));
        line.push(italic("COMMAND"));
    }
    let mut roff = Roff::new();
    roff.control("SH", ["SYNOPSIS"]);
    // left-aligned and unhyphenated, so that an option and its placeholder read as typed
    roff.control("ad", ["l"]);
    roff.control("nh", []);
    roff.text(line);
    roff.control("ad", ["b"]);
    roff.control("hy", []);
    roff
}

/// `[-o|--output FORMAT]`, `[-v|--verbose]...`, `--config FILE` when required.
fn option(arg: &Arg) -> Vec<Inline> {
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    let mut inner = vec![bold(names.join("|"))];
    if arg.get_action().takes_values() {
        let value = value_names(arg).join(" ");
        inner.push(roman(" "));
        inner.push(match arg.is_require_equals_set() {
            true => italic(format!("={value}")),
            false => italic(value),
        });
    }
    let repeats = matches!(arg.get_action(), ArgAction::Append | ArgAction::Count);
    wrap(inner, arg.is_required_set(), repeats)
}

/// `OLD`, `[FILE]`, `ARGS...`.
fn positional(arg: &Arg) -> Vec<Inline> {
    let repeats = matches!(arg.get_action(), ArgAction::Append)
        || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    wrap(
        vec![italic(value_names(arg).join(" "))],
        arg.is_required_set(),
        repeats,
    )
}

/// The placeholder(s): the value names clap shows in `--help` (the id in capitals without one).
fn value_names(arg: &Arg) -> Vec<String> {
    match arg.get_value_names() {
        Some(names) if !names.is_empty() => names.iter().map(|n| n.to_string()).collect(),
        _ => vec![arg.get_id().as_str().to_uppercase()],
    }
}

fn wrap(inner: Vec<Inline>, required: bool, repeats: bool) -> Vec<Inline> {
    let mut out = Vec::new();
    if !required {
        out.push(roman("["));
    }
    out.extend(inner);
    if !required {
        out.push(roman("]"));
    }
    if repeats {
        out.push(roman("..."));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(command: Command) -> String {
        let mut command = command;
        command.build();
        let roff = render(&command).to_roff();
        roff.lines()
            .filter(|l| !l.starts_with('.'))
            .collect::<Vec<_>>()
            .join("\n")
            .replace("\\fB", "")
            .replace("\\fI", "")
            .replace("\\fR", "")
            .replace("\\-", "-")
    }

    #[test]
    fn every_value_has_its_placeholder() {
        let rows: &[(Command, &str)] = &[
            (
                Command::new("x").arg(Arg::new("root").long("root").default_value("/")),
                "x [--root ROOT]",
            ),
            (
                Command::new("x").arg(
                    Arg::new("output")
                        .short('o')
                        .long("output")
                        .value_name("FORMAT"),
                ),
                "x [-o|--output FORMAT]",
            ),
            (
                Command::new("x").arg(
                    Arg::new("yes")
                        .short('y')
                        .long("yes")
                        .action(ArgAction::SetTrue),
                ),
                "x [-y|--yes]",
            ),
            (
                Command::new("x").arg(Arg::new("verbose").short('v').action(ArgAction::Count)),
                "x [-v]...",
            ),
            (
                Command::new("x").arg(Arg::new("file").long("file").required(true)),
                "x --file FILE",
            ),
            (
                Command::new("x").arg(Arg::new("window").long("window").action(ArgAction::Append)),
                "x [--window WINDOW]...",
            ),
            (
                Command::new("x")
                    .arg(Arg::new("secret").long("secret").hide(true))
                    .arg(Arg::new("old").required(true).value_name("OLD"))
                    .arg(Arg::new("new").value_name("NEW")),
                "x OLD [NEW]",
            ),
            (Command::new("x").subcommand(Command::new("y")), "x COMMAND"),
        ];
        for (command, want) in rows {
            let got = text(command.clone().version("1"));
            assert_eq!(got, *want);
        }
    }
}
