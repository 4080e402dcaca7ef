use super::*;
use crate::host::command::FakeCommands;
use crate::host::systemd::{FakeSystemd, JobKind, SystemdCall};

const IMAGE: &str =
    "quay.io/openshift/os@sha256:2222222222222222222222222222222222222222222222222222222222222222";
const RHCOS_96: &str = "ID=\"rhcos\"\nVERSION_ID=\"4.19\"\nRHEL_VERSION=\"9.6\"\n";
const RHCOS_94: &str = "ID=\"rhcos\"\nVERSION=\"418.94.202410090804-0\"\nOPENSHIFT_VERSION=\"4.18\"\nVERSION_ID=\"4.18\"\n";
const DEBIAN: &str = "ID=debian\nVERSION_ID=\"12\"\n";
const ENABLED: &str = "SecureBoot enabled\n";

#[test]
fn the_os_version_is_read_as_the_mcd_reads_it() {
    let rows: &[(&str, Option<(u32, u32)>)] = &[
        (RHCOS_96, Some((9, 6))),
        // RHCOS 4.18: the RHEL part of VERSION after OPENSHIFT_VERSION's digits
        (RHCOS_94, Some((9, 4))),
        (
            "ID=fedora\nVARIANT_ID=coreos\nVERSION_ID=41\n",
            Some((41, 0)),
        ),
        ("ID=scos\nVERSION_ID=\"10.0\"\n", Some((10, 0))),
        ("ID=rhcos\n", None),
        ("ID=rhcos\nRHEL_VERSION=nine\n", None),
    ];
    for (text, want) in rows {
        assert_eq!(os_version(text), *want, "{text}");
    }
}

/// One row of the gates: what it shows, CoreOS, the architecture, mokutil's answer, the OS
/// version, and the plan.
type GateRow = (
    &'static str,
    bool,
    &'static str,
    Result<&'static str, String>,
    Option<(u32, u32)>,
    Plan,
);

#[test]
fn the_gates_follow_run_bootloader_update() {
    let rows: &[GateRow] = &[
        (
            "IsCoreOSVariant",
            false,
            "x86_64",
            Ok(ENABLED),
            Some((9, 6)),
            Plan::Skip("not a CoreOS variant"),
        ),
        (
            "GOARCH amd64/arm64 only",
            true,
            "s390x",
            Ok(ENABLED),
            Some((9, 6)),
            Plan::Skip("the architecture has no Secure Boot bootloader to update"),
        ),
        (
            "mokutil: Secure Boot off",
            true,
            "aarch64",
            Ok("SecureBoot disabled\n"),
            Some((9, 6)),
            Plan::Skip(
                "runBootloaderUpdate: Secure Boot not enabled, bootloader update not required",
            ),
        ),
        (
            "mokutil failing: taken to be on",
            true,
            "x86_64",
            Err("mokutil: not found".into()),
            Some((9, 6)),
            Plan::Unit,
        ),
        (
            "RHEL 9.6 and later: the OS's unit",
            true,
            "x86_64",
            Ok(ENABLED),
            Some((10, 0)),
            Plan::Unit,
        ),
        (
            "before 9.6: the container",
            true,
            "x86_64",
            Ok(ENABLED),
            Some((9, 4)),
            Plan::Container,
        ),
        (
            "no version: the container",
            true,
            "x86_64",
            Ok(ENABLED),
            None,
            Plan::Container,
        ),
    ];
    for (what, coreos, arch, sb, version, want) in rows {
        assert_eq!(
            plan(
                *coreos,
                arch,
                sb.clone().as_deref().map_err(|e| e.to_string()),
                *version
            ),
            *want,
            "{what}"
        );
    }
}

struct Row {
    what: &'static str,
    os_release: &'static str,
    commands: FakeCommands,
    unit_fails: bool,
    /// The programs run, by their first words.
    ran: &'static [&'static str],
    /// Whether the unit was started.
    unit: bool,
}

const LIST: &[&str] = &["podman", "images", "--format=json", "--filter"];
const PULL: &[&str] = &[
    "systemd-run",
    "--unit",
    "machine-config-daemon-bootupd",
    "-p",
];
const RUN: &[&str] = &[
    "systemd-run",
    "--unit",
    "machine-config-daemon-bootupd-update",
    "-p",
];

