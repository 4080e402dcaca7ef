//! Running one test of the current test binary as a child process, for tests whose subject
//! reads the process environment (`NOTIFY_SOCKET`, `INVOCATION_ID`, `DBUS_SYSTEM_BUS_ADDRESS`)
//! or needs its own namespaces: the parent sets them on the child, which it cannot do for
//! itself safely.
//!
//! The child is an `#[ignore]`d test that requires [`CHILD_ENV`], so that it runs only this way.

use std::process::Command;

/// Set (to `1`) in the environment of a child started by [`test_command`].
pub const CHILD_ENV: &str = "MCO_TEST_CHILD";

/// A command running the ignored test `name` of the current test binary, alone, with output.
pub fn test_command(name: &str) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([
        name,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, "1");
    cmd
}

/// Panics unless this process was started by [`test_command`].
pub fn assert_child(parent: &str) {
    assert!(
        std::env::var_os(CHILD_ENV).is_some(),
        "this test is a child of `{parent}`, which starts it with the environment it needs"
    );
}
