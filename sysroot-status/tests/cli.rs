//! `mco-sysroot-status` over a real ostree sysroot (two deployments), a directory
//! that is not one, and a bad command line.

use std::process::{Command, Output};

use mco_agent::os::OsStatus;
use mco_test_support::sysroot::TestSysroot;

fn helper(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mco-sysroot-status"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> (String, String, Option<i32>) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
fn prints_the_deployments_as_the_library_reads_them() {
    let sysroot = TestSysroot::builder()
        .kargs(&["root=LABEL=root", "rw", "mco.test=1"])
        .build()
        .unwrap();
    let v2 = sysroot.commit("fakeos/v2", "2.0").unwrap();
    sysroot
        .deploy("fakeos/v2", &["root=LABEL=root", "rw"])
        .unwrap();

    let out = helper(&[sysroot.path().to_str().unwrap()]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    let printed: OsStatus = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        printed,
        mco_sysroot_status::read_sysroot(sysroot.path()).unwrap()
    );

    let entries = sysroot.deployments().unwrap();
    assert_eq!(printed.deployments.len(), 2);
    for (d, e) in printed.deployments.iter().zip(&entries) {
        assert_eq!(d.checksum, e.checksum);
        assert_eq!(d.id, format!("fakeos-{}.{}", e.checksum, e.serial));
        assert_eq!(d.kargs.as_deref(), Some(e.options.as_str()));
        assert_eq!(d.pinned, e.pinned);
        assert!(!d.booted && !d.staged, "a test sysroot is not booted");
    }
    let next = &printed.deployments[0];
    assert_eq!(next.checksum, v2);
    assert_eq!(next.version.as_deref(), Some("2.0"));
    assert_eq!(next.origin.as_deref(), Some("fakeos/v2"));
    assert!(next.timestamp.is_some());
    assert_eq!(printed.deployments[1].version.as_deref(), Some("1.0"));
}

#[test]
fn a_directory_that_is_no_sysroot_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = helper(&[dir.path().to_str().unwrap()]);
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, Some(1));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.starts_with(&format!(
            "ostree sysroot {}: loading: ",
            dir.path().display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_bad_command_line_is_refused_with_the_usage() {
    for args in [&[][..], &["a", "b"], &["--sysroot"]] {
        let out = helper(args);
        let (stdout, stderr, code) = text(&out);
        assert_eq!(code, Some(2), "{args:?}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(
            stderr.starts_with("mco-sysroot-status: expected one argument, the sysroot\nusage: "),
            "{stderr}"
        );
    }
    let (stdout, _, code) = text(&helper(&["--help"]));
    assert_eq!(code, Some(0));
    assert!(
        stdout.starts_with("usage: mco-sysroot-status SYSROOT"),
        "{stdout}"
    );
}
