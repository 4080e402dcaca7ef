//! SIGTERM at the agent's failpoints instead of a power cut: the agent is held at a failpoint
//! (`return(hold)`, which goes on once the agent is asked to stop), then stopped by
//! `systemctl stop` or by a reboot it did not ask for. The unit must stop within its
//! `TimeoutStopSec` with systemd's result `success` (not `timeout`), and the node must converge
//! once the agent runs again.
//!
//! The stop is timed inside the guest by a drop-in ([`PowercutNode::time_stops`]): `ExecStop=`
//! runs just before systemd sends SIGTERM, `ExecStopPost=` once the agent is gone.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::{PowercutNode, REACH};
use crate::powercut::guest::{self, HOLD_KARG};
use crate::powercut::{Phase, Point};

/// How the held agent is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// `systemctl stop`, then `systemctl start` in the same boot.
    Systemctl,
    /// `systemctl reboot`: a reboot the agent did not ask for; the next boot starts it.
    Reboot,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stop::Systemctl => "systemctl stop",
            Stop::Reboot => "a reboot it did not ask for",
        })
    }
}

/// Where the drop-in appends the stop's times (persistent: read after a reboot too).
const STOP_TIMES: &str = "/var/lib/mco-vm-stop-times";
const STOP_DROPIN: &str = "/etc/systemd/system/mco-agent.service.d/95-stop-times.conf";

/// The unit's stop timeout, from `units/mco-agent.service` (`TimeoutStopSec=N` or `Ns`).
pub fn unit_stop_timeout() -> Result<Duration> {
    let unit = concat!(env!("CARGO_MANIFEST_DIR"), "/../../units/mco-agent.service");
    let text = std::fs::read_to_string(unit).with_context(|| format!("reading {unit}"))?;
    let value = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("TimeoutStopSec="))
        .with_context(|| format!("no TimeoutStopSec= in {unit}"))?;
    let secs: u64 = value
        .trim_end_matches('s')
        .parse()
        .with_context(|| format!("TimeoutStopSec={value} in {unit}: expected seconds"))?;
    Ok(Duration::from_secs(secs))
}

impl PowercutNode {
    /// Times every stop of the agent's unit from now on (a drop-in in `/etc`, kept across
    /// reboots and OS updates).
    pub fn time_stops(&mut self) -> Result<()> {
        self.vm
            .run(&format!(
                "mkdir -p $(dirname {STOP_DROPIN}) && cat > {STOP_DROPIN} <<'EOF'\n\
                 [Service]\n\
                 ExecStop=+/bin/sh -c 'echo began $$(date +%%s.%%N) >> {STOP_TIMES}'\n\
                 ExecStopPost=+/bin/sh -c 'echo ended $$(date +%%s.%%N) $$SERVICE_RESULT >> {STOP_TIMES}'\n\
                 EOF\n\
                 systemctl daemon-reload"
            ))
            .context("installing the stop-timing drop-in")?;
        Ok(())
    }

    /// One update, its agent held at `point` (in `phase`) and stopped as `how` says; then the
    /// agent runs again and the node must converge.
    pub fn update_with_stop(
        &mut self,
        point: Point,
        phase: Phase,
        reboot: bool,
        how: Stop,
    ) -> Result<()> {
        let started = Instant::now();
        let (from, to) = self.next(reboot)?;
        let n = self.log.len() + 1;
        let kind = if reboot { "reboot" } else { "rebootless" };
        let when = if phase == Phase::AfterReboot {
            " after the reboot"
        } else {
            ""
        };
        let what = format!(
            "update {n} ({} -> {}), SIGTERM by {how} held at {point}{when} ({kind} update)",
            from.name(),
            to.name()
        );
        self.pace();
        self.say(&what);
        let result = self.stop_and_recover(point, phase, how, to);
        let line = match &result {
            Ok(line) => format!("{what}: {line}, {:.0?}", started.elapsed()),
            Err(e) => format!("{what}: FAILED: {e:#}"),
        };
        self.say(&line);
        self.log.push(line);
        result.map(|_| self.current = to).context(what)
    }

