//! The helper's outcomes, played by `/bin/sh` running a script given as the "sysroot" (a script
//! is read by the shell, never executed itself: no ETXTBSY race with other tests' forks).
//! Reading a real sysroot is tested in `tests/os_changes.rs` and `tests/status_metrics.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

fn script(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("helper.sh");
    std::fs::write(&path, body).unwrap();
    path
}

fn sh() -> SysrootReader {
    SysrootReader::new("/bin/sh")
}

#[tokio::test]
async fn the_helpers_json_is_the_sysroots_state() {
    let dir = tempfile::tempdir().unwrap();
    let status = OsStatus {
        deployments: vec![Deployment {
            id: "fakeos-abc.0".into(),
            osname: "fakeos".into(),
            checksum: "abc".into(),
            custom_origin: Some(("pivot://quay.io/x@sha256:1".into(), "x".into())),
            kargs: Some("root=x rw".into()),
            booted: true,
            ..Deployment::default()
        }],
    };
    let json = serde_json::to_string(&status).unwrap();
    let path = script(dir.path(), &format!("echo '{json}'\n"));
    let state = sh().read(&path).await.unwrap();
    assert_eq!(state, SysrootState { path, status });
    assert_eq!(state.booted().unwrap().checksum, "abc");
}

#[tokio::test]
async fn a_missing_helper_is_a_sysroot_error_naming_it() {
    let e = SysrootReader::new("/nonexistent/mco-sysroot-status")
        .read(Path::new("/sysroot"))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "ostree sysroot /sysroot: running the sysroot reader /nonexistent/mco-sysroot-status: \
         no such file or directory"
    );
}

#[tokio::test]
async fn the_helpers_own_message_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = script(
        dir.path(),
        "echo \"ostree sysroot $0: loading: opendir(ostree/deploy): No such file\" >&2; exit 1\n",
    );
    let e = sh().read(&path).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "ostree sysroot {}: loading: opendir(ostree/deploy): No such file",
            path.display()
        )
    );
}

#[tokio::test]
async fn other_failures_say_how_the_helper_ended() {
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), "echo 'something else' >&2; exit 3\n");
    let e = sh().read(&path).await.unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "ostree sysroot {}: the sysroot reader /bin/sh failed (exit status: 3): something else",
            path.display()
        )
    );
    let path = script(dir.path(), "kill -9 $$\n");
    let e = sh().read(&path).await.unwrap_err().to_string();
    assert!(
        e.ends_with("the sysroot reader /bin/sh failed (signal: 9 (SIGKILL))"),
        "{e}"
    );
}

#[tokio::test]
async fn output_that_is_not_deployments_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    for body in ["echo '{\"deployments\": 1}'\n", "true\n"] {
        let path = script(dir.path(), body);
        let e = sh().read(&path).await.unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "ostree sysroot {}: the sysroot reader /bin/sh printed no deployments JSON: ",
                path.display()
            )),
            "{body}: {e}"
        );
    }
}

#[tokio::test]
async fn a_hanging_helper_is_killed_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = script(dir.path(), "exec sleep 30\n");
    let e = sh()
        .with_timeout(Duration::from_millis(200))
        .read(&path)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("the sysroot reader /bin/sh did not finish within 200ms (killed)"),
        "{e}"
    );
}

#[test]
fn the_environment_names_another_helper_else_the_installed_one() {
    // The unit-test binary lives in target/<profile>/deps/, where no helper is.
    let reader = SysrootReader::locate();
    match std::env::var_os(SYSROOT_READER_ENV).filter(|p| !p.is_empty()) {
        Some(p) => assert_eq!(reader.program(), Path::new(&p)),
        None => assert_eq!(reader.program(), Path::new(SYSROOT_READER_PATH)),
    }
}
