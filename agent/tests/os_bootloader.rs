//! The bootloader update before a rebase through the real command path: the agent's
//! `ProcessCommands` spawns programs found on `PATH`. Debian has no `bootupctl`, no Secure
//! Boot and no systemd as PID 1, so `mokutil`, `systemd-run` and `podman` are small scripts
//! that pass the command line on (`systemd-run … -- podman run … IMAGE bootupctl update` ends in
//! running `bootupctl update`), and `bootupctl` is a fake that records how it was called. What
//! is real: the agent's gates on the os-release of a temp root, the argv it builds, the
//! process spawning and its failure handling.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mco_agent::engine::bootloader::{self, BootloaderHost};
use mco_agent::host::command::ProcessCommands;
use mco_agent::rootfs::Root;

const IMAGE: &str = "registry.example/openshift/os@sha256:0123";

/// Writes an executable shell script `name` into `bin`.
fn script(bin: &Path, name: &str, body: &str) {
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A `bin` directory of fakes logging every call to `calls.log`; `bootupctl` exits `code`.
fn fakes(dir: &Path, code: i32) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("calls.log");
    let log = log.display();
    script(
        &bin,
        "mokutil",
        &format!("echo \"mokutil $*\" >> {log}\necho 'SecureBoot enabled'"),
    );
    // systemd-run: its options up to `--`, then the command.
    script(
        &bin,
        "systemd-run",
        &format!(
            "echo \"systemd-run $*\" >> {log}\nwhile [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\""
        ),
    );
    // podman: `images` holds nothing, `pull` succeeds, `run` runs what follows the image.
    script(
        &bin,
        "podman",
        &format!(
            "echo \"podman $*\" >> {log}\ncase \"$1\" in\n images) echo '[]';;\n pull) ;;\n run) shift; while [ \"$1\" != {IMAGE} ]; do shift; done; shift; exec \"$@\";;\n *) exit 125;;\nesac"
        ),
    );
    script(
        &bin,
        "bootupctl",
        &format!("echo \"bootupctl $*\" >> {log}\nexit {code}"),
    );
    bin
}

/// A CoreOS root (RHCOS 4.18 on RHEL 9.4: the container path, not the unit).
fn coreos_root(dir: &Path) -> Root {
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(
        root.join("etc/os-release"),
        "NAME=\"Red Hat Enterprise Linux CoreOS\"\nID=\"rhcos\"\nVERSION=\"418.94.202410090804-0\"\nVERSION_ID=\"4.18\"\nOPENSHIFT_VERSION=\"4.18\"\nRHEL_VERSION=\"9.4\"\n",
    )
    .unwrap();
    Root::open(&root).unwrap()
}

/// No real `bootupctl` on this machine's PATH (the fake is the only one the test can reach).
fn no_real_bootupctl() -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).all(|d| !d.join("bootupctl").exists()))
        .unwrap_or(true)
}

/// Runs the update with `bootupctl` exiting `code`; the fakes' calls, in order.
async fn run(code: i32) -> Vec<String> {
    assert!(
        no_real_bootupctl(),
        "a real bootupctl is on PATH: this test means to show the fake one runs"
    );
    let dir = tempfile::tempdir().unwrap();
    let bin = fakes(dir.path(), code);
    let root = coreos_root(dir.path());
    let commands = ProcessCommands::default().with_env(
        "PATH",
        &format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()),
    );
    let host = BootloaderHost {
        root: &root,
        commands: &commands,
        systemd: None,
        arch: "x86_64",
    };
    // Never fails, whatever bootupctl does.
    bootloader::update(&host, IMAGE).await;
    std::fs::read_to_string(dir.path().join("calls.log"))
        .expect("no fake program was called at all")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn secure_boot_coreos_runs_bootupctl_update_from_the_pulled_image() {
    let calls = run(0).await;
    assert_eq!(calls[0], "mokutil --sb-state");
    assert!(
        calls[1].starts_with("podman images --format=json"),
        "{calls:?}"
    );
    assert!(
        calls.iter().any(
            |c| c.starts_with("systemd-run --unit machine-config-daemon-bootupd ")
                && c.ends_with(&format!("-- podman pull {IMAGE}"))
        ),
        "no pull through systemd-run: {calls:?}"
    );
    assert!(
        calls.iter().any(|c| c.starts_with("podman run ")
            && c.contains(
                "--privileged --pid=host --net=host --rm -v /boot:/boot:rslave -v /dev:/dev"
            )
            && c.ends_with(&format!("{IMAGE} bootupctl update"))),
        "no privileged podman run: {calls:?}"
    );
    assert_eq!(calls.last().unwrap(), "bootupctl update", "{calls:?}");
}

#[tokio::test]
async fn a_failing_bootupctl_is_a_warning_not_a_failure() {
    // update() returns (nothing to propagate, no panic) after the failed bootupctl.
    let calls = run(1).await;
    assert_eq!(calls.last().unwrap(), "bootupctl update", "{calls:?}");
}
