//! Power cuts: the VM's power switched off with nothing flushed (qemu killed with SIGKILL: the
//! guest's RAM, its page cache and its unsubmitted disk writes are gone), switched on again, and
//! the guest's own reboots followed while the harness waits for something.
//!
//! What survives a cut is what the guest had handed to its virtual disk: the drive runs with
//! `cache=unsafe` (see `qemu.rs`), so every write the guest saw complete is in the host's page
//! cache, which outlives qemu; the guest's flushes are not needed for that and cost nothing.
//! The disk therefore behaves like one without a volatile write cache: the cut loses what the
//! guest kernel had not written yet, never a write the disk acknowledged.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::Vm;
use crate::console::BootEnd;

impl Vm {
    /// Kernel arguments added to the next boot only (after those of the builder), e.g. to keep a
    /// unit from starting in the boot after a power cut.
    pub fn next_boot_kargs(&mut self, kargs: &[&str]) {
        self.next_boot_kargs = kargs.iter().map(|k| k.to_string()).collect();
    }

    /// Whether qemu runs (a boot is under way, not ended nor cut).
    pub fn running(&self) -> bool {
        self.qemu.as_ref().is_some_and(|q| !q.exited())
    }

    /// Switches the power off now: qemu is killed (SIGKILL), the guest flushes nothing.
    pub fn cut_power(&mut self) -> Result<()> {
        self.agent = None;
        let mut qemu = self
            .qemu
            .take()
            .with_context(|| format!("{}: the VM is not running", self.name))?;
        qemu.kill();
        self.log(&format!("boot {}: power cut", self.boots.len()));
        Ok(())
    }

    /// Switches the power on after a cut and waits until the boot finished (the ostree disk boots
    /// whatever its boot entries say now).
    pub fn power_on(&mut self) -> Result<()> {
        ensure!(
            self.qemu.is_none(),
            "{}: power_on while the VM runs",
            self.name
        );
        self.start_boot().map_err(|e| self.with_console(e))
    }

    /// Cuts the power at `at`, following the guest's own reboots until then: the boot started for
    /// such a reboot is not waited for, so the cut may land anywhere in it (the boot loader, the
    /// kernel, systemd's start-up, a unit). Returns how many reboots were followed.
    pub fn cut_power_at(&mut self, at: Instant) -> Result<u32> {
        let mut reboots = 0;
        while Instant::now() < at {
            if self.qemu.as_ref().is_some_and(|q| q.exited()) {
                match self.wait_for_end(self.deadline)? {
                    BootEnd::Reboot => {
                        self.launch_boot()?;
                        reboots += 1;
                    }
                    end => bail!(
                        "{}: boot {} ended with {end:?} before the power cut",
                        self.name,
                        self.boots.len()
                    ),
                }
            }
            let left = at.saturating_duration_since(Instant::now());
            std::thread::sleep(left.min(Duration::from_millis(20)));
        }
        self.cut_power()?;
        Ok(reboots)
    }

    /// Waits until `done` says so, at most `within`, following the guest's own reboots (each new
    /// boot is waited for until it finished). `done` is asked about once a second; an error from
    /// it (e.g. a guest command cut short by a shutdown) counts as "not yet" until the time is
    /// up. Returns how many reboots were followed.
    pub fn wait_following_reboots(
        &mut self,
        within: Duration,
        mut done: impl FnMut(&mut Vm) -> Result<bool>,
    ) -> Result<u32> {
        let deadline = (Instant::now() + within).min(self.deadline);
        let mut reboots = 0;
        loop {
            if self.qemu.as_ref().is_none_or(|q| q.exited()) {
                match self.wait_for_end(deadline)? {
                    BootEnd::Reboot => {
                        reboots += 1;
                        self.start_boot().map_err(|e| self.with_console(e))?;
                    }
                    end => {
                        return Err(self.with_console(anyhow::anyhow!(
                            "{}: boot {} ended with {end:?} while waiting",
                            self.name,
                            self.boots.len()
                        )));
                    }
                }
            }
            let last_error = match done(self) {
                Ok(true) => return Ok(reboots),
                Ok(false) => None,
                Err(e) => Some(e),
            };
            if Instant::now() >= deadline {
                let why = last_error.map(|e| format!(": last error: {e:#}"));
                bail!(
                    "{}: not done within {within:?} ({reboots} reboot(s) followed){}",
                    self.name,
                    why.unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}
