//! What every `mco-agent` command prints for a person, as snapshots (`snapshots/cli_output__*`):
//! each command's main cases (success and each class of error it has, docs/agent.md "Exit
//! codes"), each run twice, with its output redirected (stdout and stderr apart, no ANSI escape
//! in either) and on a pseudo-terminal (what the person sees, escapes shown as `<ESC>[…m`;
//! colour on the `error:`, `warning:` and `hint:` labels only, as the man page says).
//!
//! One table of cases drives one function; every case gets a fresh fixture for each run (a
//! temp root seeded as a CoreOS node, configs applied from `examples/`, the Kubernetes API test
//! server where the command needs a cluster). Times, temporary paths, ports and versions are
//! replaced (`common::terminal::normalized`). The codes themselves are `exit_codes.rs`'s
//! subject; here each case checks its code so that a snapshot never records the wrong outcome.
//!
//! Not here, because they cannot be produced without what this test does not have: `start`
//! following a cluster or a config server (the daemon's tests), code 75 (`exit_codes.rs`),
//! `pivot` staging an image (needs rpm-ostree: `pivot_cli.rs`), `recover` answering 1 (needs a
//! Degraded agent: `recover_cli.rs`), `uncordon` against an API server that cannot be reached
//! (`drain_cli.rs`, with `--timeout`).

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::terminal::{normalized, on_terminal, redirected, visible_escapes, without_escapes};
use common::{examples_dir, seed_root};
use mco_test_support::apiserver::{TestApiServer, fixtures};
use serde_json::json;

/// The node the command runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    /// A seeded root no config was applied to.
    Seeded,
    /// `00-worker-base` applied (files, units, users; not the OS).
    Applied,
    /// `00-worker-base`, then `01-worker-files-only` applied: there is one to roll back.
    Updated,
    /// `00-worker-base` applied, then `/etc/chrony.conf` edited by hand.
    Drifted,
    /// A configuration fragment with a misspelt key (`pol_interval`).
    BadFragment,
    /// The API test server with node `worker-0` and a pod on it that may be evicted.
    Cluster,
    /// The same, the pod guarded by a PodDisruptionBudget that allows no eviction.
    ClusterBlocked,
    /// A kubeconfig of an API server that is gone (its port closed).
    ClusterGone,
}

/// One command line and what it must end with.
#[derive(Debug, Clone, Copy)]
struct Case {
    /// The snapshots' name: `COMMAND__CASE`.
    name: &'static str,
    setup: Setup,
    /// The arguments; `{root}`, `{dir}`, `{ex}` (the examples), `{kubeconfig}` and `{closed}` (a
    /// URL nothing listens on) are replaced.
    args: &'static [&'static str],
    /// Environment variables besides the test's own (values replaced as `args`).
    env: &'static [(&'static str, &'static str)],
    /// What the person types on the terminal (for a question asked).
    answer: &'static str,
    /// Run as the unprivileged user `nobody`.
    as_nobody: bool,
    code: i32,
}

const CASE: Case = Case {
    name: "",
    setup: Setup::Seeded,
    args: &[],
    env: &[],
    answer: "",
    as_nobody: false,
    code: 0,
};

const BASE: &str = "{ex}/00-worker-base.yaml";
const FILES_ONLY: &str = "{ex}/01-worker-files-only.yaml";
const DIGEST: &str =
    "quay.io/openshift/os@sha256:2222222222222222222222222222222222222222222222222222222222222222";

