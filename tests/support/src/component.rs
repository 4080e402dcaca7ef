//! Tests whose real component (root, a booted systemd container, a private journald, the
//! VMs) is missing fail and say why; they never pass without having run.
//!
//! A machine that cannot have a component opts out explicitly: `MCO_TEST_SKIP` names the
//! components to leave out (`nspawn`, `journald`, `vm`, comma-separated), and `tests/run.sh`
//! then excludes those tests from the run and prints them as skipped. The tests themselves do
//! not read it: run directly, a test of a missing component fails.

/// The opt-out variable `tests/run.sh` reads.
pub const SKIP_ENV: &str = "MCO_TEST_SKIP";

/// Fails the test: `component` cannot run here, because `why`.
#[track_caller]
pub fn missing(component: &str, why: &str) -> ! {
    panic!(
        "this test needs {component}, which cannot run here: {why}.\n\
         Install what is missing (tests/setup.sh, as root), or opt out with \
         {SKIP_ENV}={component} tests/run.sh, which leaves these tests out and reports them \
         skipped."
    )
}
