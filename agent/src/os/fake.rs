//! [`FakeOsUpdater`]: an in-memory [`OsUpdater`] for unit tests of its callers.
//!
//! It behaves like the D-Bus client in front of rpm-ostree on a booted node: every change
//! stages a new deployment in front of the booted one (replacing an earlier staged one),
//! kernel arguments are computed with libostree's own `OstreeKernelArgs` as rpm-ostree computes
//! them, refusals carry rpm-ostree's messages, and [`FakeOsUpdater::reboot`] boots the staged
//! deployment (or drops it when its finalization is locked, as ostree does). It records every
//! call and can be told to fail the next call of a method.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::OsUpdater;
use super::error::OsError;
use super::types::{
    BootConfig, CleanupTarget, Deployment, KargsTarget, OsImage, OsStatus, TransactionOutcome,
};
use super::{KargsChange, PackageChange};

/// A call the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OsCall {
    Status,
    Kargs(KargsTarget),
    KernelArgs {
        existing: Option<String>,
        change: KargsChange,
    },
    Rebase(OsImage),
    UpdateDeployment(PackageChange),
    Cleanup(Vec<CleanupTarget>),
    FinalizeDeployment(String),
    Rollback,
    Resume,
}

#[derive(Default)]
struct State {
    deployments: Vec<Deployment>,
    calls: Vec<OsCall>,
    failures: HashMap<String, VecDeque<String>>,
    active: Option<Result<TransactionOutcome, String>>,
    lock_finalization: bool,
    reboots_requested: u32,
    /// rpm-ostree has queued a reboot: new transactions are refused.
    rebooting: bool,
}

/// An in-memory rpm-ostree on a booted node.
pub struct FakeOsUpdater {
    state: Mutex<State>,
}

impl FakeOsUpdater {
    /// A node booted into `image` (an osImageURL) with kernel arguments `kargs`.
    pub fn booted(osname: &str, image: &str, kargs: &str) -> Self {
        let checksum = checksum_of(image);
        let booted = Deployment {
            id: format!("{osname}-{checksum}.0"),
            osname: osname.into(),
            checksum,
            serial: 0,
            version: Some("1".into()),
            timestamp: Some(0),
            container_image_reference: Some(OsImage::Registry(image.into()).refspec()),
            booted: true,
            kargs: Some(kargs.into()),
            ..Default::default()
        };
        FakeOsUpdater {
            state: Mutex::new(State {
                deployments: vec![booted],
                ..Default::default()
            }),
        }
    }

    /// Stage with `lock-finalization`, like a client configured for it.
    pub fn with_lock_finalization(self, lock: bool) -> Self {
        self.lock().lock_finalization = lock;
        self
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<OsCall> {
        self.lock().calls.clone()
    }

    /// The deployments now.
    pub fn deployments(&self) -> OsStatus {
        OsStatus {
            deployments: self.lock().deployments.clone(),
        }
    }

    /// Makes the next call of `method` (`KernelArgs`, `Rebase`, `UpdateDeployment`,
    /// `Cleanup`, `FinalizeDeployment`, `Status`, `Kargs`, `Resume`) fail as a failed
    /// transaction with `message`.
    pub fn fail_next(&self, method: &str, message: &str) {
        self.lock()
            .failures
            .entry(method.to_string())
            .or_default()
            .push_back(message.to_string());
    }

    /// rpm-ostree queues a reboot (another client's `--reboot`): from now on every new
    /// transaction is refused, as rpm-ostreed refuses them ("Reboot initiated, cannot start new
    /// transaction").
    pub fn queue_reboot(&self) {
        self.lock().rebooting = true;
    }

    /// A transaction left running by an earlier client, for [`OsUpdater::resume`] to find
    /// once (its result, or its failure message).
    pub fn set_active_transaction(&self, result: Result<TransactionOutcome, String>) {
        self.lock().active = Some(result);
    }

    /// How many reboots rpm-ostree was asked for (by `FinalizeDeployment`).
    pub fn reboots_requested(&self) -> u32 {
        self.lock().reboots_requested
    }

    /// Test setup: the node boots `image` now, as after an earlier rebase and reboot (no call
    /// is recorded).
    pub fn boot_image(&self, image: &str) {
        let mut s = self.lock();
        for d in s.deployments.iter_mut().filter(|d| d.booted) {
            d.checksum = checksum_of(image);
            d.id = format!("{}-{}.{}", d.osname, d.checksum, d.serial);
            d.container_image_reference = Some(OsImage::Registry(image.into()).refspec());
        }
    }

    /// Reboots: a staged deployment is finalized and booted, unless its finalization is
    /// locked, in which case ostree discards it; a default deployment that is not the booted
    /// one (after a rollback) boots; a reboot rpm-ostree had queued is over. Returns whether a
    /// new deployment booted.
    pub fn reboot(&self) -> bool {
        let mut s = self.lock();
        // a new boot, a new rpm-ostreed
        s.rebooting = false;
        let Some(first) = s.deployments.first().cloned() else {
            return false;
        };
        if !first.staged {
            if first.booted {
                return false;
            }
            s.deployments.iter_mut().for_each(|d| d.booted = false);
            s.deployments[0].booted = true;
            return true;
        }
        s.deployments.remove(0);
        if first.finalization_locked {
            return false;
        }
        let old = s.deployments.iter().position(|d| d.booted);
        s.deployments.iter_mut().for_each(|d| d.booted = false);
        let mut new = first;
        new.staged = false;
        new.booted = true;
        // The new deployment and the one it replaced (the rollback) remain.
        let rollback = old.map(|i| s.deployments[i].clone());
        s.deployments = std::iter::once(new).chain(rollback).collect();
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake state lock")
    }

    fn enter(
        &self,
        method: &str,
        call: OsCall,
    ) -> Result<std::sync::MutexGuard<'_, State>, OsError> {
        let mut s = self.lock();
        s.calls.push(call);
        let transaction = !matches!(method, "Status" | "Kargs" | "Resume");
        if s.rebooting && transaction {
            return Err(OsError::Call {
                method: method.to_string(),
                name: Some("org.projectatomic.rpmostreed.Error.Failed".to_string()),
                message: super::error::REBOOT_INITIATED.to_string(),
            });
        }
        if let Some(msg) = s.failures.get_mut(method).and_then(VecDeque::pop_front) {
            return Err(OsError::Transaction {
                method: method.to_string(),
                message: msg,
            });
        }
        Ok(s)
    }
}

