//! Every cause is said once: no error in the chain of a representative failure prints the text
//! of the error it returns as its `source()` (which `{:#}`, the journal and other tools print
//! again after it: `…: No such file or directory (os error 2): No such file or directory (os
//! error 2)`). An error type either says its cause in its text or returns it as its source,
//! never both.

use std::error::Error;
use std::path::Path;

use crate::rootfs::{Root, RootError};

/// The first error in `error`'s chain whose text carries its source's text: (its text, the
/// source's text).
fn repeated_cause(error: &(dyn Error + 'static)) -> Option<(String, String)> {
    let mut next = Some(error);
    while let Some(e) = next {
        let source = e.source()?;
        let (outer, inner) = (e.to_string(), source.to_string());
        // Rust's `No such file or directory (os error 2)` said as `no such file or directory`
        let plain = match inner.rfind(" (os error ") {
            Some(at) if inner.ends_with(')') => &inner[..at],
            _ => inner.as_str(),
        };
        if !plain.is_empty() && outer.to_lowercase().contains(&plain.to_lowercase()) {
            return Some((outer, inner));
        }
        next = Some(source);
    }
    None
}

fn assert_said_once(what: &str, error: &(dyn Error + 'static)) {
    if let Some((outer, inner)) = repeated_cause(error) {
        panic!("{what}: {outer:?} says its source's text again ({inner:?})");
    }
}

/// The check itself finds what it looks for (an error that both prints and returns its cause).
#[test]
fn a_doubled_cause_is_found() {
    #[derive(Debug, thiserror::Error)]
    #[error("reading /x: {0}")]
    struct Doubled(#[source] std::io::Error);
    let doubled = Doubled(std::io::Error::from_raw_os_error(2));
    assert!(repeated_cause(&doubled).is_some());
    let context = anyhow::Error::new(std::io::Error::from_raw_os_error(2)).context("reading /x");
    assert!(repeated_cause(context.as_ref()).is_none());
}

#[test]
fn file_layer_errors_say_the_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("etc/machine-config-daemon/currentconfig")).unwrap();
    std::fs::create_dir_all(dir.path().join("run/mco-agent/status.json")).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let missing = Root::open(dir.path().join("nonexistent")).unwrap_err();
    let is_dir = root
        .read(Path::new("/run/mco-agent/status.json"))
        .unwrap_err();
    let rows: Vec<(&str, anyhow::Error)> = vec![
        ("Root::open of a missing directory", missing.into()),
        ("read of a directory", is_dir.into()),
        (
            "currentconfig that is a directory",
            crate::input::read_current(&root).unwrap_err(),
        ),
        (
            "status.json that is a directory",
            crate::engine::report::read_status(&root).unwrap_err(),
        ),
        (
            "a certificate that cannot be written",
            crate::certs::CertError::write(
                "/etc/kubernetes/ca.crt",
                RootError::io(
                    "open",
                    "/etc/kubernetes/ca.crt",
                    std::io::Error::from_raw_os_error(13),
                ),
            )
            .into(),
        ),
    ];
    for (what, e) in &rows {
        assert_said_once(what, e.as_ref());
    }
}

#[test]
fn input_errors_say_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nspec: [\n",
    )
    .unwrap();
    let invalid = dir.path().join("invalid.yaml");
    std::fs::write(
        &invalid,
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: x}\nspec: {config: {ignition: {version: 9.9.9}}}\n",
    )
    .unwrap();
    let parse_error =
        machine_config::MachineConfig::from_slice(&std::fs::read(&invalid).unwrap()).unwrap_err();
    let rows: Vec<(&str, anyhow::Error)> = vec![
        (
            "a config file that does not exist",
            crate::input::LoadedConfig::read(&dir.path().join("missing.yaml")).unwrap_err(),
        ),
        (
            "a config that is not YAML",
            crate::input::LoadedConfig::read(&bad).unwrap_err(),
        ),
        (
            "a config of an unknown Ignition version",
            crate::input::LoadedConfig::read(&invalid).unwrap_err(),
        ),
        (
            "a plan of a config that does not parse",
            machine_config::plan::PlanError::Parse {
                which: "new",
                name: "x".into(),
                error: parse_error,
            }
            .into(),
        ),
    ];
    for (what, e) in &rows {
        assert_said_once(what, e.as_ref());
    }
}

#[test]
fn unreachable_servers_are_said_once() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // a port nothing listens on: connection refused
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let bus = format!("unix:path={}", dir.path().join("no-bus").display());
    let (fetch, connect) = runtime.block_on(async {
        let fetch = crate::input::LoadedConfig::load(
            &format!("http://127.0.0.1:{port}/config/worker"),
            None,
            true,
            None,
        )
        .await
        .unwrap_err();
        let connect = zbus::connection::Builder::address(bus.as_str())
            .unwrap()
            .build()
            .await
            .map_err(crate::os::OsError::Connect)
            .unwrap_err();
        (fetch, connect)
    });
    assert_said_once(
        "a config server that refuses the connection",
        fetch.as_ref(),
    );
    assert_said_once("a system bus that is not there", &connect);
}
