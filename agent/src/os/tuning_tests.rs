use super::*;
use crate::os::fake::{FakeOsUpdater, OsCall};

const CMDLINE: &str = "BOOT_IMAGE=(hd0,gpt3)/ostree/rhcos/vmlinuz-5.14 root=UUID=1 rw nosmt=force mitigations=auto,nosmt quiet\n";

#[test]
fn decisions_follow_the_mcd() {
    use Decision::*;
    use TuningLine::{Add, Delete};
    struct Case {
        name: &'static str,
        line: TuningLine,
        cmdline: &'static str,
        tunable: Tunable,
        want: Decision,
    }
    let s = |a: &str| a.to_string();
    let cases = [
        Case {
            name: "parseTuningFile ADD, isArgTunable on EL (allowlist), isArgInUse false: appended",
            line: Add(s("nosmt")),
            cmdline: CMDLINE,
            tunable: Tunable::EnterpriseLinux,
            want: Append(s("nosmt")),
        },
        Case {
            name: "parseTuningFile ADD, isArgInUse true: skipped, already in use",
            line: Add(s("nosmt")),
            cmdline: "root=UUID=1 nosmt rw",
            tunable: Tunable::EnterpriseLinux,
            want: AlreadyInUse(s("nosmt")),
        },
        Case {
            name: "parseTuningFile DELETE, isArgInUse true: deleted",
            line: Delete(s("nosmt")),
            cmdline: "root=UUID=1 rw nosmt",
            tunable: Tunable::EnterpriseLinux,
            want: Decision::Delete(s("nosmt")),
        },
        Case {
            name: "parseTuningFile DELETE, isArgInUse false (whole words: nosmt=force is not nosmt): skipped",
            line: Delete(s("nosmt")),
            cmdline: CMDLINE,
            tunable: Tunable::EnterpriseLinux,
            want: NotPresent(s("nosmt")),
        },
        Case {
            name: "isArgTunable on EL: an argument off the allowlist is not tunable",
            line: Add(s("hugepages=2")),
            cmdline: CMDLINE,
            tunable: Tunable::EnterpriseLinux,
            want: NotTunable(s("hugepages=2")),
        },
        Case {
            name: "isArgTunable on FCOS: any argument, with a value too",
            line: Add(s("hugepages=2")),
            cmdline: CMDLINE,
            tunable: Tunable::Fedora,
            want: Append(s("hugepages=2")),
        },
        Case {
            name: "isArgTunable on FCOS, isArgInUse true for a DELETE with a value",
            line: Delete(s("mitigations=auto,nosmt")),
            cmdline: CMDLINE,
            tunable: Tunable::Fedora,
            want: Decision::Delete(s("mitigations=auto,nosmt")),
        },
        Case {
            name: "isArgTunable on another OS: nothing is tunable",
            line: Add(s("nosmt")),
            cmdline: CMDLINE,
            tunable: Tunable::Nothing,
            want: NotTunable(s("nosmt")),
        },
    ];
    for c in cases {
        assert_eq!(
            decide(std::slice::from_ref(&c.line), c.cmdline, c.tunable),
            [c.want],
            "{}",
            c.name
        );
    }
}

#[test]
fn tunable_follows_the_mcds_os_names() {
    for (os, want) in [
        ("RHCOS", Tunable::EnterpriseLinux),
        ("SCOS", Tunable::EnterpriseLinux),
        ("FCOS", Tunable::Fedora),
        ("DEBIAN", Tunable::Nothing),
        ("UNKNOWN", Tunable::Nothing),
    ] {
        assert_eq!(Tunable::for_os(os), want, "{os}");
    }
}

#[test]
fn parse_reads_add_and_delete_and_names_a_bad_line() {
    let good = "# SMT off\nADD nosmt\n\nDELETE  mitigations=off \n";
    assert_eq!(
        parse(TUNING_FILE, good).unwrap(),
        [
            TuningLine::Add("nosmt".into()),
            TuningLine::Delete("mitigations=off".into())
        ]
    );
    for (text, line, reason) in [
        (
            "ADD nosmt\nadd nosmt\n",
            2,
            "expected \"ADD <argument>\" or \"DELETE <argument>\"",
        ),
        (
            "ADDnosmt\n",
            1,
            "expected \"ADD <argument>\" or \"DELETE <argument>\"",
        ),
        ("ADD \n", 1, "no kernel argument"),
        ("# c\nDELETE a b\n", 2, "one kernel argument a line"),
    ] {
        let err = parse(TUNING_FILE, text).unwrap_err();
        assert_eq!((err.line, err.reason), (line, reason), "{text:?}");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("/etc/pivot/kernel-args line {line}: ")),
            "{message}"
        );
    }
}

#[test]
fn change_appends_then_deletes_what_was_decided() {
    let c = change(&[
        Decision::Append("a".into()),
        Decision::NotTunable("x".into()),
        Decision::Delete("b".into()),
        Decision::AlreadyInUse("c".into()),
        Decision::NotPresent("d".into()),
    ]);
    assert_eq!(c.append_if_missing, ["a"]);
    assert_eq!(c.delete_if_present, ["b"]);
    assert!(c.append.is_empty() && c.delete.is_empty() && c.replace.is_empty());
}

fn root_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let root = Root::open(dir.path()).unwrap();
    (dir, root)
}

const RHCOS: &str = "ID=\"rhcos\"\nVERSION_ID=\"4.16\"\n";

#[tokio::test]
async fn apply_stages_the_change_against_proc_cmdline() {
    let (_dir, root) = root_with(&[
        ("/etc/os-release", RHCOS),
        (TUNING_FILE, "ADD nosmt\nDELETE quiet\nADD hugepages=2\n"),
        (CMDLINE_FILE, "root=UUID=1 rw quiet\n"),
    ]);
    let os = FakeOsUpdater::booted("rhcos", "quay.io/x/os@sha256:1", "root=UUID=1 rw");
    let c = apply(&root, &os).await.unwrap();
    assert_eq!(c.append_if_missing, ["nosmt"]);
    assert!(
        c.delete_if_present.is_empty(),
        "quiet is not tunable on RHCOS"
    );
    assert_eq!(
        os.calls(),
        [OsCall::KernelArgs {
            existing: None,
            change: c
        }]
    );
}

#[tokio::test]
async fn apply_without_a_file_or_a_change_asks_nothing() {
    let os = FakeOsUpdater::booted("rhcos", "quay.io/x/os@sha256:1", "root=UUID=1 rw");
    let (_dir, root) = root_with(&[("/etc/os-release", RHCOS)]);
    assert!(apply(&root, &os).await.unwrap().is_empty());
    let (_dir, root) = root_with(&[
        ("/etc/os-release", RHCOS),
        (TUNING_FILE, "ADD nosmt\n"),
        (CMDLINE_FILE, "rw nosmt\n"),
    ]);
    assert!(apply(&root, &os).await.unwrap().is_empty());
    assert_eq!(os.calls(), []);
}

#[tokio::test]
async fn apply_refuses_a_malformed_file_before_any_change() {
    let (_dir, root) = root_with(&[
        ("/etc/os-release", RHCOS),
        (TUNING_FILE, "ADD nosmt\nremove nosmt\n"),
        (CMDLINE_FILE, "rw\n"),
    ]);
    let os = FakeOsUpdater::booted("rhcos", "quay.io/x/os@sha256:1", "root=UUID=1 rw");
    let err = apply(&root, &os).await.unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "/etc/pivot/kernel-args line 2: expected \"ADD <argument>\" or \"DELETE <argument>\": \"remove nosmt\""
    );
    assert_eq!(os.calls(), []);
}
