//! The bootloader update before a rebase through the real command path: the agent's
//! `ProcessCommands` spawns programs found on `PATH`. Debian has no `bootupctl`, no Secure
//! Boot and no systemd as PID 1, so `mokutil`, `systemd-run` and `podman` are small scripts
//! that pass the command line on (`systemd-run … -- podman run … IMAGE bootupctl update` ends in
//! running `bootupctl update`), and `bootupctl` is a fake that records how it was called. What
//! is real: the agent's gates on the os-release of a temp root, the argv it builds, the
//! process spawning and its failure handling. When `bootupctl` fails, the EFI copy runs with
//! fakes for what needs a real disk (`lsblk`, `findmnt`, `mount`, `umount`, `sync`) and podman's
//! `create`/`cp`/`rm`; `mktemp`, `find`, `sha256sum`, `cp` and `rm` are the real ones, working on
//! the temp root's `/boot/efi` (a plain directory standing in for the mounted ESP).

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
    // podman: `images` holds nothing, `version` is old, `pull` succeeds, `run` runs what
    // follows the image, `create` names a container, `cp` writes the image's EFI tree.
    script(
        &bin,
        "podman",
        &format!(
            "echo \"podman $*\" >> {log}\ncase \"$1\" in\n images) echo '[]';;\n version) echo 4.3.1;;\n pull) ;;\n run) shift; while [ \"$1\" != {IMAGE} ]; do shift; done; shift; exec \"$@\";;\n create) echo 0fe1c2;;\n cp) mkdir -p \"$3/EFI/redhat\" && echo new-shim > \"$3/EFI/redhat/shimx64.efi\";;\n rm) ;;\n *) exit 125;;\nesac"
        ),
    );
    // one disk: its ESP vda2, /boot on vda3
    script(
        &bin,
        "lsblk",
        &format!(
            "echo \"lsblk $*\" >> {log}\necho '{{\"blockdevices\": [{{\"name\": \"/dev/vda\", \"parttype\": null, \"fstype\": null, \"children\": [{{\"name\": \"/dev/vda2\", \"parttype\": \"c12a7328-f81f-11d2-ba4b-00a0c93ec93b\", \"fstype\": \"vfat\"}}, {{\"name\": \"/dev/vda3\", \"parttype\": \"0fc63daf-8483-4772-8e79-3d69d8477de4\", \"fstype\": \"ext4\"}}]}}]}}'"
        ),
    );
    script(
        &bin,
        "findmnt",
        &format!("echo \"findmnt $*\" >> {log}\necho /dev/vda3"),
    );
    for program in ["mount", "umount", "sync"] {
        script(&bin, program, &format!("echo \"{program} $*\" >> {log}"));
    }
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
    // the ESP's mount point, with a tree a failed bootupd update left
    std::fs::create_dir_all(root.join("boot/efi/EFI/.btmp.redhat")).unwrap();
    std::fs::create_dir_all(root.join("boot/efi/EFI/redhat")).unwrap();
    std::fs::write(root.join("boot/efi/EFI/redhat/shimx64.efi"), "old-shim").unwrap();
    std::fs::create_dir_all(root.join("etc/machine-config-daemon")).unwrap();
    std::fs::write(
        root.join("etc/machine-config-daemon/policy-for-old-podman.json"),
        "{}",
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

/// Runs the update with `bootupctl` exiting `code`; the fakes' calls, in order, and the temp
/// directory (its root under `root`).
async fn run(code: i32) -> (Vec<String>, tempfile::TempDir) {
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
    let calls = std::fs::read_to_string(dir.path().join("calls.log"))
        .expect("no fake program was called at all")
        .lines()
        .map(|l| l.trim_end().to_owned())
        .collect();
    (calls, dir)
}

#[tokio::test]
async fn secure_boot_coreos_runs_bootupctl_update_from_the_pulled_image() {
    let (calls, _dir) = run(0).await;
    assert_eq!(calls[0], "mokutil --sb-state");
    assert!(
        calls[1].starts_with("podman images --format=json"),
        "{calls:?}"
    );
    assert!(
        calls.iter().any(
            |c| c.starts_with("systemd-run --unit machine-config-daemon-bootupd ")
                && c.ends_with(&format!(
                    "-- podman pull --signature-policy /etc/machine-config-daemon/policy-for-old-podman.json {IMAGE}"
                ))
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
async fn a_failing_bootupctl_falls_back_to_copying_the_efi_files_onto_the_esp() {
    // update() returns (nothing to propagate, no panic) after the failed bootupctl.
    let (calls, dir) = run(1).await;
    let root = dir.path().join("root");
    let r = root.display();
    let after: Vec<&str> = calls
        .iter()
        .skip_while(|c| c.as_str() != "bootupctl update")
        .skip(1)
        .map(String::as_str)
        .collect();
    let cp = after
        .iter()
        .find(|c| c.starts_with("podman cp "))
        .unwrap_or_else(|| panic!("no podman cp: {calls:?}"));
    let tmp = cp.rsplit(' ').next().unwrap();
    assert_eq!(
        after,
        [
            "podman rm -f bootupd-efi-extract".to_string(),
            format!("podman create --name bootupd-efi-extract {IMAGE}"),
            format!("podman cp 0fe1c2:/usr/lib/bootupd/updates/EFI {tmp}"),
            "lsblk --paths --json -o NAME,PARTTYPE,FSTYPE".to_string(),
            format!("findmnt -n -o SOURCE --target {r}/boot"),
            format!("mount /dev/vda2 {r}/boot/efi"),
            format!("umount {r}/boot/efi"),
            "sync".to_string(),
            "podman rm -f 0fe1c2".to_string(),
        ],
        "{calls:?}"
    );
    // the real cp, find and rm did their part: the new shim is in, the leftover and the temp
    // directory gone
    let shim = std::fs::read_to_string(root.join("boot/efi/EFI/redhat/shimx64.efi")).unwrap();
    assert_eq!(shim, "new-shim\n");
    assert!(!root.join("boot/efi/EFI/.btmp.redhat").exists());
    assert!(
        tmp.starts_with('/') && !Path::new(tmp).exists(),
        "temp dir {tmp} left behind"
    );
}

#[tokio::test]
async fn the_real_podman_version_reads_as_a_semantic_version() {
    // the format string the agent gives podman, against the podman Debian packages
    let out = std::process::Command::new("podman")
        .args(["version", "--format", "{{.APIVersion}}"])
        .output()
        .expect("podman is not installed (tests/setup.sh installs it)");
    assert!(out.status.success(), "{out:?}");
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        bootloader::podman_is_older_than_4_4_1(&version).is_some(),
        "{version:?}"
    );
}