impl State {
    fn booted(&self) -> &Deployment {
        self.deployments
            .iter()
            .find(|d| d.booted)
            .expect("the fake always has a booted deployment")
    }

    /// The first deployment: the staged one if any, else the booted one.
    fn default_deployment(&self) -> &Deployment {
        &self.deployments[0]
    }

    fn stage(&mut self, mut new: Deployment) {
        if self.deployments.first().is_some_and(|d| d.staged) {
            self.deployments.remove(0);
        }
        new.serial = self
            .deployments
            .iter()
            .filter(|d| d.checksum == new.checksum)
            .count() as i32;
        new.id = format!("{}-{}.{}", new.osname, new.checksum, new.serial);
        new.staged = true;
        new.booted = false;
        new.pinned = false;
        new.finalization_locked = self.lock_finalization;
        self.deployments.insert(0, new);
    }
}

fn outcome(method: &str, messages: &[&str]) -> TransactionOutcome {
    TransactionOutcome {
        method: method.into(),
        title: method.into(),
        messages: messages.iter().map(|s| s.to_string()).collect(),
        started_here: true,
    }
}

fn failed(method: &str, message: String) -> OsError {
    OsError::Transaction {
        method: method.into(),
        message,
    }
}

fn checksum_of(image: &str) -> String {
    hex::encode(Sha256::digest(image.as_bytes()))
}

#[async_trait]
impl OsUpdater for FakeOsUpdater {
    async fn status(&self) -> Result<OsStatus, OsError> {
        let s = self.enter("Status", OsCall::Status)?;
        Ok(OsStatus {
            deployments: s.deployments.clone(),
        })
    }

    async fn kargs(&self, target: KargsTarget) -> Result<BootConfig, OsError> {
        let s = self.enter("Kargs", OsCall::Kargs(target))?;
        let d = match target {
            KargsTarget::Pending => Some(s.default_deployment()),
            KargsTarget::Booted => Some(s.booted()),
            KargsTarget::Index(i) => s.deployments.get(i as usize),
        }
        .ok_or_else(|| OsError::Call {
            method: "GetDeploymentBootConfig".into(),
            name: None,
            message: format!(
                "Out of range deployment index {target:?}, expected < {}",
                s.deployments.len()
            ),
        })?;
        Ok(BootConfig {
            options: d.kargs.clone().unwrap_or_default(),
            staged: d.staged,
        })
    }

    async fn kernel_args(
        &self,
        existing: Option<&str>,
        change: &KargsChange,
    ) -> Result<TransactionOutcome, OsError> {
        let call = OsCall::KernelArgs {
            existing: existing.map(str::to_string),
            change: change.clone(),
        };
        let mut s = self.enter("KernelArgs", call)?;
        if change.is_empty() {
            return Ok(TransactionOutcome::nothing_to_do(
                "KernelArgs",
                "no kernel argument changes",
            ));
        }
        let base = s.default_deployment().clone();
        let current = base.kargs.clone().unwrap_or_default();
        if let Some(e) = existing
            && e != current
        {
            return Err(OsError::KargsConflict {
                expected: e.into(),
                found: current,
            });
        }
        let (new, changed) = change
            .apply_to(&current)
            .map_err(|m| failed("KernelArgs", m))?;
        if !changed {
            return Ok(outcome("KernelArgs", &["No changes."]));
        }
        s.stage(Deployment {
            kargs: Some(new),
            ..base
        });
        Ok(outcome("KernelArgs", &[]))
    }