    fn stop_and_recover(
        &mut self,
        point: Point,
        phase: Phase,
        how: Stop,
        to: super::Version,
    ) -> Result<String> {
        match phase {
            Phase::Update => {
                guest::set_failpoints(&mut self.vm, Some(&point.hold_spec()))?;
                guest::restart_agent(&mut self.vm)?;
                self.clear_stop_times()?;
                self.cluster.set_desired(&to.name())?;
            }
            Phase::AfterReboot => {
                self.cluster.set_desired(&to.name())?;
                self.vm.next_boot_kargs(&[HOLD_KARG]);
                self.vm.wait_for_reboot(self.budget(REACH))?;
                guest::set_failpoints(&mut self.vm, Some(&point.hold_spec()))?;
                self.clear_stop_times()?;
                guest::release_agent(&mut self.vm)?;
            }
            Phase::Rollback => bail!("no stops are planned in a rollback"),
            Phase::LeavingImageMode => bail!("no stops are planned while leaving image mode"),
        }
        // Nothing runs in the guest from here to the stop: at `engine::reboot-requested` the
        // reboot is already under way.
        self.wait_at(point)?;
        // Held after it asked for its reboot, the agent is stopped by that reboot itself.
        let own_reboot = point.name == "engine::reboot-requested";
        let mut held = false;
        if own_reboot {
            self.vm.wait_for_reboot(self.budget(REACH))?;
        } else {
            match how {
                Stop::Systemctl => {
                    self.vm.run("systemctl stop mco-agent.service")?;
                    guest::set_failpoints(&mut self.vm, None)?;
                }
                // The boot after it holds the agent until the stop's time is read: an update
                // still owed its reboot would otherwise reboot the guest again, at once, while
                // the harness is still finishing that boot (it did at `engine::recorded`).
                Stop::Reboot => {
                    self.vm.next_boot_kargs(&[HOLD_KARG]);
                    self.vm.reboot()?;
                    held = true;
                }
            }
        }
        let took = self.stop_time()?;
        self.stop_times.push(took);
        if held {
            guest::release_agent(&mut self.vm)?;
        }
        if how == Stop::Systemctl && !own_reboot {
            self.vm.run(&format!(
                "{} && systemctl start --no-block mco-agent.service",
                guest::RESET_START_LIMIT
            ))?;
        }
        let reboots = self.wait_converged(to)?;
        self.check_converged(to)?;
        let by = if own_reboot {
            " (by the reboot it asked for)"
        } else {
            ""
        };
        Ok(format!(
            "stopped in {took:.2?}{by}; converged after {reboots} reboot(s)"
        ))
    }

    /// Forgets the stops timed so far (the agent's restart for this update among them): the
    /// next one timed is the stop under test.
    fn clear_stop_times(&mut self) -> Result<()> {
        self.vm
            .run(&format!("rm -f {STOP_TIMES}"))
            .context("clearing the stop times")?;
        Ok(())
    }

    /// The last stop's time, from SIGTERM to the agent gone, checked: systemd's result is
    /// `success` and the stop took less than the unit's `TimeoutStopSec`.
    fn stop_time(&mut self) -> Result<Duration> {
        let times = self
            .vm
            .run(&format!("cat {STOP_TIMES} 2>/dev/null || true"))?;
        let began = times
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("began "))
            .with_context(|| format!("no stop of mco-agent.service was timed: {times:?}"))?;
        let ended = times
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("ended "))
            .with_context(|| format!("the stop of mco-agent.service did not end: {times:?}"))?;
        let (ended, result) = ended.split_once(' ').unwrap_or((ended, ""));
        let secs = |t: &str| -> Result<f64> {
            t.trim()
                .parse()
                .with_context(|| format!("a time {t:?} in {times:?}"))
        };
        let took = Duration::from_secs_f64((secs(ended)? - secs(began)?).max(0.0));
        ensure!(
            result.trim() == "success",
            "the stop of mco-agent.service ended with result {result:?} after {took:.2?}"
        );
        let bound = unit_stop_timeout()?;
        ensure!(
            took < bound,
            "the stop took {took:.2?}, beyond the unit's TimeoutStopSec ({bound:?})"
        );
        Ok(took)
    }
}
