//! Every command and subcommand of the three binaries has a man page with its hand-written
//! sections, the pages render without a roff warning, and the completion scripts parse.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use mco_docgen::handwritten::REQUIRED;

fn pages_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/man")
}

/// The page names the command lines imply, walked here independently of `mco_docgen::pages`.
fn expected_pages() -> BTreeSet<String> {
    fn walk(prefix: &str, command: &clap::Command, out: &mut BTreeSet<String>) {
        out.insert(prefix.to_owned());
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name() != "help" {
                walk(&format!("{prefix}-{}", sub.get_name()), sub, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    for program in mco_docgen::programs() {
        walk(program.get_name(), &program, &mut out);
    }
    out
}

/// A tool the packaging tests install (tests/setup.sh); its absence is a failure, not a skip.
fn run(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (tests/setup.sh installs it)"))
}

#[test]
fn every_subcommand_of_every_binary_has_a_page_with_the_required_sections() {
    let expected = expected_pages();
    // the subcommands this test was written against are among them (the walk found them)
    for name in [
        "mco-agent",
        "mco-agent-start",
        "mco-agent-once-from",
        "mco-agent-validate",
        "mco-agent-diff",
        "mco-agent-drain",
        "mco-agent-uncordon",
        "mco-agent-status",
        "mco-agent-gather",
        "mco-agent-config",
        "mco-agent-config-show",
        "mco-firstboot",
        "mco-companion",
        "mco-companion-render",
        "mco-companion-serve",
        "mco-companion-controller",
    ] {
        assert!(expected.contains(name), "{name} is not a command any more");
    }
    let pages = mco_docgen::all_pages();
    let generated: BTreeSet<String> = pages.iter().map(|p| p.name.clone()).collect();
    assert_eq!(
        generated, expected,
        "docgen's pages and the command lines differ"
    );
    for page in &pages {
        let hand = mco_docgen::read_hand_written(&pages_dir(), page)
            .unwrap_or_else(|e| panic!("{}: {e:#}", page.name));
        for section in REQUIRED {
            let s = hand
                .section(section)
                .unwrap_or_else(|| panic!("{}: no {section}", page.name));
            assert!(!s.blocks.is_empty(), "{}: {section} is empty", page.name);
        }
    }
    let stray = mco_docgen::stray_files(&pages_dir(), &pages).unwrap();
    assert!(stray.is_empty(), "pages of no command: {stray:?}");
}

#[test]
fn generated_pages_render_cleanly_with_every_section() {
    let out = tempfile::tempdir().unwrap();
    let done = mco_docgen::generate(&pages_dir(), out.path()).unwrap();
    let names: BTreeSet<String> = done
        .man_pages
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let wanted: BTreeSet<String> = expected_pages()
        .into_iter()
        .map(|n| format!("{n}.8"))
        .collect();
    assert_eq!(names, wanted);
    for page in &done.man_pages {
        let path = page.to_str().unwrap();
        // -k: UTF-8 input as man(1) feeds it; -ww: every warning
        let check = run("groff", &["-k", "-man", "-Tutf8", "-ww", "-z", path]);
        let warnings = String::from_utf8_lossy(&check.stderr);
        assert!(
            check.status.success() && warnings.is_empty(),
            "{path}: {warnings}"
        );
        let text = run("groff", &["-k", "-man", "-Tascii", "-P-cbou", path]);
        let text = String::from_utf8_lossy(&text.stdout);
        let headings: Vec<&str> = text
            .lines()
            .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
            .collect();
        for heading in ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS"]
            .iter()
            .chain(REQUIRED)
        {
            assert!(
                headings.contains(heading),
                "{path}: no {heading} in {headings:?}"
            );
        }
    }
    // the synopsis says what each option takes (clap_mangen's said `[--root]`)
    for (page, wanted) in [
        ("mco-agent-rollback", "[--root ROOT]"),
        ("mco-agent-diff", "[-o|--output FORMAT]"),
        ("mco-agent-diff", "... OLD NEW"),
        ("mco-agent-start", "[--poll-interval POLL_INTERVAL]"),
        (
            "mco-agent-config",
            "mco-agent config [-v|--verbose]... COMMAND",
        ),
    ] {
        let path = out.path().join(format!("man/man8/{page}.8"));
        let text = run(
            "groff",
            &["-k", "-man", "-Tascii", "-P-cbou", path.to_str().unwrap()],
        );
        let text = String::from_utf8_lossy(&text.stdout);
        let synopsis: String = text
            .lines()
            .skip_while(|l| *l != "SYNOPSIS")
            .skip(1)
            .take_while(|l| !l.starts_with("DESCRIPTION"))
            .flat_map(str::split_whitespace)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            synopsis.contains(wanted),
            "{page}: {wanted} not in {synopsis:?}"
        );
        assert!(!synopsis.contains("--help"), "{page}: {synopsis:?}");
    }
    // the daemon's page carries both the options clap knows and the hand-written files
    let start = std::fs::read_to_string(out.path().join("man/man8/mco-agent-start.8")).unwrap();
    for needle in [
        "config\\-server",
        "MCO_AGENT_POOL",
        "/etc/mco\\-agent/config.d/*.toml",
    ] {
        assert!(start.contains(needle), "mco-agent-start.8 lacks {needle}");
    }
}

#[test]
fn completion_scripts_parse_in_their_shells() {
    let out = tempfile::tempdir().unwrap();
    let done = mco_docgen::generate(&pages_dir(), out.path()).unwrap();
    assert_eq!(done.completions.len(), 9, "{:?}", done.completions);
    for script in &done.completions {
        let path = script.to_str().unwrap();
        let shell = match script
            .parent()
            .and_then(|d| d.file_name())
            .unwrap()
            .to_str()
        {
            Some("bash") => "bash",
            Some("zsh") => "zsh",
            Some("fish") => "fish",
            other => panic!("{path}: unknown shell directory {other:?}"),
        };
        let check = run(shell, &["-n", path]);
        assert!(
            check.status.success(),
            "{shell} -n {path}: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        // each script completes its program's subcommands
        let text = std::fs::read_to_string(script).unwrap();
        let file = script.file_name().unwrap().to_str().unwrap();
        let program = mco_docgen::programs()
            .into_iter()
            .find(|p| file.contains(p.get_name()))
            .unwrap_or_else(|| panic!("{path}: no program of that name"));
        for sub in program.get_subcommands() {
            assert!(
                text.contains(sub.get_name()),
                "{path} lacks {}",
                sub.get_name()
            );
        }
    }
}

/// Breaks a copy of the pages directory.
type Breaks = dyn Fn(&Path);

#[test]
fn a_bad_pages_directory_writes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let cases: [(&str, Box<Breaks>, &str); 4] = [
        (
            "a subcommand without its page",
            Box::new(|d| std::fs::remove_file(d.join("mco-agent-uncordon.md")).unwrap()),
            "mco-agent-uncordon.md: the hand-written sections of mco-agent-uncordon(8)",
        ),
        (
            "a page of no command",
            Box::new(|d| std::fs::write(d.join("mco-agent-rollout.md"), "# x(8)\n").unwrap()),
            "no command has a page named after mco-agent-rollout.md",
        ),
        (
            "a required section missing",
            Box::new(|d| {
                let p = d.join("mco-agent-diff.md");
                let text = std::fs::read_to_string(&p).unwrap();
                let cut = text.find("## EXAMPLES").unwrap();
                std::fs::write(&p, &text[..cut]).unwrap();
            }),
            "mco-agent-diff(8) lacks the section(s) EXAMPLES",
        ),
        (
            "a variable the options read left out of ENVIRONMENT",
            Box::new(|d| {
                let p = d.join("mco-companion-render.md");
                let text = std::fs::read_to_string(&p).unwrap();
                let text = text.replace("- `MCO_COMPANION_OS_IMAGE_URL`: `--os-image-url`.\n", "");
                std::fs::write(&p, text).unwrap();
            }),
            "ENVIRONMENT has no item for MCO_COMPANION_OS_IMAGE_URL",
        ),
    ];
    for (what, break_it, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(pages_dir()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        break_it(dir.path());
        let err = mco_docgen::generate(dir.path(), out.path()).expect_err(what);
        assert!(format!("{err:#}").contains(message), "{what}: {err:#}");
        assert_eq!(
            std::fs::read_dir(out.path()).unwrap().count(),
            0,
            "{what}: something was written"
        );
    }
}

#[test]
fn the_agent_pages_exit_codes_are_the_agents() {
    use mco_docgen::handwritten::Block;
    let known: Vec<String> = mco_agent::cli::Exit::ALL
        .iter()
        .map(|e| format!("`{}`", e.code()))
        .collect();
    let pages = mco_docgen::all_pages();
    let agent_pages: Vec<_> = pages
        .iter()
        .filter(|p| p.name.starts_with("mco-agent"))
        .collect();
    assert!(agent_pages.len() > 10, "{}", agent_pages.len());
    for page in agent_pages {
        let hand = mco_docgen::read_hand_written(&pages_dir(), page).unwrap();
        let section = hand.section("EXIT STATUS").unwrap();
        for block in &section.blocks {
            if let Block::Item { term, .. } = block {
                assert!(
                    known.contains(term),
                    "{}: exit status {term} is not one of mco-agent's ({known:?})",
                    page.name
                );
            }
        }
    }
}

#[test]
fn the_install_docs_name_every_page_the_rpm_installs() {
    let install = std::fs::read_to_string(pages_dir().join("../install.md")).unwrap();
    // the RPM ships mco-agent and mco-firstboot, not the companion
    let missing: Vec<String> = expected_pages()
        .into_iter()
        .filter(|p| !p.starts_with("mco-companion"))
        .filter(|p| !install.contains(&format!("`{p}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/install.md does not name {missing:?}"
    );
}

#[test]
fn hidden_options_are_in_no_page_and_no_completion() {
    fn hidden(command: &clap::Command, out: &mut BTreeSet<String>) {
        for arg in command.get_arguments().filter(|a| a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                out.insert(long.to_string());
            }
        }
        for sub in command.get_subcommands() {
            hidden(sub, out);
        }
    }
    let out = tempfile::tempdir().unwrap();
    let done = mco_docgen::generate(&pages_dir(), out.path()).unwrap();
    let mut longs = BTreeSet::new();
    for program in mco_docgen::programs() {
        hidden(&program, &mut longs);
    }
    // the test timings this was written for are among them
    for long in [
        "drain-retry",
        "health-retry",
        "boot-id-file",
        "fleet-lock-retry",
    ] {
        assert!(longs.contains(long), "{long} is not hidden");
    }
    // a hidden first spelling that is a prefix of a visible one (`--json` of `--json-…`) would
    // match; none is
    let files = done.man_pages.iter().chain(&done.completions);
    for file in files {
        let text = std::fs::read_to_string(file).unwrap().replace("\\-", "-");
        for long in &longs {
            let shown = text.match_indices(&format!("--{long}")).any(|(at, m)| {
                !text[at + m.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
            });
            assert!(!shown, "{}: --{long} is hidden but shown", file.display());
        }
    }
}