    async fn rebase(&self, image: &OsImage) -> Result<TransactionOutcome, OsError> {
        let mut s = self.enter("Rebase", OsCall::Rebase(image.clone()))?;
        let base = s.default_deployment().clone();
        if base.image_url().as_deref() == Some(image.image()) {
            return Ok(TransactionOutcome::nothing_to_do(
                "Rebase",
                "already on this image",
            ));
        }
        s.stage(Deployment {
            checksum: checksum_of(image.image()),
            container_image_reference: Some(image.refspec()),
            origin: None,
            custom_origin: None,
            ..base
        });
        Ok(outcome("Rebase", &[]))
    }

    async fn update_deployment(
        &self,
        change: &PackageChange,
    ) -> Result<TransactionOutcome, OsError> {
        const M: &str = "UpdateDeployment";
        let mut s = self.enter(M, OsCall::UpdateDeployment(change.clone()))?;
        if change.is_empty() {
            return Ok(TransactionOutcome::nothing_to_do(M, "no package changes"));
        }
        let base = s.default_deployment().clone();
        let mut requested: BTreeSet<String> = base.requested_packages.iter().cloned().collect();
        let mut removals: BTreeSet<String> = base.requested_base_removals.iter().cloned().collect();
        for p in &change.uninstall {
            if !requested.remove(p) {
                return Err(failed(
                    M,
                    format!("Package/capability '{p}' is not currently requested"),
                ));
            }
        }
        for p in &change.install {
            if !requested.insert(p.clone()) {
                return Err(failed(
                    M,
                    format!("Package/capability '{p}' is already requested"),
                ));
            }
        }
        for p in &change.override_reset {
            if !removals.remove(p) {
                return Err(failed(M, format!("No overrides for package '{p}'")));
            }
        }
        for p in &change.override_remove {
            if !removals.insert(p.clone()) {
                return Err(failed(
                    M,
                    format!("Override already exists for package '{p}'"),
                ));
            }
        }
        s.stage(Deployment {
            requested_packages: requested.into_iter().collect(),
            requested_base_removals: removals.into_iter().collect(),
            ..base
        });
        Ok(outcome(M, &[]))
    }

    async fn cleanup(&self, targets: &[CleanupTarget]) -> Result<TransactionOutcome, OsError> {
        let mut s = self.enter("Cleanup", OsCall::Cleanup(targets.to_vec()))?;
        if targets.is_empty() {
            return Ok(TransactionOutcome::nothing_to_do(
                "Cleanup",
                "nothing to clean",
            ));
        }
        let booted = s.deployments.iter().position(|d| d.booted).unwrap_or(0);
        let before = s.deployments.len();
        let keep: Vec<Deployment> = s
            .deployments
            .iter()
            .enumerate()
            .filter(|(i, d)| {
                d.pinned
                    || *i == booted
                    || (*i < booted && !targets.contains(&CleanupTarget::Pending))
                    || (*i > booted && !targets.contains(&CleanupTarget::Rollback))
            })
            .map(|(_, d)| d.clone())
            .collect();
        s.deployments = keep;
        if s.deployments.len() == before
            && targets
                .iter()
                .any(|t| matches!(t, CleanupTarget::Pending | CleanupTarget::Rollback))
        {
            return Ok(outcome("Cleanup", &["Deployments unchanged."]));
        }
        Ok(outcome("Cleanup", &[]))
    }

    async fn finalize_deployment(&self, checksum: &str) -> Result<TransactionOutcome, OsError> {
        const M: &str = "FinalizeDeployment";
        let mut s = self.enter(M, OsCall::FinalizeDeployment(checksum.into()))?;
        let staged = s.default_deployment().clone();
        if !staged.staged {
            return Err(failed(M, "No pending staged deployment found".into()));
        }
        if staged.checksum != checksum {
            return Err(failed(
                M,
                format!(
                    "Expected staged base checksum {checksum}, but found {}",
                    staged.checksum
                ),
            ));
        }
        if !staged.finalization_locked {
            return Err(failed(M, "Staged deployment already unlocked".into()));
        }
        s.deployments[0].finalization_locked = false;
        s.reboots_requested += 1;
        Ok(outcome(
            M,
            &[&format!("Finalized deployment; rebooting into {checksum}")],
        ))
    }

    async fn rollback(&self) -> Result<TransactionOutcome, OsError> {
        const M: &str = "Rollback";
        let mut s = self.enter(M, OsCall::Rollback)?;
        if s.deployments.first().is_some_and(|d| d.staged) {
            s.deployments.remove(0);
        }
        let booted = s.deployments.iter().position(|d| d.booted).unwrap_or(0);
        let target = if booted > 0 {
            // A pending deployment in front of the booted one: the booted one goes back on top.
            booted
        } else if s.deployments.len() > 1 {
            1
        } else {
            return Err(failed(M, "No rollback deployment found".into()));
        };
        let d = s.deployments.remove(target);
        s.deployments.insert(0, d);
        Ok(outcome(M, &[]))
    }

    async fn resume(&self) -> Result<Option<TransactionOutcome>, OsError> {
        let mut s = self.enter("Resume", OsCall::Resume)?;
        match s.active.take() {
            None => Ok(None),
            Some(Ok(o)) => Ok(Some(o)),
            Some(Err(m)) => Err(failed("transaction", m)),
        }
    }
}

#[cfg(test)]
#[path = "fake_tests.rs"]
mod tests;
