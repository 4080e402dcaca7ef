//! `once-from`: apply a config without a cluster, through the update engine, against the
//! config recorded in the root (`currentconfig`).
//!
//! On the running host (`--root /`, the default) everything goes through the real seams:
//! units through systemd, OS changes (image, kernel arguments, kernel type, extensions) through
//! rpm-ostree, the reboot through logind unless `--skip-reboot`. With another root, file work
//! goes under it with offline unit enablement, post-config actions are skipped (no live
//! systemd for it), OS changes still go to rpm-ostree on the system bus when it answers (and
//! are refused, changing nothing, when it does not, unless `--skip-os` leaves them out), and
//! the host is never rebooted. An update recorded by an earlier run (waiting for a reboot, or
//! interrupted) is finished first.
//!
//! A root with no recorded config gets its first application: what Ignition would do at first
//! boot, so directories and links are written too. The reconcile check then runs against an
//! empty config that already has the desired directories and links (the MCD's rules refuse
//! any change to them on a running node, and there is none to make on a fresh one); every other
//! rule applies (no users but core, no groups, disks, filesystems, RAID, appends, ...).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;

use crate::engine::live::{self, SeamOptions};
use crate::engine::{ActivePolicy, Engine, EngineOptions, FixedPolicy, NoCluster, UpdateReport};
use crate::hooks::HookOptions;
use crate::input::LoadedConfig;
use crate::input::policy::PolicyFile;
use crate::rootfs::Root;

/// How to run.
#[derive(Clone, Debug, Default)]
pub struct OnceFromOptions {
    /// Leave out OS changes instead of refusing the config when they cannot be made.
    pub skip_os: bool,
    /// Do not reboot even when the plan needs it.
    pub skip_reboot: bool,
    /// Stage OS changes unlocked (see `engine::live::SeamOptions::lock_finalization`).
    pub no_lock_finalization: bool,
    /// Node architecture for the reconcile check (`std::env::consts::ARCH` when empty).
    pub arch: String,
    /// Where the boot id is read (default: the kernel's).
    pub boot_id_file: Option<PathBuf>,
    /// Node disruption policies from a file (default: the default table).
    pub policy: Option<PolicyFile>,
    /// How the administrator's hooks run.
    pub hooks: HookOptions,
}

/// What `once-from` did.
#[derive(Debug)]
pub struct OnceFromReport {
    /// An update recorded earlier, finished (or found still waiting) first.
    pub resumed: Option<UpdateReport>,
    /// The update to the given config (absent when the resumed update was that one).
    pub update: Option<UpdateReport>,
    /// Why the node is not rebooted, if it is not.
    pub no_reboot: String,
}

/// Applies `desired` to the root at `root_path`.
pub async fn once_from(
    root_path: &Path,
    desired: &LoadedConfig,
    opts: &OnceFromOptions,
) -> Result<OnceFromReport> {
    let live = live::is_host_root(root_path);
    let root = crate::host::selinux::label_files(Root::open(root_path)?, live);
    let no_reboot = if opts.skip_reboot {
        Some("not rebooting (--skip-reboot)".to_string())
    } else if !live {
        Some("not rebooting: an alternate root is never rebooted".to_string())
    } else {
        None
    };
    let seams = live::connect(
        root_path,
        &SeamOptions {
            live,
            skip_os: opts.skip_os,
            no_reboot,
            lock_finalization: !opts.no_lock_finalization,
        },
    )
    .await?;
    let mut engine_opts = EngineOptions {
        skip_os: opts.skip_os,
        preflight: false,
        status_file: false,
        verify_after_reboot: live,
        field_prefix: desired.field_prefix,
        hooks: opts.hooks.clone(),
        ..EngineOptions::default()
    };
    if !opts.arch.is_empty() {
        engine_opts.arch = opts.arch.clone();
    }
    if let Some(f) = &opts.boot_id_file {
        engine_opts.boot_id_file = f.clone();
    }
    let policy = match &opts.policy {
        Some(file) => ActivePolicy::from_file(file),
        None => ActivePolicy::defaults(),
    };
    let engine = Engine::new(root, seams, engine_opts, Arc::new(NoCluster))?
        .with_policy_source(Arc::new(FixedPolicy(policy)));
    engine.remove_stale_temp_files();
    let resumed = engine.resume().await;
    let update = match &resumed {
        Some(r) if r.to == desired.machine_config.name() => None,
        _ => Some(engine.update(&desired.machine_config, false).await),
    };
    Ok(OnceFromReport {
        resumed,
        update,
        no_reboot: engine.seams().no_reboot.clone(),
    })
}
