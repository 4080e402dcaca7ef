//! The node of the power-cut scenarios, and one update with its power cut, the recovery and the
//! checks.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use super::checks::{self, AfterCut};
use super::configs::{Side, Version};
use super::guest::{self, HOLD_KARG, PAUSED_MARKER, STATUS_FILE};
use super::{Cut, Phase, Point, Rng};
use crate::cluster::GuestCluster;
use crate::console;
use crate::vm::{Disk, Vm};

mod image_mode;
mod stop;
pub use stop::Stop;

/// How long a power-cut VM may live: this much, plus [`PER_UPDATE`] per update (times the
/// node's [`slowdown`](PowercutNode::slowdown), as every budget here).
const VM_BASE_TIME: Duration = Duration::from_secs(600);
const PER_UPDATE: Duration = Duration::from_secs(300);
/// How long an update may take to converge after a cut (two boots and a staging, under TCG).
const CONVERGE: Duration = Duration::from_secs(420);
/// How long the agent may take to reach a failpoint.
const REACH: Duration = Duration::from_secs(240);
/// The boot the budgets above hold for: qemu's start to the system up, under TCG on the 2-core
/// host (36 s measured at load 10; the budgets held in the runs at load 5 to 8). A node whose
/// boots take longer (the host loaded by other builds and VMs) gets budgets stretched by as much
/// ([`PowercutNode::slowdown`]).
const REFERENCE_BOOT: Duration = Duration::from_secs(60);
/// The most the budgets are stretched: beyond that the host is too loaded for these scenarios
/// to say anything, and nextest's limit for them (`.config/nextest.toml`) would cut them.
const MAX_SLOWDOWN: f64 = 3.0;
/// The longest pause between reaching a failpoint and the cut: beyond ext4's 5 s commit
/// interval, so that some cuts come after the file system committed its journal on its own.
const MAX_DELAY_MS: u64 = 6000;
/// What the agent logs when it rolled an update back.
const ROLLED_BACK: &str = "rolled back to the current config";

/// When things happened in the uncut updates, counted from the new desired config: the random
/// cuts fall within these windows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calibration {
    /// Rebootless update: the agent at work (the Node `Working`), and Done.
    pub rebootless: (Duration, Duration),
    /// Reboot update: the agent at work, the start of the boot after its reboot, and Done.
    pub reboot: Option<(Duration, Duration, Duration)>,
}

/// The slowest of `boots` (each qemu's start to the system up) against `REFERENCE_BOOT`,
/// within 1 and `MAX_SLOWDOWN`.
fn slowdown(boots: impl Iterator<Item = Duration>) -> f64 {
    let slowest = boots.max().unwrap_or_default();
    (slowest.as_secs_f64() / REFERENCE_BOOT.as_secs_f64()).clamp(1.0, MAX_SLOWDOWN)
}

/// A guest node on its way through the configs, with the record of its cuts.
pub struct PowercutNode {
    pub vm: Vm,
    cluster: GuestCluster,
    /// `/etc/shadow` before any config (its `stat` line, then the file).
    shadow: String,
    current: Version,
    rng: Rng,
    seed: u64,
    calibration: Option<Calibration>,
    /// Power cuts made so far.
    pub cuts: u32,
    /// One line per update.
    pub log: Vec<String>,
    /// How long each stop of the agent took ([`Stop`]).
    pub stop_times: Vec<Duration>,
    /// The VM's wall-clock limit at a slowdown of 1.
    life: Duration,
}

impl PowercutNode {
    /// Boots a guest for `updates` updates, installs the agent (with its failpoints), the
    /// rpm-ostree stand-in and the kubelet's kubeconfig, prepares it (`guest::prepare`) and
    /// brings it to the first config (a first application, and a reboot for its kernel argument).
    pub fn start(name: &str, seed: u64, updates: usize) -> Result<PowercutNode> {
        let cluster = GuestCluster::start()?;
        let first = Version {
            side: Side::A,
            n: 0,
        };
        cluster.add_config(&first.name(), first.spec())?;
        let life = VM_BASE_TIME + PER_UPDATE * updates as u32;
        let mut vm = Vm::builder(name, Disk::Ostree).timeout(life).boot()?;
        vm.install_agent_with_failpoints()?;
        vm.install_rpmostree_standin()?;
        cluster.install_kubeconfig(&mut vm)?;
        let shadow = guest::prepare(&mut vm)?;
        vm.start_agent_unit()?;
        cluster.set_desired(&first.name())?;
        let mut node = PowercutNode {
            vm,
            cluster,
            shadow,
            current: first,
            rng: Rng::new(seed),
            seed,
            calibration: None,
            cuts: 0,
            log: Vec::new(),
            stop_times: Vec::new(),
            life,
        };
        node.say(&format!("seed {seed} (replay: MCO_POWERCUT_SEED={seed})"));
        node.pace();
        node.wait_converged(first)
            .context("bringing the node to its first config")?;
        node.check_converged(first)?;
        Ok(node)
    }