#[rustfmt::skip]
const CASES: &[Case] = &[
    // the command line itself
    Case { name: "mco-agent__version", args: &["--version"], ..CASE },
    Case { name: "mco-agent__unknown_command", args: &["frobnicate"], code: 64, ..CASE },
    // status
    Case { name: "status__nothing_applied", args: &["status", "--root", "{root}"], ..CASE },
    Case { name: "status__applied", setup: Setup::Applied, args: &["status", "--root", "{root}"], ..CASE },
    Case { name: "status__no_root", args: &["status", "--root", "{dir}/missing"], code: 65, ..CASE },
    Case { name: "status__usage", args: &["status", "-o", "xml"], code: 64, ..CASE },
    // validate
    Case { name: "validate__matches", setup: Setup::Applied, args: &["validate", "--config", BASE, "--root", "{root}"], ..CASE },
    Case { name: "validate__mismatch", setup: Setup::Drifted, args: &["validate", "--config", BASE, "--root", "{root}"], code: 1, ..CASE },
    Case { name: "validate__bad_config", setup: Setup::Applied, args: &["validate", "--config", "{dir}/bad.ign", "--root", "{root}"], code: 65, ..CASE },
    Case { name: "validate__missing_config", args: &["validate", "--config", "{dir}/missing.yaml", "--root", "{root}"], code: 65, ..CASE },
    Case { name: "validate__usage", args: &["validate", "--config-file", "x.yaml"], code: 64, ..CASE },
    // diff
    Case { name: "diff__reconcilable", args: &["diff", BASE, FILES_ONLY], ..CASE },
    Case { name: "diff__unreconcilable", args: &["diff", BASE, "{dir}/fips.yaml"], code: 2, ..CASE },
    Case { name: "diff__missing_config", args: &["diff", BASE, "{dir}/missing.yaml"], code: 65, ..CASE },
    Case { name: "diff__usage", args: &["diff", BASE], code: 64, ..CASE },
    // once-from
    Case { name: "once-from__first_application", args: &["once-from", BASE, "--root", "{root}", "--skip-os", "--skip-reboot"], ..CASE },
    Case { name: "once-from__second_config", setup: Setup::Applied, args: &["once-from", FILES_ONLY, "--root", "{root}", "--skip-os", "--skip-reboot"], ..CASE },
    Case { name: "once-from__os_change_refused", args: &["once-from", BASE, "--root", "{root}", "--skip-reboot"], code: 1, ..CASE },
    Case { name: "once-from__unreconcilable", setup: Setup::Applied, args: &["once-from", "{dir}/groups.ign", "--root", "{root}", "--skip-reboot"], code: 2, ..CASE },
    Case { name: "once-from__unreachable_server", setup: Setup::Applied, args: &["once-from", "{closed}", "--insecure-http", "--root", "{root}", "--skip-reboot"], code: 3, ..CASE },
    Case { name: "once-from__bad_config", args: &["once-from", "{dir}/bad.ign", "--root", "{root}", "--skip-reboot"], code: 65, ..CASE },
    Case { name: "once-from__needs_root", setup: Setup::Applied, as_nobody: true, args: &["once-from", FILES_ONLY, "--root", "{root}", "--skip-os", "--skip-reboot"], code: 77, ..CASE },
    Case { name: "once-from__usage", args: &["once-from"], code: 64, ..CASE },
    // pivot (no rpm-ostree here: its bus is missing)
    Case { name: "pivot__dry_run", args: &["pivot", "--dry-run", "quay.io/openshift/os:4.18", "--root", "{root}", "--kubeconfig", "{dir}/no-kubeconfig"], ..CASE },
    Case { name: "pivot__no_rpm_ostree", args: &["pivot", DIGEST, "--root", "{root}", "--skip-reboot", "--kubeconfig", "{dir}/no-kubeconfig"], code: 3, ..CASE },
    Case { name: "pivot__needs_root", as_nobody: true, args: &["pivot", DIGEST, "--root", "{root}", "--skip-reboot", "--kubeconfig", "{dir}/no-kubeconfig"], code: 77, ..CASE },
    Case { name: "pivot__a_url", args: &["pivot", "docker://quay.io/openshift/os:4.18", "--dry-run", "--root", "{root}"], code: 65, ..CASE },
    Case { name: "pivot__usage", args: &["pivot"], code: 64, ..CASE },
    // drain and uncordon
    Case { name: "drain__drained", setup: Setup::Cluster, args: &["drain", "--node-name", "worker-0", "--kubeconfig", "{kubeconfig}", "--timeout", "20s"], ..CASE },
    Case { name: "drain__blocked", setup: Setup::ClusterBlocked, args: &["drain", "--node-name", "worker-0", "--kubeconfig", "{kubeconfig}", "--timeout", "1s"], code: 1, ..CASE },
    Case { name: "drain__unreachable", setup: Setup::ClusterGone, args: &["drain", "--node-name", "worker-0", "--kubeconfig", "{kubeconfig}", "--timeout", "1s"], code: 3, ..CASE },
    Case { name: "drain__missing_kubeconfig", args: &["drain", "--node-name", "worker-0", "--kubeconfig", "{dir}/missing"], code: 65, ..CASE },
    Case { name: "drain__usage", args: &["drain"], code: 64, ..CASE },
    Case { name: "uncordon__uncordoned", setup: Setup::Cluster, args: &["uncordon", "--node-name", "worker-0", "--kubeconfig", "{kubeconfig}"], ..CASE },
    Case { name: "uncordon__bad_node_name", setup: Setup::Cluster, args: &["uncordon", "--node-name", "Worker_0", "--kubeconfig", "{kubeconfig}"], code: 65, ..CASE },
    Case { name: "uncordon__usage", args: &["uncordon", "--node", "worker-0", "--grace-period", "1s"], code: 64, ..CASE },
    // rollback
    Case { name: "rollback__rolled_back", setup: Setup::Updated, args: &["rollback", "--root", "{root}", "--yes"], ..CASE },
    Case { name: "rollback__not_confirmed", setup: Setup::Updated, args: &["rollback", "--root", "{root}"], answer: "n\n", code: 4, ..CASE },
    Case { name: "rollback__nothing_to_go_back_to", setup: Setup::Applied, args: &["rollback", "--root", "{root}", "--yes"], code: 3, ..CASE },
    Case { name: "rollback__needs_root", setup: Setup::Updated, as_nobody: true, args: &["rollback", "--root", "{root}", "--yes"], code: 77, ..CASE },
    Case { name: "rollback__no_root", args: &["rollback", "--root", "{dir}/missing", "--yes"], code: 65, ..CASE },
    // recover (without the cluster: the node's own files)
    Case { name: "recover__nothing_to_recover", setup: Setup::Applied, args: &["recover", "--root", "{root}", "--no-cluster"], ..CASE },
    Case { name: "recover__reapply", setup: Setup::Drifted, args: &["recover", "--root", "{root}", "--no-cluster", "--yes"], ..CASE },
    Case { name: "recover__not_confirmed", setup: Setup::Drifted, args: &["recover", "--root", "{root}", "--no-cluster"], answer: "n\n", code: 4, ..CASE },
    Case { name: "recover__needs_root", setup: Setup::Drifted, as_nobody: true, args: &["recover", "--root", "{root}", "--no-cluster", "--yes"], code: 77, ..CASE },
    Case { name: "recover__no_root", args: &["recover", "--root", "{dir}/missing", "--no-cluster"], code: 65, ..CASE },
    Case { name: "recover__usage", args: &["recover", "--action", "reboot"], code: 64, ..CASE },
    // gather (no journal, no rpm-ostree: said in the bundle)
    Case { name: "gather__written", setup: Setup::Applied, args: &["gather", "--output", "{dir}/bundle.tar.gz", "--root", "{root}"], ..CASE },
    Case { name: "gather__output_exists", args: &["gather", "--output", "{dir}/bad.ign", "--root", "{root}"], code: 65, ..CASE },
    Case { name: "gather__usage", args: &["gather"], code: 64, ..CASE },
    // config show
    Case { name: "config__show", args: &["config", "show"], ..CASE },
    Case { name: "config__bad_fragment", setup: Setup::BadFragment, args: &["config", "show"], code: 65, ..CASE },
    Case { name: "config__bad_environment", args: &["config", "show"], env: &[("MCO_AGENT_POLL_INTERVAL", "often")], code: 65, ..CASE },
    Case { name: "config__usage", args: &["config", "check"], code: 64, ..CASE },
    // start's refusals before it follows anything
    Case { name: "start__bad_fragment", setup: Setup::BadFragment, args: &["start", "--root", "{root}"], code: 65, ..CASE },
    Case { name: "start__bad_environment", args: &["start", "--root", "{root}"], env: &[("MCO_AGENT_POLL_INTERVAL", "often")], code: 65, ..CASE },
    Case { name: "start__missing_kubeconfig", args: &["start", "--root", "{root}", "--node-name", "worker-0", "--kubeconfig", "{dir}/missing"], code: 65, ..CASE },
    Case { name: "start__needs_a_cluster", args: &["start", "--root", "{root}", "--node-name", "worker-0", "--config-file", BASE, "--drain-mode", "controller"], code: 64, ..CASE },
    Case { name: "start__usage", args: &["start", "--pol-interval", "5s"], code: 64, ..CASE },
];

