//! `Cleanup`, `FinalizeDeployment` and `Rollback`.

use std::path::PathBuf;

use ostree::gio;

use super::ops::{CleanupOp, Context, FinalizeOp, Outcome, RollbackOp};
use super::snapshot::STAGED_LOCKED_PATH;

pub(super) fn cleanup(ctx: &Context<'_>, op: &CleanupOp) -> Result<(), String> {
    let sysroot = ctx.sysroot;
    let none = gio::Cancellable::NONE;
    let mut base = op.base;
    if op.pending || op.rollback {
        let all = sysroot.deployments();
        // rpm-ostree anchors "pending" and "rollback" at the booted deployment. A sysroot that
        // is not booted has none; anchor at libostree's merge deployment instead (the first of
        // the OS), so that "pending" never sweeps away every deployment.
        let anchor = sysroot
            .booted_deployment()
            .or_else(|| sysroot.merge_deployment(Some(ctx.osname)));
        let mut kept = Vec::new();
        let mut past_anchor = false;
        for d in &all {
            if anchor.as_ref().is_some_and(|a| a.equal(d)) {
                past_anchor = true;
                kept.push(d.clone());
                continue;
            }
            if d.osname() != ctx.osname || d.is_pinned() {
                kept.push(d.clone());
                continue;
            }
            if (!past_anchor && op.pending) || (past_anchor && op.rollback) {
                continue;
            }
            kept.push(d.clone());
        }
        if kept.len() == all.len() {
            ctx.progress.message("Deployments unchanged.");
        } else {
            let opts = ostree::SysrootWriteDeploymentsOpts {
                do_postclean: false,
            };
            sysroot
                .write_deployments_with_options(&kept, &opts, none)
                .map_err(|e| e.to_string())?;
            base = true;
        }
    }
    if base {
        sysroot.cleanup(none).map_err(|e| e.to_string())?;
    }
    // "repomd": the stand-in keeps no rpm-md cache, so there is nothing to remove.
    Ok(())
}

pub(super) fn finalize(ctx: &Context<'_>, op: &FinalizeOp) -> Result<Outcome, String> {
    let deployments = ctx.sysroot.deployments();
    let default = deployments
        .first()
        .ok_or_else(|| "No deployments found".to_string())?;
    if !default.is_staged() {
        return Err("No pending staged deployment found".into());
    }
    if default.osname() != ctx.osname {
        return Err(format!(
            "Staged deployment is not for osname '{}'",
            ctx.osname
        ));
    }
    // rpm-ostree compares the *base* checksum: the commit under client-side layering, else the
    // deployment's own commit (also for a container image: its commit, not its digest). The
    // stand-in records package layering in the origin only, so the commit is always the base.
    let checksum = default.csum().to_string();
    match &op.checksum {
        None if !op.allow_missing_checksum => return Err("Missing expected checksum".into()),
        Some(want) if *want != checksum => {
            return Err(format!(
                "Expected staged base checksum {want}, but found {checksum}"
            ));
        }
        _ => {}
    }
    let lock = PathBuf::from(STAGED_LOCKED_PATH);
    if lock.exists() {
        std::fs::remove_file(&lock)
            .map_err(|e| format!("Failed to unlock finalization of staged deployment: {e}"))?;
    } else if !op.allow_unlocked {
        return Err("Staged deployment already unlocked".into());
    }
    ctx.progress
        .message(&format!("Finalized deployment; rebooting into {checksum}"));
    Ok(Outcome { reboot: true })
}

/// rpm-ostree's rollback: the deployment after the anchor (the booted one; on a sysroot that is
/// not booted, libostree's merge deployment, as for `Cleanup`) becomes the first; with none, but
/// a pending one in front of the anchor, the anchor goes back on top. A staged deployment is
/// left out of the new list, which makes libostree drop it, as rpm-ostree does.
pub(super) fn rollback(ctx: &Context<'_>, op: &RollbackOp) -> Result<Outcome, String> {
    let sysroot = ctx.sysroot;
    let all: Vec<_> = sysroot
        .deployments()
        .into_iter()
        .filter(|d| !d.is_staged())
        .collect();
    let anchor = sysroot
        .booted_deployment()
        .or_else(|| sysroot.merge_deployment(Some(ctx.osname)))
        .ok_or_else(|| "No booted deployment".to_string())?;
    let at = all
        .iter()
        .position(|d| d.equal(&anchor))
        .ok_or_else(|| "The booted deployment is not in the list".to_string())?;
    let same_os = |d: &&ostree::Deployment| d.osname() == ctx.osname;
    let pending = all[..at].iter().find(same_os).is_some();
    let target = match all[at + 1..].iter().find(same_os) {
        Some(d) => d.clone(),
        None if pending => anchor.clone(),
        None => return Err("No rollback deployment found".into()),
    };
    let mut new = vec![target.clone()];
    new.extend(all.iter().filter(|d| !d.equal(&target)).cloned());
    let opts = ostree::SysrootWriteDeploymentsOpts {
        do_postclean: false,
    };
    sysroot
        .write_deployments_with_options(&new, &opts, gio::Cancellable::NONE)
        .map_err(|e| e.to_string())?;
    ctx.progress.message(&format!(
        "Moving '{}.{}' to be first deployment",
        target.csum(),
        target.deployserial()
    ));
    Ok(Outcome { reboot: op.reboot })
}
