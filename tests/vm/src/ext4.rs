//! Reads a stopped VM's raw ext4 disk with `debugfs` (no mount, no root tricks): how the
//! harness finds the boot entries and the kernel after the guest rebooted.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

use crate::bls::{self, BootEntry};

/// Runs one debugfs request on `image` and returns its stdout. debugfs exits 0 even when the
/// request fails, so any stderr line besides its version banner is an error.
///
/// In catastrophic mode (`-c`: read-only, the allocation bitmaps not read): after a power cut
/// the image holds what the guest's disk held, its journal not replayed, as a boot loader reads
/// it; a bitmap the cut left with a stale checksum made debugfs refuse to open the file system
/// ("Block bitmap checksum does not match bitmap while reading allocation bitmaps"), though
/// reading files and directories needs no bitmap.
fn debugfs(image: &Path, request: &str) -> Result<Vec<u8>> {
    let out = Command::new("debugfs")
        .arg("-c")
        .arg("-R")
        .arg(request)
        .arg(image)
        .output()
        .context("running debugfs (package e2fsprogs)")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("debugfs "))
        .collect();
    ensure!(
        out.status.success() && errors.is_empty(),
        "debugfs -R '{request}' {}: {}",
        image.display(),
        errors.join("; ")
    );
    Ok(out.stdout)
}

/// Paths go into a debugfs request line: keep them to characters that need no quoting.
fn checked(path: &str) -> Result<&str> {
    ensure!(
        path.starts_with('/')
            && path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c)),
        "unsupported path for debugfs: {path:?}"
    );
    Ok(path)
}

/// The text of file `path` inside `image`.
pub fn read_file(image: &Path, path: &str) -> Result<String> {
    let bytes = debugfs(image, &format!("cat {}", checked(path)?))?;
    String::from_utf8(bytes).with_context(|| format!("{path} in {}: not UTF-8", image.display()))
}

/// Names of the regular files in directory `path` inside `image`.
pub fn list_files(image: &Path, path: &str) -> Result<Vec<String>> {
    let out = debugfs(image, &format!("ls -p {}", checked(path)?))?;
    Ok(parse_ls_p(&String::from_utf8_lossy(&out)))
}

/// `ls -p` prints `/inode/mode/uid/gid/name/size/` per entry; mode 100xxx is a regular file.
fn parse_ls_p(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.trim().split('/').collect();
            match fields.as_slice() {
                ["", _inode, mode, _uid, _gid, name, ..] if mode.starts_with("100") => {
                    Some((*name).to_string())
                }
                _ => None,
            }
        })
        .collect()
}

/// Copies file `path` inside `image` to `dest` on the host.
pub fn dump(image: &Path, path: &str, dest: &Path) -> Result<()> {
    let dest_str = dest.to_str().context("non-UTF-8 destination")?;
    debugfs(
        image,
        &format!("dump {} {}", checked(path)?, checked(dest_str)?),
    )?;
    let len = std::fs::metadata(dest)
        .with_context(|| format!("debugfs dump of {path} wrote nothing"))?
        .len();
    if len == 0 {
        bail!("{path} in {} is empty", image.display());
    }
    Ok(())
}

/// Every boot entry under `/boot/loader/entries` (through the `loader -> loader.N` link).
pub fn boot_entries(image: &Path) -> Result<Vec<BootEntry>> {
    let dir = "/boot/loader/entries";
    let mut entries = Vec::new();
    for name in list_files(image, dir)? {
        if let Some(stem) = name.strip_suffix(".conf") {
            let text = read_file(image, &format!("{dir}/{name}"))?;
            entries.push(BootEntry::parse(&format!("{stem}.conf"), &text)?);
        }
    }
    Ok(entries)
}

/// The entry the guest's boot loader would pick now.
pub fn default_boot_entry(image: &Path) -> Result<BootEntry> {
    let entries = boot_entries(image)?;
    Ok(bls::default_entry(&entries)
        .with_context(|| format!("{}", image.display()))?
        .clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ls_p_keeps_regular_files_only() {
        let out = "/16/040755/0/0/.//\n/15/040755/0/0/..//\n\
                   /17/100644/0/0/ostree-1-debian.conf/427/\n/18/120777/0/0/link/7/\n\
                   /19/100644/0/0/ostree-2-debian.conf/433/\n";
        assert_eq!(
            parse_ls_p(out),
            ["ostree-1-debian.conf", "ostree-2-debian.conf"]
        );
    }

    #[test]
    fn paths_that_would_need_quoting_are_refused() {
        for bad in ["relative", "/a b", "/a\"b", "/a;b", "/a\nb"] {
            assert!(checked(bad).is_err(), "{bad:?}");
        }
        assert!(checked("/boot/ostree/debian-ab12/vmlinuz-6.1.0-56-amd64").is_ok());
    }

    /// A real ext4 image made by mkfs.ext4 -d (e2fsprogs is a test dependency: tests/setup.sh).
    #[test]
    fn reads_boot_entries_from_a_real_ext4_image() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let entries = root.join("boot/loader.1/entries");
        std::fs::create_dir_all(&entries).unwrap();
        std::os::unix::fs::symlink("loader.1", root.join("boot/loader")).unwrap();
        for v in ["1", "2"] {
            std::fs::write(
                entries.join(format!("ostree-{v}-debian.conf")),
                format!("version {v}\noptions root=/dev/vda k{v}\nlinux /ostree/k{v}\n"),
            )
            .unwrap();
        }
        std::fs::write(root.join("boot/kernel"), b"KERNEL").unwrap();
        let image = tmp.path().join("disk.raw");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        let status = Command::new("mkfs.ext4")
            .args(["-q", "-F", "-d"])
            .arg(&root)
            .arg(&image)
            .status()
            .unwrap();
        assert!(status.success());

        let entry = default_boot_entry(&image).unwrap();
        assert_eq!(entry.file, "ostree-2-debian.conf");
        assert_eq!(entry.options, "root=/dev/vda k2");
        let dest = tmp.path().join("k");
        dump(&image, "/boot/kernel", &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"KERNEL");
        let err = read_file(&image, "/boot/missing").unwrap_err().to_string();
        assert!(err.contains("File not found"), "{err}");
    }
}
