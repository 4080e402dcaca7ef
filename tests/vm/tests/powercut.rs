//! Power cuts during updates (see `mco_vm_tests::powercut` and tests/vm/README.md): the guest's
//! power is cut at the agent's failpoints and at seeded random moments of reboot and rebootless
//! updates, and after every cut the node must come back whole and converge.
//!
//! `powercut_short` runs in the default suite (tests/vm/run.sh, tests/run.sh); the full sequence,
//! every failpoint and random moments (`powercut_full_*`, three VMs, two at a time), runs with
//! `tests/vm/run.sh powercut_full`. `MCO_POWERCUT_SEED=N` replays a run's cut plan;
//! `MCO_POWERCUT_RANDOM=N` sets the number of random cuts (default 8).

use anyhow::Result;
use mco_vm_tests::powercut::{self, Cut, Phase, Point, PowercutNode, Rng};

/// Runs `cuts` on one node and prints what each did.
fn run(node: &mut PowercutNode, cuts: &[Cut]) -> Result<()> {
    for cut in cuts {
        node.update_with_cut(*cut)?;
    }
    eprintln!(
        "power cuts: {} cuts in {} updates, all converged:\n  {}",
        node.cuts,
        node.log.len(),
        node.log.join("\n  ")
    );
    Ok(())
}

/// The default suite's share: a cut right after an update to side b was recorded (its backup
/// of the vendor file's original taken, nothing written yet), one right after the reboot into
/// the update was asked for (before ostree finalized it), and one at a random moment of a
/// rebootless update. The first two are the cuts that found the agent's two power-loss bugs.
#[test]
#[ignore = "boots a qemu VM: run by tests/vm/run.sh"]
fn powercut_short() -> Result<()> {
    let seed = powercut::seed();
    let mut rng = Rng::new(seed ^ 0x5eed);
    let update = |point| Cut::Failpoint {
        point,
        phase: Phase::Update,
        reboot: true,
    };
    // From side a: a -> b, then b -> a.
    let cuts = [
        update(Point::plain("engine::recorded")),
        update(Point::plain("engine::reboot-requested")),
        powercut::random_rebootless_cut(&mut rng),
    ];
    let mut node = PowercutNode::start("powercut-short", seed, cuts.len() + 1)?;
    node.calibrate(false)?;
    run(&mut node, &cuts)?;
    node.finish()
}

/// Every failpoint of a reboot update before its reboot, each paused at and cut.
#[test]
#[ignore = "boots a qemu VM for half an hour: run by tests/vm/run.sh powercut_full"]
fn powercut_full_failpoints_before_the_reboot() -> Result<()> {
    let seed = powercut::seed();
    let cuts = powercut::before_reboot_cuts();
    let mut node = PowercutNode::start("powercut-before-reboot", seed, cuts.len())?;
    run(&mut node, &cuts)?;
    node.finish()
}

/// The other failpoints: after the reboot, of a rebootless update, and of a rollback (two
/// cuts: the writes, then the rollback).
#[test]
#[ignore = "boots a qemu VM for a quarter of an hour: run by tests/vm/run.sh powercut_full"]
fn powercut_full_failpoints_after_the_reboot_rebootless_and_rollback() -> Result<()> {
    let seed = powercut::seed();
    let cuts = powercut::other_failpoint_cuts();
    let mut node = PowercutNode::start("powercut-other-points", seed, cuts.len() + 2)?;
    run(&mut node, &cuts)?;
    node.finish()
}

/// Cuts at seeded random moments of reboot and rebootless updates.
#[test]
#[ignore = "boots qemu VMs for half an hour: run by tests/vm/run.sh powercut_full"]
fn powercut_full_random_moments() -> Result<()> {
    let seed = powercut::seed();
    let count = std::env::var("MCO_POWERCUT_RANDOM")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let mut rng = Rng::new(seed ^ 0x5eed);
    let cuts = powercut::random_cuts(&mut rng, count);
    let mut node = PowercutNode::start("powercut-random", seed, cuts.len() + 2)?;
    node.calibrate(true)?;
    run(&mut node, &cuts)?;
    node.finish()
}