#[tokio::test]
async fn an_update_runs_what_the_gates_chose_and_never_fails() {
    let local = r#"[{"Id": "abc", "RepoDigests": []}]"#;
    let rows = vec![
        Row {
            what: "not CoreOS: nothing runs",
            os_release: DEBIAN,
            commands: FakeCommands::new(),
            unit_fails: false,
            ran: &[],
            unit: false,
        },
        Row {
            what: "Secure Boot off: mokutil only",
            os_release: RHCOS_94,
            commands: FakeCommands::new().ok(&["mokutil"], "SecureBoot disabled\n"),
            unit_fails: false,
            ran: &["mokutil --sb-state"],
            unit: false,
        },
        Row {
            what: "9.6: the unit, and nothing else when it succeeds",
            os_release: RHCOS_96,
            commands: FakeCommands::new().ok(&["mokutil"], ENABLED),
            unit_fails: false,
            ran: &["mokutil --sb-state"],
            unit: true,
        },
        Row {
            what: "9.6, the unit failing: the container, pulled first",
            os_release: RHCOS_96,
            commands: FakeCommands::new()
                .ok(&["mokutil"], ENABLED)
                .ok(LIST, "[]")
                .ok(PULL, "")
                .ok(RUN, ""),
            unit_fails: true,
            ran: &[
                "mokutil --sb-state",
                "podman images",
                "systemd-run --unit machine-config-daemon-bootupd -p",
                "systemd-run --unit machine-config-daemon-bootupd-update -p",
            ],
            unit: true,
        },
        Row {
            what: "9.4 with the image local: no pull",
            os_release: RHCOS_94,
            commands: FakeCommands::new()
                .ok(&["mokutil"], ENABLED)
                .ok(LIST, local)
                .ok(RUN, ""),
            unit_fails: false,
            ran: &[
                "mokutil --sb-state",
                "podman images",
                "systemd-run --unit machine-config-daemon-bootupd-update -p",
            ],
            unit: false,
        },
        Row {
            what: "a failed pull: no bootupctl, no failure",
            os_release: RHCOS_94,
            commands: FakeCommands::new()
                .ok(&["mokutil"], ENABLED)
                .ok(LIST, "[]")
                .fails(PULL, 1, "unauthorized"),
            unit_fails: false,
            ran: &[
                "mokutil --sb-state",
                "podman images",
                "systemd-run --unit machine-config-daemon-bootupd -p",
            ],
            unit: false,
        },
        Row {
            what: "mokutil missing: taken to be on",
            os_release: RHCOS_94,
            commands: FakeCommands::new().ok(LIST, local).ok(RUN, ""),
            unit_fails: false,
            ran: &[
                "mokutil --sb-state",
                "podman images",
                "systemd-run --unit machine-config-daemon-bootupd-update -p",
            ],
            unit: false,
        },
    ];
    for row in rows {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/os-release"), row.os_release).unwrap();
        let root = Root::open(dir.path()).unwrap();
        // the OS ships the unit (static, started by the agent)
        let systemd = FakeSystemd::new().with_unit_file(UNIT, "static");
        if row.unit_fails {
            systemd.fail_job(JobKind::Start, UNIT, "failed");
        }
        let host = BootloaderHost {
            root: &root,
            commands: &row.commands,
            systemd: Some(&systemd),
            arch: "x86_64",
        };
        update(&host, IMAGE).await;
        let calls = row.commands.calls();
        assert_eq!(calls.len(), row.ran.len(), "{}: {calls:#?}", row.what);
        for (call, want) in calls.iter().zip(row.ran) {
            assert!(call.starts_with(want), "{}: {call} is not {want}", row.what);
        }
        let started = systemd
            .calls()
            .contains(&SystemdCall::Start(UNIT.to_string()));
        assert_eq!(started, row.unit, "{}", row.what);
        if let Some(run) = calls.iter().find(|c| c.contains("bootupd-update")) {
            assert!(
                run.ends_with(&format!("--privileged --pid=host --net=host --rm -v /boot:/boot:rslave -v /dev:/dev {IMAGE} bootupctl update")),
                "{run}"
            );
        }
    }
}