    /// Updates without a cut, timed: the windows of the random cuts. A rebootless one, then,
    /// with `reboot`, a reboot update (random cuts of reboot updates need it).
    pub fn calibrate(&mut self, reboot: bool) -> Result<Calibration> {
        let mut c = Calibration::default();
        let kinds: &[bool] = if reboot { &[false, true] } else { &[false] };
        for &reboot in kinds {
            self.pace();
            let (from, to) = self.next(reboot)?;
            let boots = self.vm.boots().len();
            let started = Instant::now();
            self.cluster.set_desired(&to.name())?;
            let working = self.wait_working(&to)?.duration_since(started);
            self.wait_converged(to)?;
            self.check_converged(to)?;
            let done = started.elapsed();
            if reboot {
                let after = self
                    .vm
                    .boots()
                    .get(boots)
                    .context("no reboot in a reboot update")?;
                c.reboot = Some((working, after.started.duration_since(started), done));
            } else {
                c.rebootless = (working, done);
            }
            self.log.push(format!(
                "{} -> {}: no cut, {done:.0?}",
                from.name(),
                to.name()
            ));
            self.current = to;
        }
        self.say(&format!("calibrated {c:?}"));
        self.calibration = Some(c);
        Ok(c)
    }

    /// How much slower than `REFERENCE_BOOT` this node's slowest boot so far came up (at
    /// least 1, at most `MAX_SLOWDOWN`): TCG's pace on this host now. Every budget is
    /// stretched by it, so that a scenario fails for what the agent did, not for the load of
    /// other work on the host.
    pub fn slowdown(&self) -> f64 {
        slowdown(self.vm.boots().iter().filter_map(|b| b.up))
    }

    /// `base` stretched by the node's [`slowdown`](Self::slowdown).
    fn budget(&self, base: Duration) -> Duration {
        base.mul_f64(self.slowdown())
    }

    /// Says the slowdown, and lets the VM live its stretched limit: called at each update.
    fn pace(&mut self) {
        let slowdown = self.slowdown();
        let life = self.life.mul_f64(slowdown);
        self.vm.extend_life(life);
        let up = self.vm.current_boot().up.unwrap_or_default();
        self.say(&format!(
            "pace: this boot up in {up:.0?}, slowdown {slowdown:.2} (budgets: converge {:.0?}, \
             reach {:.0?}, VM {life:.0?})",
            self.budget(CONVERGE),
            self.budget(REACH)
        ));
    }

