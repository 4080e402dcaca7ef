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
