//! `mco-agent rollback` on a temp root: back to the config before the last update (files,
//! units, users), waiting for a reboot it cannot make; refusals that change nothing.

mod common;

use std::fs;
use std::process::Stdio;

use common::{agent, examples_dir, run, seed_root, text};

fn example(name: &str) -> String {
    examples_dir().join(name).display().to_string()
}

fn validate(file: &str, root: &str) -> i32 {
    text(&run(&["validate", "--config", file, "--root", root])).2
}

#[test]
fn rollback_returns_to_the_previous_config_and_refuses_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    seed_root(r);
    fs::write(
        r.join("etc/chrony.conf"),
        "pool 2.fedora.pool.ntp.org iburst\n",
    )
    .unwrap();
    let root = r.display().to_string();
    let base = example("00-worker-base.yaml");
    let files_only = example("01-worker-files-only.yaml");
    let once = |file: &str| {
        let out = text(&run(&[
            "once-from",
            file,
            "--root",
            &root,
            "--skip-os",
            "--skip-reboot",
        ]));
        assert_eq!(out.2, 0, "{out:?}");
    };

    // Only one config applied: there is nothing to go back to.
    once(&base);
    let (_, stderr, code) = text(&run(&["rollback", "--root", &root, "--yes"]));
    // the command could not do its work (docs/agent.md, "Exit codes")
    assert_eq!(code, 3);
    assert!(
        stderr.contains("no previous config is recorded"),
        "{stderr}"
    );

    once(&files_only);
    assert_eq!(validate(&files_only, &root), 0);

    // Without --yes and without a terminal: it says what it would do, and does nothing.
    let out = agent()
        .args(["rollback", "--root", &root])
        .stdin(Stdio::null())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let (stdout, stderr, code) = text(&out);
    // not confirmed: nothing changed
    assert_eq!(code, 4, "{stdout}{stderr}");
    assert!(
        stdout.starts_with("Rolling back from 01-worker-files-only to 00-worker-base:\n"),
        "{stdout}"
    );
    assert!(stderr.contains("pass --yes"), "{stderr}");
    assert_eq!(validate(&files_only, &root), 0, "nothing changed");

    let (stdout, stderr, code) = text(&run(&["rollback", "--root", &root, "--yes"]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    // an alternate root is never rebooted: nothing promises or asks for a reboot
    assert!(
        stdout.contains("the OS stays as it is")
            && stdout.contains("is an alternate root, never rebooted")
            && stdout.contains("the agent finishes the rollback at the root's next boot"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("one reboot") && !stdout.contains("reboot the node"),
        "{stdout}"
    );
    assert_eq!(validate(&base, &root), 0, "files back to the base");
    let record =
        fs::read_to_string(r.join("etc/machine-config-daemon/mco-agent-update.json")).unwrap();
    assert!(record.contains("\"step\":\"RebootingBack\""), "{record}");

    // The rollback waits for its reboot: run again in the same boot, it resumes it.
    let (stdout, stderr, code) = text(&run(&["rollback", "--root", &root, "--yes"]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.starts_with(
            "Resuming the rollback from 01-worker-files-only to 00-worker-base (step RebootingBack).\n"
        ),
        "{stdout}"
    );
    assert_eq!(validate(&base, &root), 0);
}