/// A fresh node for one run of a case, and what the placeholders stand for.
struct Fixture {
    dir: tempfile::TempDir,
    cluster: Option<TestApiServer>,
    kubeconfig: PathBuf,
    closed: String,
}

impl Fixture {
    fn new(setup: Setup) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        seed_root(&root);
        let base = std::fs::read_to_string(examples_dir().join("00-worker-base.yaml")).unwrap();
        let files: [(&str, String); 3] = [
            (
                "fips.yaml",
                base.replace("spec:\n", "spec:\n  fips: true\n"),
            ),
            (
                "groups.ign",
                r#"{"ignition":{"version":"3.2.0"},"passwd":{"groups":[{"name":"admins"}]}}"#
                    .to_string(),
            ),
            (
                "bad.ign",
                r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"etc/x"}]}}"#
                    .to_string(),
            ),
        ];
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/config/worker", listener.local_addr().unwrap())
        };
        let mut fixture = Fixture {
            kubeconfig: dir.path().join("no-kubeconfig"),
            dir,
            cluster: None,
            closed,
        };
        let applied: &[&str] = match setup {
            Setup::Applied | Setup::Drifted => &[BASE],
            Setup::Updated => &[BASE, FILES_ONLY],
            _ => &[],
        };
        for config in applied {
            let out = redirected(fixture.command(&[
                "once-from",
                *config,
                "--root",
                "{root}",
                "--skip-os",
                "--skip-reboot",
            ]));
            assert_eq!(out.code, 0, "applying {config}: {out:?}");
        }
        match setup {
            Setup::Drifted => {
                std::fs::write(root.join("etc/chrony.conf"), "edited by hand\n").unwrap()
            }
            Setup::BadFragment => {
                let fragments = fixture.path("config/etc/mco-agent/config.d");
                std::fs::create_dir_all(&fragments).unwrap();
                std::fs::write(fragments.join("50-typo.toml"), "\npol_interval = \"3s\"\n")
                    .unwrap();
            }
            Setup::Cluster | Setup::ClusterBlocked | Setup::ClusterGone => {
                let server = cluster(setup == Setup::ClusterBlocked);
                let kubeconfig = fixture.path("kubeconfig");
                std::fs::copy(server.kubeconfig(), &kubeconfig).unwrap();
                fixture.kubeconfig = kubeconfig;
                if setup != Setup::ClusterGone {
                    fixture.cluster = Some(server);
                }
            }
            _ => {}
        }
        fixture
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn expand(&self, text: &str) -> String {
        text.replace("{root}", &self.path("root").display().to_string())
            .replace("{dir}", &self.dir.path().display().to_string())
            .replace("{ex}", &examples_dir().display().to_string())
            .replace("{kubeconfig}", &self.kubeconfig.display().to_string())
            .replace("{closed}", &self.closed)
    }

    /// `mco-agent ARGS` in an environment of its own: no rpm-ostree (the bus is missing), no
    /// sysroot reader, configuration fragments under the fixture, nothing of the caller's.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = common::agent();
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env(
                "DBUS_SYSTEM_BUS_ADDRESS",
                format!("unix:path={}", self.path("no-bus").display()),
            )
            .env("MCO_SYSROOT_STATUS_BIN", self.path("no-sysroot-reader"))
            .env("MCO_AGENT_CONFIG_ROOT", self.path("config"))
            .args(args.iter().map(|a| self.expand(a)));
        command
    }

    /// `text` with this fixture's paths and what changes from run to run replaced.
    fn normalized(&self, text: &str) -> String {
        let root = self.path("root").display().to_string();
        let dir = self.dir.path().display().to_string();
        let examples = examples_dir().display().to_string();
        let cluster = self.cluster.as_ref().map(|c| c.dir().display().to_string());
        let mut paths = vec![
            (root.as_str(), "ROOT"),
            (dir.as_str(), "DIR"),
            (examples.as_str(), "EXAMPLES"),
        ];
        if let Some(cluster) = &cluster {
            paths.push((cluster.as_str(), "CLUSTER"));
        }
        normalized(text, &paths)
    }
}

