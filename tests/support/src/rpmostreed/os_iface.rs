//! `org.projectatomic.rpmostree1.OS` at `/org/projectatomic/rpmostree1/<os>`: the methods the
//! agent uses, each returning a transaction address, and the deployment properties.
//!
//! Unknown options are ignored, as rpm-ostreed ignores them. Modifiers and options the stand-in
//! cannot model (local RPMs, replacements, modules, treefiles, live apply, download-only) are
//! refused with an error naming them rather than pretended.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use zbus::message::Header;
use zbus::zvariant::OwnedValue;

use super::daemon::{Shared, os_object_path};
use super::error::{DaemonError, VarDict, opt_bool, opt_str, opt_strv};
use super::ops::{CleanupOp, DeployOp, FinalizeOp, KargsOp, Operation, RollbackOp};
use super::snapshot::DeploymentSnapshot;
use super::txn::TxnRequest;

const SUPPORTED_MODIFIERS: &[&str] = &[
    "set-refspec",
    "set-revision",
    "install-packages",
    "uninstall-packages",
    "override-remove-packages",
    "override-reset-packages",
];
const REFUSED_OPTIONS: &[&str] = &["apply-live", "download-only"];

pub struct OsIface {
    shared: Arc<Shared>,
    osname: String,
}

impl OsIface {
    pub fn new(shared: Arc<Shared>, osname: String) -> Self {
        Self { shared, osname }
    }

    async fn deployment(
        &self,
        pick: impl Fn(&super::snapshot::SysrootSnapshot) -> Option<&DeploymentSnapshot>,
    ) -> zbus::fdo::Result<HashMap<String, OwnedValue>> {
        let s = self
            .shared
            .snapshot()
            .await
            .map_err(|e| zbus::fdo::Error::Failed(e.message))?;
        Ok(pick(&s).map(|d| d.to_dict()).unwrap_or_default())
    }

    async fn begin(
        &self,
        hdr: &Header<'_>,
        method: &'static str,
        fingerprint: String,
        title: String,
        op: Operation,
    ) -> Result<String, DaemonError> {
        self.shared.authorize(hdr, "OS", method).await?;
        let sender = hdr.sender().map(|s| s.to_string()).unwrap_or_default();
        self.shared
            .begin(TxnRequest {
                method,
                client_description: self.shared.client_description(&sender),
                sender,
                object_path: os_object_path(&self.osname),
                osname: self.osname.clone(),
                fingerprint: format!("{method}:{fingerprint}"),
                title,
                op,
            })
            .await
    }
}

/// A stable rendering of an options dictionary, for "same call" comparisons.
fn fingerprint_dict(d: &VarDict) -> String {
    let sorted: BTreeMap<_, _> = d.iter().map(|(k, v)| (k, format!("{v:?}"))).collect();
    format!("{sorted:?}")
}

#[zbus::interface(name = "org.projectatomic.rpmostree1.OS")]
impl OsIface {
    #[zbus(property)]
    async fn booted_deployment(&self) -> zbus::fdo::Result<HashMap<String, OwnedValue>> {
        let os = self.osname.clone();
        self.deployment(|s| s.booted_deployment().filter(|d| d.osname == os))
            .await
    }

    #[zbus(property)]
    async fn default_deployment(&self) -> zbus::fdo::Result<HashMap<String, OwnedValue>> {
        let os = self.osname.clone();
        self.deployment(|s| s.default_for(&os)).await
    }

    #[zbus(property)]
    async fn rollback_deployment(&self) -> zbus::fdo::Result<HashMap<String, OwnedValue>> {
        let os = self.osname.clone();
        self.deployment(|s| s.rollback_for(&os)).await
    }

    #[zbus(property)]
    fn name(&self) -> String {
        self.osname.clone()
    }

    /// No update checks here.
    #[zbus(property)]
    fn cached_update(&self) -> HashMap<String, OwnedValue> {
        HashMap::new()
    }

    #[zbus(property)]
    fn has_cached_update_rpm_diff(&self) -> bool {
        false
    }

