//! Power cuts during updates: a guest node in a cluster (the agent as its unit, the rpm-ostree
//! stand-in, the Kubernetes API test server on the host) moves between the configs of
//! [`configs`], and each update has its power cut ([`Cut`]): at one of the agent's failpoints,
//! which pauses there (`return(pause)`) until the harness cuts, or at a seeded random moment of
//! the update. After each cut the node boots with the agent held, the state the cut left is
//! checked from inside the guest ([`checks::after_cut`]), then the agent runs and the node must
//! converge on the new config ([`checks::converged`]) with no step repeated that runs once: at
//! most the one reboot the OS still needs, a rollback only where the record said the writes
//! were under way.
//!
//! The cut moments come from a seed ([`Rng`]): `MCO_POWERCUT_SEED` replays a run, else the seed
//! is the clock's; it is printed first, and with every failure.

pub mod checks;
pub mod configs;
pub mod guest;
mod node;

pub use node::{Calibration, PowercutNode, Stop};

/// A failpoint to pause at: its name, and for a point met on many paths, the path it acts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub name: &'static str,
    pub at: Option<&'static str>,
}

impl Point {
    pub const fn plain(name: &'static str) -> Point {
        Point { name, at: None }
    }

    pub const fn at(name: &'static str, path: &'static str) -> Point {
        Point {
            name,
            at: Some(path),
        }
    }

    /// The `FAILPOINTS` setting that pauses here.
    pub fn spec(&self) -> String {
        self.spec_with("pause")
    }

    /// The `FAILPOINTS` setting that holds here until the agent is asked to stop (SIGTERM).
    pub fn hold_spec(&self) -> String {
        self.spec_with("hold")
    }

    fn spec_with(&self, action: &str) -> String {
        match self.at {
            Some(path) => format!("{}=return({action}@{path})", self.name),
            None => format!("{}=return({action})", self.name),
        }
    }
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            Some(path) => write!(f, "{}@{path}", self.name),
            None => f.write_str(self.name),
        }
    }
}

/// When, in an update, the agent pauses for the cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// While the agent updates the node (before its reboot, or in a rebootless update).
    Update,
    /// In the boot after the agent's reboot (verification, commit).
    AfterReboot,
    /// While the agent rolls back the writes a first cut (at `engine::apply-midway`) interrupted:
    /// two cuts.
    Rollback,
    /// In an update that leaves image mode, in the boot after its first reboot (into the base
    /// image), where the files are written again before the second reboot: the node first
    /// follows a built image (`desiredImage`), then the pool leaves image mode.
    LeavingImageMode,
}

/// One update's power cut.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cut {
    /// At a failpoint; `reboot`: of a reboot update (else rebootless).
    Failpoint {
        point: Point,
        phase: Phase,
        reboot: bool,
    },
    /// At a random moment: `at` (0..1) of the way through the window [`Calibration`] gives the
    /// update.
    Random { reboot: bool, at: f64 },
}

impl Cut {
    pub fn reboot(&self) -> bool {
        match self {
            Cut::Failpoint { reboot, .. } | Cut::Random { reboot, .. } => *reboot,
        }
    }

    /// Power cuts this update takes.
    pub fn cuts(&self) -> u32 {
        match self {
            Cut::Failpoint {
                phase: Phase::Rollback,
                ..
            } => 2,
            _ => 1,
        }
    }
}

/// For the log: `pause at engine::recorded (reboot update)`, `random moment 0.420 (rebootless
/// update)`.
impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.reboot() {
            "reboot"
        } else {
            "rebootless"
        };
        match self {
            Cut::Failpoint { point, phase, .. } => {
                let when = match phase {
                    Phase::Update => "",
                    Phase::AfterReboot => " after the reboot",
                    Phase::Rollback => " in the rollback after a cut at engine::apply-midway",
                    Phase::LeavingImageMode => " after the first reboot of leaving image mode",
                };
                write!(f, "pause at {point}{when} ({kind} update)")
            }
            Cut::Random { at, .. } => write!(f, "random moment {at:.3} ({kind} update)"),
        }
    }
}

const RECORD: &str = "/etc/machine-config-daemon/mco-agent-update.json";

/// Every failpoint of a reboot update that an update meets before the reboot (the atomic
/// writes of the update record, of a file under `/etc` and of the file whose original is kept
/// included). Reboot updates alternate sides, from side a: the points at even places cut
/// updates to side b, which keep the vendor file's original first; those before the first
/// write are among them.
pub const REBOOT_UPDATE_POINTS: &[Point] = &[
    Point::plain("engine::recorded"),
    Point::at("engine::temp-written", RECORD),
    Point::plain("engine::drained"),
    Point::at("engine::temp-written", configs::COMMON_FILE),
    Point::plain("engine::writing"),
    Point::at("engine::temp-written", configs::VENDOR_FILE),
    Point::plain("engine::apply-midway"),
    Point::plain("engine::written"),
    Point::plain("engine::os-cleaned"),
    Point::plain("engine::os-rebased"),
    Point::plain("engine::os-kargs"),
    Point::plain("engine::os-done"),
    Point::plain("engine::reboot-recorded"),
    Point::plain("engine::reboot-requested"),
];

/// Failpoints of a reboot update in the boot after its reboot.
pub const AFTER_REBOOT_POINTS: &[Point] = &[
    Point::plain("engine::verifying"),
    Point::plain("engine::committed"),
];

