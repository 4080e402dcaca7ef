//! The cached images `tests/vm/build-image.sh` produces, and where things live on the host.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, ensure};

/// `tests/vm/` in the source tree.
pub fn harness_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace root.
pub fn workspace_dir() -> PathBuf {
    harness_dir().join("../..")
}

/// `$MCO_VM_CACHE`, default `tests/vm/.cache`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("MCO_VM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| harness_dir().join(".cache"))
}

/// Paths of the boot artifacts.
#[derive(Debug, Clone)]
pub struct Images {
    /// ELF kernel, booted through PVH.
    pub vmlinux: PathBuf,
    /// busybox initramfs (also inside the ostree commits).
    pub initrd: PathBuf,
    /// Plain ext4 root disk.
    pub disk: PathBuf,
    /// ostree sysroot disk with commits `debian/mco/a` (deployed) and `debian/mco/b`.
    pub ostree: PathBuf,
}

impl Images {
    /// Builds what is missing or stale (a no-op in 0.02 s when current) once per process, then
    /// returns the paths. Concurrent callers are serialised by the script's lock.
    pub fn ensure() -> Result<&'static Images> {
        static IMAGES: OnceLock<Result<Images, String>> = OnceLock::new();
        IMAGES
            .get_or_init(|| Self::build().map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|e| anyhow!("VM images: {e}"))
    }

    /// The SELinux disk (`build-image.sh selinux`), built on first use only: most runs never
    /// boot it.
    pub fn selinux_disk() -> Result<&'static PathBuf> {
        static DISK: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        DISK.get_or_init(|| {
            let script = harness_dir().join("build-image.sh");
            let built = Command::new(&script)
                .arg("selinux")
                .status()
                .map_err(|e| format!("running {}: {e}", script.display()))?;
            if !built.success() {
                return Err(format!("{} selinux failed: {built}", script.display()));
            }
            let disk = cache_dir().join("selinux/selinux.raw");
            if disk.is_file() {
                Ok(disk)
            } else {
                Err(format!("{} is missing after the build", disk.display()))
            }
        })
        .as_ref()
        .map_err(|e| anyhow!("VM images: {e}"))
    }

    fn build() -> Result<Images> {
        let script = harness_dir().join("build-image.sh");
        let status = Command::new(&script)
            .args(["kernel", "initrd", "disk", "ostree"])
            .status()
            .with_context(|| format!("running {}", script.display()))?;
        ensure!(status.success(), "{} failed: {status}", script.display());
        let cache = cache_dir();
        let images = Images {
            vmlinux: cache.join("kernel/vmlinux"),
            initrd: cache.join("initrd/initrd.img"),
            disk: cache.join("disk/disk.raw"),
            ostree: cache.join("ostree/ostree.raw"),
        };
        for path in [
            &images.vmlinux,
            &images.initrd,
            &images.disk,
            &images.ostree,
        ] {
            ensure!(
                path.is_file(),
                "{} is missing after the build",
                path.display()
            );
        }
        Ok(images)
    }
}