/// The API test server with node `worker-0` and pod `apps/web-1` on it; `blocked`: a
/// PodDisruptionBudget that lets no eviction through.
fn cluster(blocked: bool) -> TestApiServer {
    let server = TestApiServer::start().unwrap();
    server.seed(fixtures::node("worker-0")).unwrap();
    server.seed(fixtures::namespace("apps")).unwrap();
    server
        .seed(fixtures::pod(
            "apps",
            "web-1",
            "worker-0",
            &[("app", "web")],
        ))
        .unwrap();
    if blocked {
        server
            .seed(fixtures::pdb(
                "apps",
                "web",
                &[("app", "web")],
                json!({"minAvailable": 1}),
            ))
            .unwrap();
    }
    server
}

/// Runs `case` redirected and on a terminal (a fresh fixture each), checks its exit code and
/// colours, and compares both with their snapshots.
fn check(case: &Case) {
    let run = |on_a_terminal: bool| {
        let fixture = Fixture::new(case.setup);
        let mut command = fixture.command(case.args);
        for (name, value) in case.env {
            command.env(name, fixture.expand(value));
        }
        if case.as_nobody {
            command.uid(65534).gid(65534);
        }
        let printed = if on_a_terminal {
            on_terminal(command, case.answer)
        } else {
            redirected(command)
        };
        let stdout = fixture.normalized(&printed.stdout);
        let stderr = fixture.normalized(&printed.stderr);
        (printed.code, stdout, stderr)
    };
    let name = case.name;

    let (code, stdout, stderr) = run(false);
    assert_eq!(code, case.code, "{name}, redirected:\n{stdout}{stderr}");
    assert!(
        !stdout.contains('\x1b') && !stderr.contains('\x1b'),
        "{name}: an escape in redirected output:\n{}{}",
        visible_escapes(&stdout),
        visible_escapes(&stderr)
    );
    insta::assert_snapshot!(
        format!("{name}__redirected"),
        format!("exit code {code}\n--- stdout\n{stdout}--- stderr\n{stderr}")
    );

    let (code, shown, _) = run(true);
    assert_eq!(
        code,
        case.code,
        "{name}, on a terminal:\n{}",
        visible_escapes(&shown)
    );
    coloured_labels_only(name, &shown);
    insta::assert_snapshot!(
        format!("{name}__terminal"),
        format!("exit code {code}\n{}", visible_escapes(&shown))
    );
}

