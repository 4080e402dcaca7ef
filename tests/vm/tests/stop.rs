//! SIGTERM at every failpoint of a reboot update and of a rebootless update (see
//! `mco_vm_tests::powercut` and tests/vm/README.md): the agent is held at the failpoint, then
//! stopped by `systemctl stop` or by a reboot it did not ask for; its unit must stop within the
//! unit's `TimeoutStopSec` with systemd's result `success`, and the node must converge once the
//! agent runs again.
//!
//! None runs in the default suite (`agent/tests/stop.rs` stops the agent at every step without
//! a VM there): `tests/vm/run.sh stop_short` makes one stop of each kind (the OS step, the
//! reboot the agent asked for, a rebootless update), `tests/vm/run.sh stop_full` every one
//! (three VMs, two at a time).

use anyhow::Result;
use mco_vm_tests::powercut::{
    self, AFTER_REBOOT_POINTS, Phase, Point, PowercutNode, REBOOT_UPDATE_POINTS, REBOOTLESS_POINTS,
    Stop,
};

/// Runs the stops on one node (`(point, phase, reboot update)` each, stopped `how`) and prints
/// what each did and the longest stop.
fn run(name: &str, stops: &[(Point, Phase, bool, Stop)]) -> Result<()> {
    let mut node = PowercutNode::start(name, powercut::seed(), stops.len())?;
    node.time_stops()?;
    for &(point, phase, reboot, how) in stops {
        node.update_with_stop(point, phase, reboot, how)?;
    }
    let longest = node.stop_times.iter().max().copied().unwrap_or_default();
    eprintln!(
        "stops: {} stops, the longest {longest:.2?}, all converged:\n  {}",
        node.stop_times.len(),
        node.log.join("\n  ")
    );
    node.finish()
}

/// The failpoints of a reboot update, before and after its reboot, each stopped `how`.
fn reboot_update(how: Stop) -> Vec<(Point, Phase, bool, Stop)> {
    let before = REBOOT_UPDATE_POINTS
        .iter()
        .map(|&p| (p, Phase::Update, true, how));
    let after = AFTER_REBOOT_POINTS
        .iter()
        .map(|&p| (p, Phase::AfterReboot, true, how));
    before.chain(after).collect()
}

#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh stop_short"]
fn stop_short() -> Result<()> {
    let stops = [
        (
            Point::plain("engine::os-rebased"),
            Phase::Update,
            true,
            Stop::Systemctl,
        ),
        (
            Point::plain("engine::reboot-requested"),
            Phase::Update,
            true,
            Stop::Reboot,
        ),
        (
            Point::plain("engine::post-actions"),
            Phase::Update,
            false,
            Stop::Reboot,
        ),
    ];
    run("stop-short", &stops)
}

#[test]
#[ignore = "boots a qemu VM for an hour: run by tests/vm/run.sh stop_full"]
fn stop_full_reboot_update_systemctl_stop() -> Result<()> {
    run("stop-reboot-update", &reboot_update(Stop::Systemctl))
}

#[test]
#[ignore = "boots a qemu VM for an hour: run by tests/vm/run.sh stop_full"]
fn stop_full_reboot_update_unasked_reboot() -> Result<()> {
    run("stop-reboot-update-reboot", &reboot_update(Stop::Reboot))
}

#[test]
#[ignore = "boots a qemu VM for half an hour: run by tests/vm/run.sh stop_full"]
fn stop_full_rebootless_update() -> Result<()> {
    let stops: Vec<_> = [Stop::Systemctl, Stop::Reboot]
        .into_iter()
        .flat_map(|how| {
            REBOOTLESS_POINTS
                .iter()
                .map(move |&p| (p, Phase::Update, false, how))
        })
        .collect();
    run("stop-rebootless", &stops)
}
