//! The work of each transaction, on a locked libostree sysroot (run on the transaction's own
//! thread, as rpm-ostreed runs it on a worker thread).
//!
//! New deployments follow rpm-ostree's upgrader: the base and kernel arguments come from the
//! "origin merge" deployment (the first deployment of the OS: the pending one when there is one),
//! /etc merges from libostree's merge deployment (the booted one), and the deployment is
//! *staged* when the sysroot is booted, otherwise written as the new default (pending). Kernel
//! arguments are always passed in full (`override_kernel_argv`), computed with libostree's own
//! `OstreeKernelArgs`, which also avoids the CLI's multi-`--karg-delete` bug.
//!
//! Packages are not installed: there are no RPMs here. Layering requests and base removals are
//! recorded in the new deployment's origin exactly as rpm-ostree records them, with
//! rpm-ostree's errors for requests that are already (or not) in place.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ostree::gio;

use super::admin;
use super::origin::{Base, Origin, image_candidates, image_digest, image_name};
use super::packages::apply_package_changes;
use super::snapshot::STAGED_LOCKED_PATH;

/// One transaction's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    KernelArgs(KargsOp),
    Deploy(DeployOp),
    Cleanup(CleanupOp),
    Finalize(FinalizeOp),
    Rollback(RollbackOp),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KargsOp {
    pub existing: String,
    pub added: Vec<String>,
    pub replaced: Vec<String>,
    pub removed: Vec<String>,
    pub append_if_missing: Vec<String>,
    pub delete_if_present: Vec<String>,
    pub final_kargs: Option<String>,
    pub lock_finalization: bool,
    pub reboot: bool,
}

/// `Rebase` and `UpdateDeployment`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeployOp {
    pub set_refspec: Option<String>,
    pub set_revision: Option<String>,
    pub install: Vec<String>,
    pub uninstall: Vec<String>,
    pub override_remove: Vec<String>,
    pub override_reset: Vec<String>,
    pub no_pull_base: bool,
    pub no_layering: bool,
    pub no_overrides: bool,
    pub idempotent_layering: bool,
    pub dry_run: bool,
    pub lock_finalization: bool,
    pub reboot: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CleanupOp {
    pub base: bool,
    pub pending: bool,
    pub rollback: bool,
    pub repomd: bool,
}

/// `Rollback`: its only option is `reboot`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RollbackOp {
    pub reboot: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FinalizeOp {
    pub checksum: Option<String>,
    pub allow_missing_checksum: bool,
    pub allow_unlocked: bool,
}

/// Progress as the transaction reports it to its clients.
pub trait Progress {
    fn message(&self, text: &str);
    fn task_begin(&self, text: &str);
    fn task_end(&self, text: &str);
    fn percent(&self, text: &str, percentage: u32);
}

/// What a finished job asks of the daemon afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Outcome {
    pub reboot: bool,
}

/// The environment a job runs in.
pub struct Context<'a> {
    pub sysroot: &'a ostree::Sysroot,
    pub osname: &'a str,
    pub image_map: Option<&'a Path>,
    /// Which registries need credentials, and where they are.
    pub auth: &'a super::auth::RegistryAuth,
    pub progress: &'a dyn Progress,
    pub cancel: &'a Arc<AtomicBool>,
    /// A test knob: how long the job pretends to download before it does anything.
    pub delay: Duration,
}

const CANCELLED: &str = "Operation was cancelled";

impl Context<'_> {
    fn check_cancelled(&self) -> Result<(), String> {
        if self.cancel.load(Ordering::SeqCst) {
            Err(CANCELLED.into())
        } else {
            Ok(())
        }
    }

    /// Reports progress for the configured delay, in slices, watching for cancellation.
    fn simulated_download(&self) -> Result<(), String> {
        if self.delay.is_zero() {
            return self.check_cancelled();
        }
        const STEPS: u32 = 10;
        self.progress.percent("Receiving objects", 0);
        for step in 1..=STEPS {
            let slice = self.delay / STEPS;
            let mut waited = Duration::ZERO;
            while waited < slice {
                self.check_cancelled()?;
                let nap = (slice - waited).min(Duration::from_millis(20));
                std::thread::sleep(nap);
                waited += nap;
            }
            self.progress
                .percent("Receiving objects", step * 100 / STEPS);
        }
        self.check_cancelled()
    }
}