/// On a terminal, colour marks the `error:`, `warning:` and `hint:` labels and nothing else
/// (clap's usage errors spell the red of `error:` in two escapes); a line that starts with a
/// label has it coloured. The daemon's log lines (`start`: timestamp, level, fields) are
/// tracing's and keep its colours.
fn coloured_labels_only(name: &str, shown: &str) {
    let label = regex::Regex::new(
        r"\x1b\[(1;31|1m\x1b\[31)merror:\x1b\[0m|\x1b\[1;33mwarning:\x1b\[0m|\x1b\[1;36mhint:\x1b\[0m",
    )
    .unwrap();
    let log_line = regex::Regex::new(r"^\[TIME\] ").unwrap();
    for line in shown.lines() {
        let plain = without_escapes(line);
        if log_line.is_match(&plain) {
            continue;
        }
        assert!(
            !label.replace_all(line, "").contains('\x1b'),
            "{name}: colour outside a label: {}",
            visible_escapes(line)
        );
        if ["error: ", "warning: ", "hint: "]
            .iter()
            .any(|l| plain.starts_with(l))
        {
            assert!(
                label.find(line).is_some_and(|m| m.start() == 0),
                "{name}: a label without its colour: {}",
                visible_escapes(line)
            );
        }
    }
}

#[test]
fn every_command_prints_for_people() {
    // a handful at a time: each case starts a few processes
    let workers = 4;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(case) = CASES.get(i) else { break };
                    let outcome = std::panic::catch_unwind(|| check(case));
                    if outcome.is_err() {
                        failed.lock().unwrap().push(case.name);
                    }
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap();
    assert!(
        failed.is_empty(),
        "cases that failed (see above): {failed:?}"
    );
}

/// Every snapshot of this file belongs to a case of the table (a renamed or removed case leaves
/// none behind), and no two cases share a name.
#[test]
fn each_snapshot_is_a_case() {
    let mut names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    names.sort_unstable();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "two cases share a name");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    for entry in std::fs::read_dir(dir).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        // insta's pending snapshots (`.snap.new`) are not checked in
        let Some(rest) = file
            .strip_prefix("cli_output__")
            .filter(|_| file.ends_with(".snap"))
        else {
            continue;
        };
        let case = rest
            .strip_suffix("__redirected.snap")
            .or_else(|| rest.strip_suffix("__terminal.snap"));
        assert!(
            case.is_some_and(|c| names.binary_search(&c).is_ok()),
            "{file} is the snapshot of no case"
        );
    }
}