/// Failpoints of a rebootless update (the pull secret, `/etc/shadow`, then the end).
pub const REBOOTLESS_POINTS: &[Point] = &[
    Point::at("engine::temp-written", configs::PULL_SECRET),
    Point::at("engine::temp-written", "/etc/shadow"),
    Point::plain("engine::post-actions"),
    Point::plain("engine::committed"),
];

/// Failpoints met only by an update that leaves image mode, between its two reboots.
pub const LEAVING_IMAGE_MODE_POINTS: &[Point] = &[Point::plain("engine::rewritten")];

/// Failpoints of a rollback.
pub const ROLLBACK_POINTS: &[Point] = &[
    Point::plain("engine::rolling-back"),
    Point::plain("engine::rolled-back-files"),
];

fn failpoint_cuts(points: &[Point], phase: Phase, reboot: bool) -> Vec<Cut> {
    points
        .iter()
        .map(|&point| Cut::Failpoint {
            point,
            phase,
            reboot,
        })
        .collect()
}

/// The failpoints of a reboot update before its reboot, one cut each.
pub fn before_reboot_cuts() -> Vec<Cut> {
    failpoint_cuts(REBOOT_UPDATE_POINTS, Phase::Update, true)
}

/// The failpoints after the reboot and during a rollback.
pub fn after_reboot_and_rollback_cuts() -> Vec<Cut> {
    let mut cuts = failpoint_cuts(AFTER_REBOOT_POINTS, Phase::AfterReboot, true);
    cuts.extend(failpoint_cuts(ROLLBACK_POINTS, Phase::Rollback, true));
    cuts
}

/// The failpoints of a rebootless update.
pub fn rebootless_cuts() -> Vec<Cut> {
    failpoint_cuts(REBOOTLESS_POINTS, Phase::Update, false)
}

/// The failpoints of leaving image mode.
pub fn leaving_image_mode_cuts() -> Vec<Cut> {
    failpoint_cuts(LEAVING_IMAGE_MODE_POINTS, Phase::LeavingImageMode, true)
}

/// Every failpoint cut.
pub fn every_failpoint() -> Vec<Cut> {
    let mut cuts = before_reboot_cuts();
    cuts.extend(after_reboot_and_rollback_cuts());
    cuts.extend(rebootless_cuts());
    cuts.extend(leaving_image_mode_cuts());
    cuts
}

/// `count` cuts at random moments: three in four of a reboot update.
pub fn random_cuts(rng: &mut Rng, count: usize) -> Vec<Cut> {
    (0..count)
        .map(|_| Cut::Random {
            reboot: rng.below(4) != 0,
            at: rng.fraction(),
        })
        .collect()
}

/// A cut at a random moment of a rebootless update.
pub fn random_rebootless_cut(rng: &mut Rng) -> Cut {
    Cut::Random {
        reboot: false,
        at: rng.fraction(),
    }
}

/// The run's seed: `MCO_POWERCUT_SEED`, else the clock.
pub fn seed() -> u64 {
    std::env::var("MCO_POWERCUT_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

/// SplitMix64: the same numbers for the same seed on every machine and every build.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `[0, 1)`.
    pub fn fraction(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_cuts() {
        let a = random_cuts(&mut Rng::new(42), 8);
        assert_eq!(a, random_cuts(&mut Rng::new(42), 8));
        assert_ne!(a, random_cuts(&mut Rng::new(43), 8));
        assert!(
            a.iter()
                .all(|c| matches!(c, Cut::Random { at, .. } if (0.0..1.0).contains(at)))
        );
        // SplitMix64's published first output for seed 0
        assert_eq!(Rng::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn every_failpoint_of_the_agent_is_cut_at() {
        let cuts = every_failpoint();
        let names: std::collections::BTreeSet<&str> = cuts
            .iter()
            .filter_map(|c| match c {
                Cut::Failpoint { point, .. } => Some(point.name),
                Cut::Random { .. } => None,
            })
            .collect();
        let all: std::collections::BTreeSet<&str> = mco_agent_failpoints()
            .iter()
            .copied()
            .filter(|p| !NOT_CUT_YET.contains(p))
            .collect();
        assert_eq!(names, all);
        assert_eq!(
            Point::at("engine::temp-written", "/etc/shadow").spec(),
            "engine::temp-written=return(pause@/etc/shadow)"
        );
        assert_eq!(cuts.iter().map(Cut::cuts).sum::<u32>(), 25);
        // From side a, the cuts before the first write go to side b (an original to keep).
        for (i, cut) in before_reboot_cuts().iter().enumerate() {
            if let Cut::Failpoint { point, .. } = cut
                && ["engine::recorded", "engine::drained", "engine::writing"].contains(&point.name)
            {
                assert_eq!(i % 2, 0, "{point} goes to side a");
            }
        }
    }

    /// The steps of rolling a bad boot back: killed at each by `agent/tests/crash_safety.rs`
    /// (`killed_at_every_step_of_a_boot_rollback_it_converges`); power cuts there need a
    /// scenario whose update fails its health checks, which the plan does not have yet.
    const NOT_CUT_YET: &[&str] = &[
        "engine::boot-failed",
        "engine::boot-os-rolled-back",
        "engine::boot-files-rolled-back",
        "engine::reboot-back-recorded",
        "engine::rolled-back-boot",
    ];

    fn mco_agent_failpoints() -> &'static [&'static str] {
        mco_agent::failpoints::POINTS
    }
}