/// Runs `op`; the error string is what `Finished` carries.
pub fn run(ctx: &Context<'_>, op: &Operation) -> Result<Outcome, String> {
    ctx.check_cancelled()?;
    match op {
        Operation::KernelArgs(k) => kernel_args(ctx, k),
        Operation::Deploy(d) => deploy(ctx, d),
        Operation::Cleanup(c) => admin::cleanup(ctx, c).map(|()| Outcome::default()),
        Operation::Finalize(f) => admin::finalize(ctx, f),
        Operation::Rollback(r) => admin::rollback(ctx, r),
    }
}

fn origin_merge_deployment(ctx: &Context<'_>) -> Result<ostree::Deployment, String> {
    ctx.sysroot
        .deployments()
        .into_iter()
        .find(|d| d.osname() == ctx.osname)
        .ok_or_else(|| format!("No previous deployment for OS '{}'", ctx.osname))
}

fn kernel_args(ctx: &Context<'_>, op: &KargsOp) -> Result<Outcome, String> {
    let (kargs, changed) = if let Some(fin) = &op.final_kargs {
        (ostree::KernelArgs::from_string(fin), *fin != op.existing)
    } else {
        let kargs = ostree::KernelArgs::from_string(&op.existing);
        let existing: Vec<String> = ostree::KernelArgs::from_string(&op.existing)
            .to_strv()
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut changed = false;
        for arg in &op.removed {
            kargs.delete(arg).map_err(|e| e.to_string())?;
            changed = true;
        }
        for arg in &op.replaced {
            kargs.new_replace(arg).map_err(|e| e.to_string())?;
            changed = true;
        }
        if !op.added.is_empty() {
            let added: Vec<&str> = op.added.iter().map(String::as_str).collect();
            kargs.append_argv(&added);
            changed = true;
        }
        for arg in &op.append_if_missing {
            if !kargs.to_strv().iter().any(|k| k.as_str() == arg) {
                kargs.append(arg);
                changed = true;
            }
        }
        for arg in &op.delete_if_present {
            if existing.contains(arg) {
                kargs.delete(arg).map_err(|e| e.to_string())?;
                changed = true;
            }
        }
        (kargs, changed)
    };
    if !changed {
        ctx.progress.message("No changes.");
        return Ok(Outcome::default());
    }
    ctx.simulated_download()?;
    let merge = origin_merge_deployment(ctx)?;
    let origin = merge
        .origin()
        .ok_or_else(|| format!("Deployment {} has no origin", merge.csum()))?;
    let argv: Vec<String> = kargs.to_strv().iter().map(|s| s.to_string()).collect();
    write_deployment(ctx, &merge.csum(), &origin, &argv, op.lock_finalization)?;
    Ok(Outcome { reboot: op.reboot })
}

fn deploy(ctx: &Context<'_>, op: &DeployOp) -> Result<Outcome, String> {
    let merge = origin_merge_deployment(ctx)?;
    let old = merge
        .origin()
        .ok_or_else(|| format!("Deployment {} has no origin", merge.csum()))?;
    let mut origin = Origin::from_keyfile(&old)?;
    let mut base = origin.base()?;
    let mut changed = false;
    let mut target: Option<String> = None;

    if let Some(refspec) = &op.set_refspec {
        let new = Base::classify(refspec);
        if new == base {
            return Err(format!("Old and new refs are equal: {refspec}"));
        }
        ctx.simulated_download()?;
        target = Some(resolve_base(ctx, &new)?);
        base = new;
        changed = true;
    }
    if let Some(rev) = &op.set_revision {
        let csum = resolve_rev(ctx.sysroot, rev)?;
        origin.set_override_commit(Some(&csum));
        target = Some(csum);
        changed = true;
    }

    let mut requested = origin.requested_packages();
    let mut removals = origin.override_removals();
    let before = (requested.clone(), removals.clone());
    apply_package_changes(op, &mut requested, &mut removals)?;
    changed |= before != (requested.clone(), removals.clone());

    let target = match target {
        Some(t) => t,
        None if op.no_pull_base => merge.csum().to_string(),
        None => {
            ctx.simulated_download()?;
            let pulled = resolve_base(ctx, &base)?;
            changed |= pulled != merge.csum().as_str();
            pulled
        }
    };
    if !changed {
        ctx.progress.message("No change.");
        return Ok(Outcome::default());
    }
    if op.dry_run {
        return Ok(Outcome::default());
    }
    origin.set(&base, &requested, &removals);
    let options = merge
        .bootconfig()
        .and_then(|b| b.get("options"))
        .map(|s| s.to_string())
        .unwrap_or_default();
    let argv: Vec<String> = ostree::KernelArgs::from_string(&options)
        .to_strv()
        .iter()
        .map(|s| s.to_string())
        .collect();
    write_deployment(ctx, &target, origin.keyfile(), &argv, op.lock_finalization)?;
    Ok(Outcome { reboot: op.reboot })
}