    async fn kernel_args(
        &self,
        existing_kernel_arg_string: String,
        kernel_args_added: Vec<String>,
        kernel_args_replaced: Vec<String>,
        kernel_args_removed: Vec<String>,
        options: VarDict,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<String, DaemonError> {
        let op = KargsOp {
            existing: existing_kernel_arg_string.clone(),
            added: kernel_args_added.clone(),
            replaced: kernel_args_replaced.clone(),
            removed: kernel_args_removed.clone(),
            append_if_missing: opt_strv(&options, "append-if-missing")?,
            delete_if_present: opt_strv(&options, "delete-if-present")?,
            final_kargs: opt_str(&options, "final-kernel-args")?,
            lock_finalization: opt_bool(&options, "lock-finalization", false)?,
            reboot: opt_bool(&options, "reboot", false)?,
        };
        let title = opt_str(&options, "initiating-command-line")?.unwrap_or_else(|| "kargs".into());
        let fp = format!(
            "{existing_kernel_arg_string:?}{kernel_args_added:?}{kernel_args_replaced:?}{kernel_args_removed:?}{}",
            fingerprint_dict(&options)
        );
        self.begin(&hdr, "KernelArgs", fp, title, Operation::KernelArgs(op))
            .await
    }

    /// Rebases to `refspec` (an ostree ref or an ostree container image reference). As in
    /// rpm-ostreed, `packages` is not used.
    async fn rebase(
        &self,
        options: VarDict,
        refspec: String,
        packages: Vec<String>,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<String, DaemonError> {
        let op = DeployOp {
            set_refspec: Some(refspec.clone()),
            set_revision: opt_str(&options, "revision")?,
            reboot: opt_bool(&options, "reboot", false)?,
            ..Default::default()
        };
        let fp = format!("{}{refspec:?}{packages:?}", fingerprint_dict(&options));
        self.begin(
            &hdr,
            "Rebase",
            fp,
            "new-deployment".into(),
            Operation::Deploy(op),
        )
        .await
    }

    async fn update_deployment(
        &self,
        modifiers: VarDict,
        options: VarDict,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<String, DaemonError> {
        if let Some(m) = modifiers
            .keys()
            .find(|k| !SUPPORTED_MODIFIERS.contains(&k.as_str()))
        {
            return Err(DaemonError::failed(format!(
                "the rpm-ostree stand-in does not support the modifier \"{m}\""
            )));
        }
        for o in REFUSED_OPTIONS {
            if opt_bool(&options, o, false)? {
                return Err(DaemonError::failed(format!(
                    "the rpm-ostree stand-in does not support the option \"{o}\""
                )));
            }
        }
        let op = DeployOp {
            set_refspec: opt_str(&modifiers, "set-refspec")?,
            set_revision: opt_str(&modifiers, "set-revision")?,
            install: opt_strv(&modifiers, "install-packages")?,
            uninstall: opt_strv(&modifiers, "uninstall-packages")?,
            override_remove: opt_strv(&modifiers, "override-remove-packages")?,
            override_reset: opt_strv(&modifiers, "override-reset-packages")?,
            no_pull_base: opt_bool(&options, "no-pull-base", false)?
                || opt_bool(&options, "cache-only", false)?,
            no_layering: opt_bool(&options, "no-layering", false)?,
            no_overrides: opt_bool(&options, "no-overrides", false)?,
            idempotent_layering: opt_bool(&options, "idempotent-layering", false)?,
            dry_run: opt_bool(&options, "dry-run", false)?,
            lock_finalization: opt_bool(&options, "lock-finalization", false)?,
            reboot: opt_bool(&options, "reboot", false)?,
        };
        let fp = format!(
            "{}{}",
            fingerprint_dict(&modifiers),
            fingerprint_dict(&options)
        );
        self.begin(
            &hdr,
            "UpdateDeployment",
            fp,
            "new-deployment".into(),
            Operation::Deploy(op),
        )
        .await
    }

    /// `elements`: any of `base`, `pending-deploy`, `rollback-deploy`, `repomd`.
    async fn cleanup(
        &self,
        elements: Vec<String>,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<String, DaemonError> {
        let mut op = CleanupOp::default();
        for e in &elements {
            match e.as_str() {
                "base" => op.base = true,
                "pending-deploy" => op.pending = true,
                "rollback-deploy" => op.rollback = true,
                "repomd" => op.repomd = true,
                other => {
                    return Err(DaemonError::failed(format!(
                        "Invalid cleanup type: {other}"
                    )));
                }
            }
        }
        self.begin(
            &hdr,
            "Cleanup",
            format!("{elements:?}"),
            "cleanup".into(),
            Operation::Cleanup(op),
        )
        .await
    }

    async fn get_deployment_boot_config(
        &self,
        deployid: String,
        is_pending: bool,
    ) -> Result<HashMap<String, OwnedValue>, DaemonError> {
        self.shared
            .snapshot()
            .await?
            .boot_config(&self.osname, &deployid, is_pending)
    }

    /// Makes the rollback deployment the default (`reboot`: then reboots, through logind).
    async fn rollback(
        &self,
        options: VarDict,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<String, DaemonError> {
        let op = RollbackOp {
            reboot: opt_bool(&options, "reboot", false)?,
        };
        self.begin(
            &hdr,
            "Rollback",
            fingerprint_dict(&options),
            "rollback".into(),
            Operation::Rollback(op),
        )
        .await
    }

    /// Unlocks a staged deployment made with `lock-finalization` and reboots (through logind).
    async fn finalize_deployment(
        &self,
        options: VarDict,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<String, DaemonError> {
        let op = FinalizeOp {
            checksum: opt_str(&options, "checksum")?,
            allow_missing_checksum: opt_bool(&options, "allow-missing-checksum", false)?,
            allow_unlocked: opt_bool(&options, "allow-unlocked", false)?,
        };
        let title = opt_str(&options, "initiating-command-line")?
            .unwrap_or_else(|| "finalize-deployment".into());
        self.begin(
            &hdr,
            "FinalizeDeployment",
            fingerprint_dict(&options),
            title,
            Operation::Finalize(op),
        )
        .await
    }
}