#[test]
fn podman_older_than_4_4_1_is_read_as_a_semantic_version() {
    let rows: &[(&str, Option<bool>)] = &[
        ("4.3.1\n", Some(true)),
        ("4.4.0", Some(true)),
        ("4.4.1", Some(false)),
        // a pre-release comes before its release
        ("4.4.1-rc1", Some(true)),
        ("5.3.0-rc1", Some(false)),
        ("4.10.0", Some(false)),
        ("4.9.4-rhel+build.1", Some(false)),
        ("4.4", None),
        ("4.4.1.2", None),
        ("v4.4.1", None),
        ("", None),
        ("Error: cannot connect", None),
    ];
    for (version, want) in rows {
        assert_eq!(podman_is_older_than_4_4_1(version), *want, "{version:?}");
    }
}

const VERSION: &[&str] = &["podman", "version", "--format", "{{.APIVersion}}"];

#[tokio::test]
async fn the_pull_takes_the_old_podman_policy_when_podman_is_older_than_4_4_1_and_the_file_is_there()
 {
    // what, `podman version`'s answer (None: fails), the policy file on the node, the flag
    let rows: &[(&str, Option<&str>, bool, bool)] = &[
        ("old podman, file there", Some("4.3.1\n"), true, true),
        ("new podman, file there", Some("5.4.2\n"), true, false),
        ("old podman, no file", Some("4.3.1\n"), false, false),
        (
            "version unreadable: old, as upstream",
            Some("unknown\n"),
            true,
            true,
        ),
        ("podman version failing: old, as upstream", None, true, true),
    ];
    for (what, version, file, flag) in rows {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/machine-config-daemon")).unwrap();
        std::fs::write(dir.path().join("etc/os-release"), RHCOS_94).unwrap();
        if *file {
            std::fs::write(dir.path().join(&OLD_PODMAN_POLICY[1..]), "{}").unwrap();
        }
        let root = Root::open(dir.path()).unwrap();
        let commands = FakeCommands::new().ok(&["mokutil"], ENABLED).ok(LIST, "[]");
        let commands = match version {
            Some(v) => commands.ok(VERSION, v),
            None => commands.fails(VERSION, 125, "Error: no runtime"),
        }
        .ok(PULL, "")
        .ok(RUN, "");
        let host = BootloaderHost {
            root: &root,
            commands: &commands,
            systemd: None,
            arch: "x86_64",
        };
        update(&host, IMAGE).await;
        let calls = commands.calls();
        let pull = calls
            .iter()
            .find(|c| c.contains("podman pull"))
            .unwrap_or_else(|| panic!("{what}: no pull: {calls:#?}"));
        let with = format!("podman pull --signature-policy {OLD_PODMAN_POLICY} {IMAGE}");
        let without = format!("podman pull {IMAGE}");
        assert!(
            pull.ends_with(if *flag { &with } else { &without }),
            "{what}: {pull}"
        );
        // podman is asked only when the file is there
        assert_eq!(
            calls.iter().any(|c| c.starts_with("podman version")),
            *file,
            "{what}: {calls:#?}"
        );
    }
}

/// lsblk of one disk: an ESP and /boot.
const ONE_DISK: &str = r#"{"blockdevices": [
  {"name": "/dev/vda", "parttype": null, "fstype": null, "children": [
    {"name": "/dev/vda1", "parttype": "21686148-6449-6e6f-744e-656564454649", "fstype": null},
    {"name": "/dev/vda2", "parttype": "c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "fstype": "vfat"},
    {"name": "/dev/vda3", "parttype": "0fc63daf-8483-4772-8e79-3d69d8477de4", "fstype": "ext4"},
    {"name": "/dev/vda4", "parttype": "0fc63daf-8483-4772-8e79-3d69d8477de4", "fstype": "xfs"}
  ]}
]}"#;

