//! `mco-agent gather --output FILE [--force] [--root DIR] [--sysroot DIR]`: the node's
//! support bundle ([`crate::gather`]), written atomically.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::{Classify, Exit, exit};
use crate::engine::BOOT_ID_FILE;
use crate::gather::{self, HostSources, Request};
use crate::rootfs::{Owner, Root};

/// Arguments of `gather`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The tar.gz to write (refused when it exists, unless --force).
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Replace FILE when it exists.
    #[arg(long)]
    pub force: bool,
    /// Root directory of the node.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// The ostree sysroot the status reads the deployments from (default: the root).
    #[arg(long)]
    pub sysroot: Option<PathBuf>,
    /// Read the boot id from this file instead of the kernel's (tests).
    #[arg(long, hide = true)]
    pub boot_id_file: Option<PathBuf>,
}

/// Collects the bundle and writes it; exit 0 also when items could not be collected (the
/// manifest and the summary say which and why).
pub fn run(args: &Args) -> Result<ExitCode> {
    let (dir, name) = output_place(&args.output)?;
    if !args.force && std::fs::symlink_metadata(&args.output).is_ok() {
        return Err(exit::classified(
            Exit::InvalidInput,
            Some("choose another file, or add --force to replace it".into()),
            anyhow::anyhow!("--output {}: exists", args.output.display()),
        ));
    }
    let root = super::open_root(&args.root)?;
    let boot_id_file = args
        .boot_id_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(BOOT_ID_FILE));
    let sysroot = args.sysroot.clone().unwrap_or_else(|| args.root.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let bundle = runtime.block_on(async {
        let status = super::status::gather(&root, &sysroot, &boot_id_file).await;
        let request = Request {
            status: serde_json::to_value(&status).unwrap_or_default(),
            config_dirs: &super::config_file::CONFIG_DIRS,
            now_ms: crate::engine::record::now_ms(),
        };
        gather::collect(&root, request, &HostSources::new(&args.root)).await
    });
    let bytes = gather::tar_gz(&bundle).context("compressing the bundle")?;
    let out = Root::open(&dir).with_context(|| format!("opening {}", dir.display()))?;
    let owner = Owner {
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
    };
    // the name as a path inside the directory (a Root's paths are absolute)
    out.write_atomic(&Path::new("/").join(&name), &bytes, 0o600, owner)
        .with_context(|| format!("writing {}", args.output.display()))?;
    println!("wrote {} ({} bytes)", args.output.display(), bytes.len());
    for line in bundle.manifest.summary() {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The directory FILE goes in and its name: a directory that does not exist, or a FILE that
/// names a directory, is invalid input.
fn output_place(output: &Path) -> Result<(PathBuf, std::ffi::OsString)> {
    let name = output
        .file_name()
        .filter(|_| !output.as_os_str().to_string_lossy().ends_with('/'))
        .ok_or_else(|| anyhow::anyhow!("--output {}: not a file name", output.display()))
        .invalid_input()?;
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(exit::error(
            Exit::InvalidInput,
            format!(
                "--output {}: no such directory {}",
                output.display(),
                dir.display()
            ),
        ));
    }
    if output.is_dir() {
        return Err(exit::error(
            Exit::InvalidInput,
            format!("--output {}: is a directory", output.display()),
        ));
    }
    Ok((dir, name.to_os_string()))
}
