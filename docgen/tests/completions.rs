//! The completion scripts complete real words in real shells: bash's programmable completion
//! (the registered function called as bash calls it), zsh's completion system (an interactive
//! zsh on a pseudo-terminal, a TAB typed) and fish's `complete --do-complete`. A shell that is
//! missing fails the test (tests/setup.sh installs them).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How long a shell may take to complete one line, loaded machine included.
const SHELL_TIMEOUT_SECONDS: &str = "120";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// A line typed before TAB, words that must be offered, words that must not.
struct Case {
    line: &'static str,
    offered: &'static [&'static str],
    not_offered: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        line: "mco-agent ",
        offered: &["start", "once-from", "validate", "diff", "status", "config"],
        not_offered: &[],
    },
    Case {
        line: "mco-agent va",
        offered: &["validate"],
        not_offered: &["diff"],
    },
    // after the first word: the subcommand's own options (bash completed nothing here)
    Case {
        line: "mco-agent validate --con",
        offered: &["--config"],
        not_offered: &["--skip-reboot"],
    },
    Case {
        line: "mco-agent once-from --sk",
        offered: &["--skip-reboot", "--skip-os"],
        not_offered: &[],
    },
    Case {
        line: "mco-agent start --node",
        offered: &["--node-name"],
        not_offered: &[],
    },
    // a nested subcommand, and an option's accepted values
    Case {
        line: "mco-agent config ",
        offered: &["show"],
        not_offered: &[],
    },
    Case {
        line: "mco-agent config show --drain-mode ",
        offered: &["agent", "controller"],
        not_offered: &[],
    },
    // the hidden test seams are not offered
    Case {
        line: "mco-agent status --",
        offered: &["--root", "--sysroot"],
        not_offered: &["--boot-id-file"],
    },
    Case {
        line: "mco-agent gather --",
        offered: &["--output", "--force", "--root"],
        not_offered: &["--boot-id-file"],
    },
    Case {
        line: "mco-companion render --",
        offered: &["--manifests", "--pool"],
        not_offered: &[],
    },
    Case {
        line: "mco-companion serve --drain-",
        offered: &[],
        not_offered: &["--drain-failing-requeue"],
    },
    Case {
        line: "mco-firstboot --",
        offered: &["--root", "--skip-reboot", "--retry-every"],
        not_offered: &[],
    },
];

fn generated() -> (tempfile::TempDir, PathBuf) {
    let out = tempfile::tempdir().unwrap();
    let pages = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/man");
    mco_docgen::generate(&pages, out.path()).unwrap();
    let completions = out.path().join("completions");
    (out, completions)
}

fn driver(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/complete")
        .join(name)
        .display()
        .to_string()
}

/// The words `shell` offers for `line`, with the scripts in `completions`.
fn complete(shell: Shell, completions: &Path, line: &str) -> BTreeSet<String> {
    let program = line.split(' ').next().unwrap();
    let mut command = Command::new("timeout");
    command.arg(SHELL_TIMEOUT_SECONDS);
    match shell {
        Shell::Bash => command
            .arg("bash")
            .arg(driver("complete.bash"))
            .arg(completions.join("bash").join(program))
            .arg(line),
        Shell::Zsh => command
            .args(["zsh", "-f"])
            .arg(driver("complete.zsh"))
            .arg(completions.join("zsh"))
            .arg(line),
        Shell::Fish => command
            .args(["fish", "--no-config", "-c"])
            .arg("source $argv[1]; complete --do-complete=$argv[2]")
            .arg(completions.join("fish").join(format!("{program}.fish")))
            .arg(line),
    };
    // words that are files of the working directory would blur the cases
    let empty = tempfile::tempdir().unwrap();
    let out = command
        .current_dir(empty.path())
        .env_remove("BASH_ENV")
        .output()
        .unwrap_or_else(|e| panic!("{shell:?}: {e} (tests/setup.sh installs it)"));
    assert!(
        out.status.success(),
        "{shell:?} completing {line:?} failed or did not answer within {SHELL_TIMEOUT_SECONDS}s \
         ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        // fish: WORD<TAB>description
        .map(|l| l.split('\t').next().unwrap().to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

fn check(shell: Shell) {
    let (_out, completions) = generated();
    let mut failures = Vec::new();
    for case in CASES {
        let words = complete(shell, &completions, case.line);
        let missing: Vec<_> = case
            .offered
            .iter()
            .filter(|w| !words.contains(**w))
            .collect();
        let unwanted: Vec<_> = case
            .not_offered
            .iter()
            .filter(|w| words.contains(**w))
            .collect();
        if !missing.is_empty() || !unwanted.is_empty() {
            failures.push(format!(
                "{:?}<TAB>: missing {missing:?}, unwanted {unwanted:?}, offered {words:?}",
                case.line
            ));
        }
    }
    assert!(failures.is_empty(), "{shell:?}:\n{}", failures.join("\n"));
}

#[test]
fn bash_completes_subcommands_options_and_values() {
    check(Shell::Bash);
}

#[test]
fn zsh_completes_subcommands_options_and_values() {
    check(Shell::Zsh);
}

#[test]
fn fish_completes_subcommands_options_and_values() {
    check(Shell::Fish);
}