/// Two disks mirrored: /boot on md126 assembled from sda3 and sdb3, an ESP on each, and a
/// third disk with an ESP of its own.
const RAID: &str = r#"{"blockdevices": [
  {"name": "/dev/sda", "parttype": null, "fstype": null, "children": [
    {"name": "/dev/sda2", "parttype": "C12A7328-F81F-11D2-BA4B-00A0C93EC93B", "fstype": "linux_raid_member",
     "children": [{"name": "/dev/md127", "parttype": null, "fstype": "vfat"}]},
    {"name": "/dev/sda3", "parttype": "0fc63daf-8483-4772-8e79-3d69d8477de4", "fstype": "linux_raid_member",
     "children": [{"name": "/dev/md126", "parttype": null, "fstype": "ext4"}]}
  ]},
  {"name": "/dev/sdb", "parttype": null, "fstype": null, "children": [
    {"name": "/dev/sdb2", "parttype": "c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "fstype": "linux_raid_member",
     "children": [{"name": "/dev/md127", "parttype": null, "fstype": "vfat"}]},
    {"name": "/dev/sdb3", "parttype": "0fc63daf-8483-4772-8e79-3d69d8477de4", "fstype": "linux_raid_member",
     "children": [{"name": "/dev/md126", "parttype": null, "fstype": "ext4"}]}
  ]},
  {"name": "/dev/sdc", "parttype": null, "fstype": null, "children": [
    {"name": "/dev/sdc1", "parttype": "c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "fstype": "vfat"}
  ]}
]}"#;

/// Two disks, each with an ESP; /boot on the second (an installer's disk left in the first).
const TWO_DISKS: &str = r#"{"blockdevices": [
  {"name": "/dev/nvme0n1", "parttype": null, "fstype": null, "children": [
    {"name": "/dev/nvme0n1p1", "parttype": "c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "fstype": "vfat"},
    {"name": "/dev/nvme0n1p2", "parttype": "0fc63daf-8483-4772-8e79-3d69d8477de4", "fstype": "ext4"}
  ]},
  {"name": "/dev/nvme1n1", "parttype": null, "fstype": null, "children": [
    {"name": "/dev/nvme1n1p2", "parttype": "c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "fstype": "vfat"},
    {"name": "/dev/nvme1n1p3", "parttype": "0fc63daf-8483-4772-8e79-3d69d8477de4", "fstype": "crypto_LUKS",
     "children": [{"name": "/dev/mapper/boot", "parttype": null, "fstype": "ext4"}]}
  ]}
]}"#;

/// No GPT ESP anywhere (a BIOS node), as lsblk prints a disk without partitions.
const NO_ESP: &str = r#"{"blockdevices": [
  {"name": "/dev/zram0", "parttype": null, "fstype": null},
  {"name": "/dev/vda", "parttype": null, "fstype": null, "children": [
    {"name": "/dev/vda1", "parttype": "0x83", "fstype": "ext4"}
  ]}
]}"#;

/// One row of the ESP choice: what it shows, lsblk's JSON, /boot's device, the ESPs (or the
/// start of the error).
type EspRow = (
    &'static str,
    &'static str,
    &'static str,
    Result<&'static [&'static str], &'static str>,
);

#[test]
fn the_esps_are_chosen_as_the_mcd_chooses_them() {
    let rows: &[EspRow] = &[
        (
            "one disk: its ESP",
            ONE_DISK,
            "/dev/vda3",
            Ok(&["/dev/vda2"]),
        ),
        (
            "RAID: the ESP of every member disk, not the other disk's",
            RAID,
            "/dev/md126",
            Ok(&["/dev/sda2", "/dev/sdb2"]),
        ),
        (
            "two disks: the one /boot is on (also below LUKS)",
            TWO_DISKS,
            "/dev/mapper/boot",
            Ok(&["/dev/nvme1n1p2"]),
        ),
        (
            "two disks: /boot on the first",
            TWO_DISKS,
            "/dev/nvme0n1p2",
            Ok(&["/dev/nvme0n1p1"]),
        ),
        (
            "two disks, /boot on neither",
            TWO_DISKS,
            "/dev/sdz1",
            Err("could not find ESP on boot disk containing /dev/sdz1"),
        ),
        (
            "no ESP",
            NO_ESP,
            "/dev/vda1",
            Err("no EFI System Partition found"),
        ),
        (
            "not JSON",
            "lsblk: unknown column",
            "/dev/vda1",
            Err("parsing lsblk output"),
        ),
    ];
    for (what, lsblk, boot, want) in rows {
        let got = efi::esp_devices(lsblk, boot);
        match want {
            Ok(want) => assert_eq!(got.expect(what), *want, "{what}"),
            Err(want) => {
                let e = got.expect_err(what);
                assert!(e.starts_with(want), "{what}: {e}");
            }
        }
    }
    let raid_without_esp = RAID
        .replace("c12a7328", "00000000")
        .replace("C12A7328", "0");
    assert_eq!(
        efi::esp_devices(&raid_without_esp, "/dev/md126"),
        Err("no ESP replicas found for RAID device /dev/md126".to_string())
    );
}