/// The commit a base points at now: an ostree ref resolved in the sysroot repo, or an image
/// through the image map (see the origin module).
fn resolve_base(ctx: &Context<'_>, base: &Base) -> Result<String, String> {
    match base {
        Base::Ostree(r) => resolve_rev(ctx.sysroot, r),
        Base::Container(r) => {
            let image = image_name(r);
            ctx.progress.message(&format!("Pulling manifest: {r}"));
            // An image in local container storage is read from there: no registry, no
            // credentials (what a disconnected node rebases from).
            if !super::origin::is_local_storage(r) {
                ctx.auth.check(image)?;
            }
            for candidate in image_candidates(r, ctx.image_map)? {
                if let Ok(csum) = resolve_rev(ctx.sysroot, &candidate) {
                    return Ok(csum);
                }
            }
            let hint = match image_digest(image) {
                Some(d) => format!(
                    "an --image-map entry or the ref {}{}",
                    super::origin::IMAGE_REF_PREFIX,
                    d.trim_start_matches("sha256:")
                ),
                None => "an --image-map entry".into(),
            };
            Err(format!(
                "Pulling container image {image}: manifest unknown (the rpm-ostree stand-in has no local commit for it: add {hint})"
            ))
        }
    }
}

fn resolve_rev(sysroot: &ostree::Sysroot, rev: &str) -> Result<String, String> {
    sysroot
        .repo()
        .resolve_rev(rev, false)
        .map_err(|e| e.to_string())?
        .map(|s| s.to_string())
        .ok_or_else(|| format!("Refspec '{rev}' not found"))
}

/// Deploys `revision` with `origin` and exactly `kargs`: staged when booted, else pending.
fn write_deployment(
    ctx: &Context<'_>,
    revision: &str,
    origin: &ostree::glib::KeyFile,
    kargs: &[String],
    lock: bool,
) -> Result<(), String> {
    ctx.check_cancelled()?;
    let sysroot = ctx.sysroot;
    let cfg_merge = sysroot
        .merge_deployment(Some(ctx.osname))
        .ok_or_else(|| format!("No previous deployment for OS '{}'", ctx.osname))?;
    let argv: Vec<&str> = kargs.iter().map(String::as_str).collect();
    let opts = ostree::SysrootDeployTreeOpts {
        locked: false,
        override_kernel_argv: Some(&argv),
        overlay_initrds: None,
    };
    let none = gio::Cancellable::NONE;
    if sysroot.booted_deployment().is_some() {
        // libostree 2022.7 has no "locked" staging option: its finalize-staged only looks for
        // this file, which rpm-ostree used to create itself. Set or clear it before staging,
        // so a shutdown in between never finalizes what should have been locked.
        let lock_file = Path::new(STAGED_LOCKED_PATH);
        if lock {
            std::fs::create_dir_all(lock_file.parent().expect("absolute path"))
                .and_then(|()| std::fs::write(lock_file, ""))
                .map_err(|e| format!("Writing {STAGED_LOCKED_PATH}: {e}"))?;
        } else if lock_file.exists() {
            std::fs::remove_file(lock_file)
                .map_err(|e| format!("Removing {STAGED_LOCKED_PATH}: {e}"))?;
        }
        ctx.progress.task_begin("Staging deployment");
        sysroot
            .stage_tree_with_options(
                Some(ctx.osname),
                revision,
                Some(origin),
                Some(&cfg_merge),
                &opts,
                none,
            )
            .map_err(|e| e.to_string())?;
        ctx.progress.task_end("done");
    } else {
        ctx.progress.task_begin("Writing deployment");
        let new = sysroot
            .deploy_tree_with_options(
                Some(ctx.osname),
                revision,
                Some(origin),
                Some(&cfg_merge),
                Some(&opts),
                none,
            )
            .map_err(|e| e.to_string())?;
        sysroot
            .simple_write_deployment(
                Some(ctx.osname),
                &new,
                Some(&cfg_merge),
                ostree::SysrootSimpleWriteDeploymentFlags::NO_CLEAN,
                none,
            )
            .map_err(|e| e.to_string())?;
        ctx.progress.task_end("done");
    }
    sysroot.cleanup(none).map_err(|e| e.to_string())
}
