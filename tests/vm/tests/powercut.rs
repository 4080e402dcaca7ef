//! Power cuts during updates (see `mco_vm_tests::powercut` and tests/vm/README.md): the guest's
//! power is cut at the agent's failpoints and at seeded random moments of reboot and rebootless
//! updates, and after every cut the node must come back whole and converge.
//!
//! `powercut_short` runs in the default suite (tests/vm/run.sh, tests/run.sh); the full sequence,
//! every failpoint, random moments and the regression seed (`powercut_full_*`, six VMs, two at
//! a time), runs with
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

/// The failpoints after the reboot and of a rollback (two cuts: the writes, then the
/// rollback).
#[test]
#[ignore = "boots a qemu VM for a quarter of an hour: run by tests/vm/run.sh powercut_full"]
fn powercut_full_failpoints_after_the_reboot_and_rollback() -> Result<()> {
    let seed = powercut::seed();
    let cuts = powercut::after_reboot_and_rollback_cuts();
    let mut node = PowercutNode::start("powercut-after-reboot", seed, cuts.len())?;
    run(&mut node, &cuts)?;
    node.finish()
}

/// The failpoints of a rebootless update.
#[test]
#[ignore = "boots a qemu VM for ten minutes: run by tests/vm/run.sh powercut_full"]
fn powercut_full_failpoints_rebootless() -> Result<()> {
    let seed = powercut::seed();
    let cuts = powercut::rebootless_cuts();
    let mut node = PowercutNode::start("powercut-rebootless", seed, cuts.len())?;
    run(&mut node, &cuts)?;
    node.finish()
}

/// The failpoint of leaving image mode: the node follows a built image, then the pool leaves
/// image mode; the cut comes in the boot after the first reboot, once the files are written
/// again and before the second reboot is asked for.
#[test]
#[ignore = "boots a qemu VM for a quarter of an hour: run by tests/vm/run.sh powercut_full"]
fn powercut_full_leaving_image_mode() -> Result<()> {
    let seed = powercut::seed();
    let cuts = powercut::leaving_image_mode_cuts();
    let mut node = PowercutNode::start("powercut-leaving-image-mode", seed, cuts.len() + 1)?;
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
    random_moments("powercut-random", seed, count)
}

/// The seed that found the agent holding a reboot for its whole stop timeout (issue 33): its
/// fifth cut, 0.165 of the way through a reboot update from side b, left the record at the OS
/// step; the agent resumed, rpm-ostree rebooted, and the agent did not stop on SIGTERM. Its
/// first five cuts, replayed.
#[test]
#[ignore = "boots a qemu VM for a quarter of an hour: run by tests/vm/run.sh powercut_full"]
fn powercut_full_regression_seed_1795845591317438529() -> Result<()> {
    random_moments(
        "powercut-seed-1795845591317438529",
        1_795_845_591_317_438_529,
        5,
    )
}

/// Calibrates on a node seeded `seed`, then makes the seed's first `count` random cuts.
fn random_moments(name: &str, seed: u64, count: usize) -> Result<()> {
    let mut rng = Rng::new(seed ^ 0x5eed);
    let cuts = powercut::random_cuts(&mut rng, count);
    let mut node = PowercutNode::start(name, seed, cuts.len() + 2)?;
    node.calibrate(true)?;
    run(&mut node, &cuts)?;
    node.finish()
}