    /// When the agent began the update to `to` (the Node `Working`, polled on the host), or
    /// now if it is already Done on `to`.
    fn wait_working(&self, to: &Version) -> Result<Instant> {
        let reach = self.budget(REACH);
        let deadline = Instant::now() + reach;
        loop {
            let state = self.cluster.annotation("state");
            let done_on_to = state.as_deref() == Some("Done")
                && self.cluster.annotation("currentConfig").as_deref() == Some(&to.name());
            if state.as_deref() == Some("Working") || done_on_to {
                return Ok(Instant::now());
            }
            ensure!(
                Instant::now() < deadline,
                "the agent did not begin the update to {} within {reach:.0?}",
                to.name()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The config after the current one, added to the cluster.
    fn next(&mut self, reboot: bool) -> Result<(Version, Version)> {
        let (from, to) = (self.current, self.current.next(reboot));
        self.cluster.add_config(&to.name(), to.spec())?;
        Ok((from, to))
    }

    /// One update with its power cut, then the recovery, checked.
    pub fn update_with_cut(&mut self, cut: Cut) -> Result<()> {
        let started = Instant::now();
        // Leaving image mode stays on side a: its base image is side a's, the built image is
        // side b's commit.
        let leaves_image_mode = matches!(
            cut,
            Cut::Failpoint {
                phase: Phase::LeavingImageMode,
                ..
            }
        );
        let (from, to) = self.next(cut.reboot() && !leaves_image_mode)?;
        let n = self.log.len() + 1;
        let what = format!("update {n} ({} -> {}), {cut}", from.name(), to.name());
        self.pace();
        self.say(&what);
        let result = self.cut_and_recover(cut, from, to);
        let line = match &result {
            Ok(line) => format!("{what}: {line}, {:.0?}", started.elapsed()),
            Err(e) => format!("{what}: FAILED: {e:#}"),
        };
        self.say(&line);
        self.log.push(line);
        result.map(|_| self.current = to).with_context(|| {
            format!(
                "{what} (seed {}: MCO_POWERCUT_SEED={} replays this run)",
                self.seed, self.seed
            )
        })
    }

    fn cut_and_recover(&mut self, cut: Cut, from: Version, to: Version) -> Result<String> {
        let mut said = Vec::new();
        match cut {
            Cut::Failpoint { point, phase, .. } => {
                if phase == Phase::Rollback {
                    let first = Point::plain("engine::apply-midway");
                    said.push(self.pause_in_update(first, to)?);
                    let after = self.power_on_held(from, to)?;
                    ensure!(
                        after.step.as_deref() == Some("Writing"),
                        "cut at {first}: the record is at {:?}, not Writing",
                        after.step
                    );
                    guest::set_failpoints(&mut self.vm, Some(&point.spec()))?;
                    guest::release_agent(&mut self.vm)?;
                    said.push(self.cut_when_paused(point)?);
                } else if phase == Phase::LeavingImageMode {
                    said.push(self.enter_image_mode()?);
                    said.push(self.pause_leaving_image_mode(point, to)?);
                } else if phase == Phase::AfterReboot {
                    self.cluster.set_desired(&to.name())?;
                    self.vm.next_boot_kargs(&[HOLD_KARG]);
                    self.vm.wait_for_reboot(self.budget(REACH))?;
                    guest::set_failpoints(&mut self.vm, Some(&point.spec()))?;
                    guest::release_agent(&mut self.vm)?;
                    said.push(self.cut_when_paused(point)?);
                } else {
                    said.push(self.pause_in_update(point, to)?);
                }
            }
            Cut::Random { reboot, at } => {
                let c = self
                    .calibration
                    .context("random cuts need calibrate() first")?;
                // Within the agent's work: a rebootless update's; half of a reboot update's
                // cuts from its start to the boot into it (writes, staging, the shutdown and
                // ostree's finalization), half in that boot (start-up, verification, commit).
                let between = |from: Duration, to: Duration, f: f64| {
                    from + to.saturating_sub(from).mul_f64(f)
                };
                let window = match (reboot, c.reboot) {
                    (false, _) => between(c.rebootless.0, c.rebootless.1, at),
                    (true, None) => bail!("random cuts of reboot updates need calibrate(true)"),
                    (true, Some((working, boot, _))) if at < 0.5 => {
                        between(working, boot, at * 2.0)
                    }
                    (true, Some((_, boot, done))) => between(boot, done, at * 2.0 - 1.0),
                };
                self.cluster.set_desired(&to.name())?;
                let followed = self.vm.cut_power_at(Instant::now() + window)?;
                self.cuts += 1;
                said.push(format!("cut at {window:.1?} ({followed} reboot(s) before)"));
            }
        }
        let boots_before = self.vm.boots().len();
        let after = self.power_on_held(from, to)?;
        guest::release_agent(&mut self.vm)?;
        let reboots = self.wait_converged(to)?;
        self.check_converged(to)?;
        // The OS needed at most the one reboot it had not had yet; an update leaving image mode
        // whose files are not yet written again after its first reboot owes its second.
        let needed = u32::from(after.booted != to.side)
            + u32::from(after.step.as_deref() == Some("RewritingFiles"));
        ensure!(
            reboots == needed,
            "{reboots} reboot(s) after the cut, expected {needed} (booted side {:?}, record at {:?})",
            after.booted,
            after.step
        );
        // A rollback only where the record said the writes were under way.
        let logs: String = self.vm.boots()[boots_before..]
            .iter()
            .map(|b| std::fs::read_to_string(&b.console_log).unwrap_or_default())
            .collect();
        let rolled_back = logs.contains(ROLLED_BACK);
        let expected = matches!(after.step.as_deref(), Some("Writing" | "RollingBack"));
        ensure!(
            rolled_back == expected,
            "rolled back: {rolled_back}, expected {expected} (the record was at {:?})",
            after.step
        );
        let record = match &after.step {
            Some(step) => format!("record at {step}"),
            None => "no record".to_string(),
        };
        let rollback = if rolled_back {
            ", rolled back first"
        } else {
            ""
        };
        said.push(format!(
            "{record}, side {} booted; converged after {reboots} reboot(s){rollback}",
            after.booted.letter()
        ));
        Ok(said.join("; "))
    }

    /// Arms `point` in the running agent, points the node at `to`, and cuts when it pauses.
    fn pause_in_update(&mut self, point: Point, to: Version) -> Result<String> {
        guest::set_failpoints(&mut self.vm, Some(&point.spec()))?;
        guest::restart_agent(&mut self.vm)?;
        self.cluster.set_desired(&to.name())?;
        self.cut_when_paused(point)
    }

    /// Waits for the agent to pause at `point`, waits a seeded delay, cuts the power.
    fn cut_when_paused(&mut self, point: Point) -> Result<String> {
        self.wait_at(point)?;
        let delay = Duration::from_millis(self.rng.below(MAX_DELAY_MS + 1));
        std::thread::sleep(delay);
        self.vm.cut_power()?;
        self.cuts += 1;
        Ok(format!("cut {delay:.1?} after pausing at {point}"))
    }

    /// Waits for the agent to pause (or hold) at `point`.
    fn wait_at(&mut self, point: Point) -> Result<()> {
        let marker = self.vm.share().join(PAUSED_MARKER);
        let reach = self.budget(REACH);
        let deadline = Instant::now() + reach;
        let paused = loop {
            if let Ok(text) = std::fs::read_to_string(&marker)
                && text.ends_with('\n')
            {
                break text.trim().to_string();
            }
            ensure!(
                self.vm.running(),
                "the boot ended before the agent reached {point}"
            );
            if Instant::now() >= deadline {
                let journal = self
                    .vm
                    .run("journalctl -b -u mco-agent.service -o cat | tail -30")
                    .unwrap_or_default();
                bail!("the agent did not reach {point} within {reach:.0?}:\n{journal}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        ensure!(paused == point.name, "paused at {paused}, not at {point}");
        Ok(())
    }

    /// Boots after a cut with the agent held, and checks what the cut left.
    fn power_on_held(&mut self, from: Version, to: Version) -> Result<AfterCut> {
        self.vm.next_boot_kargs(&[HOLD_KARG]);
        self.vm.power_on()?;
        let active = self.vm.exec("systemctl is-active mco-agent.service")?;
        ensure!(
            active.stdout.trim() != "active",
            "the agent started in a held boot"
        );
        let state = guest::read_state(&mut self.vm)?;
        checks::after_cut(&state, &self.shadow, from, to).map_err(anyhow::Error::msg)
    }

    /// Waits until the node is Done on `to` in this boot: the Node's annotations and the
    /// agent's status file of this boot (no update pending) agree. Returns the reboots followed.
    fn wait_converged(&mut self, to: Version) -> Result<u32> {
        let name = to.name();
        let cluster = &self.cluster;
        let within = self.budget(CONVERGE);
        let waited = self.vm.wait_following_reboots(within, |vm| {
            if cluster.annotation("state").as_deref() != Some("Done")
                || cluster.annotation("currentConfig").as_deref() != Some(name.as_str())
            {
                return Ok(false);
            }
            let status = vm.run(&format!("cat {STATUS_FILE} 2>/dev/null || true"))?;
            let status: Value = serde_json::from_str(&status).unwrap_or_default();
            Ok(status["state"] == "Done"
                && status["current"] == name.as_str()
                && status["pending_step"].is_null())
        });
        waited.map_err(|e| {
            let annotations = ["state", "reason", "currentConfig", "desiredConfig"]
                .map(|k| format!("{k}={:?}", self.cluster.annotation(k)))
                .join(" ");
            let journal = self
                .vm
                .run("journalctl -b -u mco-agent.service -o cat | tail -40")
                .unwrap_or_else(|_| {
                    let log = &self.vm.current_boot().console_log;
                    console::tail(log, 40)
                });
            e.context(format!("the agent's log in this boot:\n{journal}"))
                .context(format!("not converged on {name}: {annotations}"))
        })
    }

    fn check_converged(&mut self, to: Version) -> Result<()> {
        let state = guest::read_state(&mut self.vm)?;
        checks::converged(&state, &self.shadow, to).map_err(anyhow::Error::msg)
    }

    /// Prints `line`, and appends it to `powercut.log` beside the VM's console logs.
    fn say(&self, line: &str) {
        eprintln!("power cuts: {line}");
        let log = self.vm.log_dir().join("powercut.log");
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
        if let Err(e) = appended {
            eprintln!("power cuts: cannot append to {}: {e}", log.display());
        }
    }

    /// Powers the node off.
    pub fn finish(self) -> Result<()> {
        self.vm.poweroff()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_stretch_with_the_slowest_boot_within_bounds() {
        let secs = |s: &[u64]| {
            s.iter()
                .map(|&s| Duration::from_secs(s))
                .collect::<Vec<_>>()
        };
        let cases: &[(&[u64], f64)] = &[
            (&[], 1.0),
            (&[36, 47], 1.0),
            (&[36, 90, 47], 1.5),
            (&[150], 2.5),
            (&[600], MAX_SLOWDOWN),
        ];
        for (boots, expected) in cases {
            let got = slowdown(secs(boots).into_iter());
            assert!(
                (got - expected).abs() < 1e-9,
                "{boots:?}: {got}, expected {expected}"
            );
        }
    }
}