#[test]
fn findmnt_names_the_boot_device_as_lsblk_does() {
    for (findmnt, want) in [
        ("/dev/vda3\n", "/dev/vda3"),
        ("/dev/sda4[/boot]\n", "/dev/sda4"),
        ("/dev/md126", "/dev/md126"),
    ] {
        assert_eq!(efi::boot_source(findmnt), want);
    }
}

/// What update() logged, without colours.
fn logged(out: &std::sync::Arc<std::sync::Mutex<Vec<u8>>>) -> String {
    String::from_utf8(out.lock().unwrap().clone()).unwrap()
}

struct LogSink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
impl std::io::Write for LogSink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One run of the EFI fallback: what it shows, what the scripted programs answer (beyond
/// bootupctl failing), the commands after the failed `bootupctl update`, and the warning
/// (`None`: it succeeded).
struct EfiRow {
    what: &'static str,
    commands: FakeCommands,
    ran: Vec<String>,
    warning: Option<&'static str>,
}

#[tokio::test(flavor = "current_thread")]
async fn a_failing_bootupctl_falls_back_to_copying_the_efi_files_and_never_fails_the_update() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("etc")).unwrap();
    std::fs::write(dir.path().join("etc/os-release"), RHCOS_94).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let r = dir.path().display();
    let tmp = "/tmp/bootupd-efi-Ab12Cd";
    let local = r#"[{"Id": "abc", "RepoDigests": []}]"#;
    // the scripted node: the image local, bootupctl failing
    let node = || {
        FakeCommands::new()
            .ok(&["mokutil"], ENABLED)
            .ok(LIST, local)
            .fails(RUN, 1, "error: renameat2 RENAME_EXCHANGE: Invalid argument")
    };
    let start = |mount: &[&str]| -> Vec<String> {
        let mut ran = vec![
            "podman rm -f bootupd-efi-extract".to_string(),
            format!("podman create --name bootupd-efi-extract {IMAGE}"),
            "mktemp -d --tmpdir bootupd-efi-XXXXXX".to_string(),
            format!("podman cp 0fe1c2:/usr/lib/bootupd/updates/EFI {tmp}"),
            "lsblk --paths --json -o NAME,PARTTYPE,FSTYPE".to_string(),
            format!("findmnt -n -o SOURCE --target {r}/boot"),
        ];
        ran.extend(mount.iter().map(|s| s.to_string()));
        ran
    };
    let copy_onto = |device: &str| -> Vec<String> {
        vec![
            format!("mount {device} {r}/boot/efi"),
            format!(
                "find {r}/boot/efi/EFI -mindepth 1 -maxdepth 1 -type d -name .btmp.* -print -exec rm -rf {{}} +"
            ),
            format!("find {r}/boot/efi -type f -exec sha256sum {{}} +"),
            format!("cp -rp {tmp}/EFI {r}/boot/efi/"),
            format!("find {r}/boot/efi -type f -exec sha256sum {{}} +"),
            format!("umount {r}/boot/efi"),
        ]
    };
    let end = vec![
        "sync".to_string(),
        format!("rm -rf {tmp}"),
        "podman rm -f 0fe1c2".to_string(),
    ];
    let extracted = |c: FakeCommands| {
        c.ok(&["podman", "rm"], "")
            .ok(&["podman", "create"], "0fe1c2\n")
            .ok(&["mktemp"], &format!("{tmp}\n"))
            .ok(&["podman", "cp"], "")
            .ok(&["findmnt"], "/dev/vda3\n")
    };
    let concat = |parts: &[&[String]]| parts.concat();
    let rows = vec![
        EfiRow {
            what: "one ESP: mounted, cleaned, copied, unmounted; synced, removed",
            commands: extracted(node())
                .ok(&["lsblk"], ONE_DISK)
                .ok(&["mount"], "")
                .ok(&["find"], "")
                .ok(&["cp"], "")
                .ok(&["umount"], "")
                .ok(&["sync"], "")
                .ok(&["rm"], ""),
            ran: concat(&[&start(&[]), &copy_onto("/dev/vda2"), &end]),
            warning: None,
        },
        EfiRow {
            what: "RAID: every member's ESP in turn",
            commands: extracted(node())
                .ok(&["lsblk"], &RAID.replace("/dev/md126", "/dev/vda3"))
                .ok(&["mount"], "")
                .ok(&["find"], "")
                .ok(&["cp"], "")
                .ok(&["umount"], "")
                .ok(&["sync"], "")
                .ok(&["rm"], ""),
            ran: concat(&[
                &start(&[]),
                &copy_onto("/dev/sda2"),
                &copy_onto("/dev/sdb2"),
                &end,
            ]),
            warning: None,
        },
        EfiRow {
            what: "the copy failing: still unmounted, the temp dir and container removed, no sync",
            commands: extracted(node())
                .ok(&["lsblk"], ONE_DISK)
                .ok(&["mount"], "")
                .fails(
                    &["find"],
                    1,
                    "find: '/boot/efi/EFI': No such file or directory",
                )
                .fails(&["cp"], 1, "cp: error writing: No space left on device")
                .ok(&["umount"], "")
                .ok(&["rm"], ""),
            ran: concat(&[
                &start(&[]),
                &copy_onto("/dev/vda2")[..4],
                &[format!("umount {r}/boot/efi")],
                &end[1..],
            ]),
            warning: Some(
                "bootloader update failed: bootupctl fallback EFI copy: copying EFI to /dev/vda2: copying EFI files: cp failed (exit status 1): cp: error writing: No space left on device",
            ),
        },
        EfiRow {
            what: "the umount failing is a failure too",
            commands: extracted(node())
                .ok(&["lsblk"], ONE_DISK)
                .ok(&["mount"], "")
                .ok(&["find"], "")
                .ok(&["cp"], "")
                .fails(&["umount"], 32, "umount: target is busy.")
                .ok(&["rm"], ""),
            ran: concat(&[&start(&[]), &copy_onto("/dev/vda2"), &end[1..]]),
            warning: Some("copying EFI to /dev/vda2: unmounting"),
        },
        EfiRow {
            what: "mount failing: nothing to unmount",
            commands: extracted(node())
                .ok(&["lsblk"], ONE_DISK)
                .fails(&["mount"], 32, "mount: /boot/efi: wrong fs type")
                .ok(&["rm"], ""),
            ran: concat(&[&start(&[]), &copy_onto("/dev/vda2")[..1], &end[1..]]),
            warning: Some("copying EFI to /dev/vda2: mounting /dev/vda2: mount failed"),
        },
        EfiRow {
            what: "no ESP: nothing mounted",
            commands: extracted(node()).ok(&["lsblk"], NO_ESP).ok(&["rm"], ""),
            ran: concat(&[&start(&[]), &end[1..]]),
            warning: Some("bootupctl fallback EFI copy: no EFI System Partition found"),
        },
        EfiRow {
            what: "podman create failing: nothing else runs",
            commands: node().ok(&["podman", "rm"], "").fails(
                &["podman", "create"],
                125,
                "Error: image not known",
            ),
            ran: start(&[])[..2].to_vec(),
            warning: Some("creating container for EFI extraction: podman failed (exit status 125)"),
        },
    ];
    for row in rows {
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || LogSink(sink.clone()))
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let host = BootloaderHost {
            root: &root,
            commands: &row.commands,
            systemd: None,
            arch: "x86_64",
        };
        update(&host, IMAGE).await;
        let calls = row.commands.calls();
        let after: Vec<String> = calls
            .iter()
            .skip_while(|c| !c.contains("bootupd-update"))
            .skip(1)
            .cloned()
            .collect();
        assert_eq!(after, row.ran, "{}", row.what);
        let log = logged(&out);
        assert!(
            log.contains("bootupctl update failed; falling back to manual EFI copy"),
            "{}: {log}",
            row.what
        );
        match row.warning {
            None => {
                assert!(
                    log.contains("fallback EFI copy completed"),
                    "{}: {log}",
                    row.what
                );
                assert!(
                    !log.contains("bootloader update failed"),
                    "{}: {log}",
                    row.what
                );
            }
            Some(want) => {
                let line = log
                    .lines()
                    .find(|l| l.contains("bootloader update failed: "))
                    .unwrap_or_else(|| panic!("{}: no warning: {log}", row.what));
                assert!(line.contains(" WARN "), "{}: {line}", row.what);
                assert!(line.contains(want), "{}: {line}", row.what);
            }
        }
    }
}
