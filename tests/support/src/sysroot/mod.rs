//! A real ostree sysroot in a temporary directory, for tests.
//!
//! [`TestSysroot::builder`] makes a fake OS tree (kernel and initramfs under
//! `usr/lib/modules/<kver>/`, `usr/lib/os-release`, `usr/etc`), commits it into the sysroot's own
//! repository with a ref per commit (refs keep commits from being pruned by later deploys), runs
//! `ostree admin init-fs` / `os-init` / `deploy`, and hands back the sysroot. Read it back with
//! [`TestSysroot::deployments`] (through the `ostree` crate, as the agent does) or
//! [`TestSysroot::bls_entries`] (the BLS files themselves, parsed here).
//!
//! Deployments are made with `OSTREE_SYSROOT_DEBUG=mutable-deployments` so that they are not
//! `chattr +i`; processes a test starts on the sysroot (e.g. the rpm-ostree stand-in) should get
//! the same through [`TestSysroot::env`]. Drop clears the immutable flag anyway before removing the
//! directory, so a sysroot written without it still goes away.
//!
//! The tree also carries the top-level layout of a booted system (`bin -> usr/bin`,
//! `ostree -> sysroot/ostree`, empty `proc sys dev run tmp var sysroot boot home root`) so that a
//! deployment can be chrooted into for a booted simulation.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use ostree::gio;

/// The environment variable and value that keep ostree from making deployments immutable.
pub const MUTABLE_DEPLOYMENTS: (&str, &str) = ("OSTREE_SYSROOT_DEBUG", "mutable-deployments");

/// The fake kernel version of every tree.
pub const KERNEL_VERSION: &str = "6.1.0-fake";

/// Builds a [`TestSysroot`].
#[derive(Debug, Clone)]
pub struct SysrootBuilder {
    osname: String,
    kargs: Vec<String>,
    version: String,
}

impl Default for SysrootBuilder {
    fn default() -> Self {
        Self {
            osname: "fakeos".into(),
            kargs: vec!["root=LABEL=root".into(), "rw".into()],
            version: "1.0".into(),
        }
    }
}

impl SysrootBuilder {
    /// The stateroot (os) name; default `fakeos`.
    pub fn osname(mut self, osname: &str) -> Self {
        self.osname = osname.into();
        self
    }

    /// The kernel arguments of the first deployment; default `root=LABEL=root rw`.
    pub fn kargs(mut self, kargs: &[&str]) -> Self {
        self.kargs = kargs.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The version of the first commit (ref `<osname>/stable`); default `1.0`.
    pub fn version(mut self, version: &str) -> Self {
        self.version = version.into();
        self
    }

    /// Creates the sysroot with one deployment of `<osname>/stable`.
    pub fn build(self) -> Result<TestSysroot> {
        let dir = tempfile::Builder::new()
            .prefix("mco-test-sysroot.")
            .tempdir()
            .context("creating a directory for the test sysroot")?;
        let sysroot = dir.path().join("sysroot");
        std::fs::create_dir(&sysroot).context("creating sysroot/")?;
        let ts = TestSysroot {
            sysroot,
            work: dir.path().join("work"),
            osname: self.osname.clone(),
            dir: Some(dir),
        };
        std::fs::create_dir(&ts.work).context("creating work/")?;
        ts.ostree(&["admin", "init-fs", &path_str(&ts.sysroot)?])?;
        ts.ostree(&[
            "admin",
            "os-init",
            &format!("--sysroot={}", path_str(&ts.sysroot)?),
            &self.osname,
        ])?;
        let stable = format!("{}/stable", self.osname);
        ts.commit(&stable, &self.version)?;
        let kargs: Vec<&str> = self.kargs.iter().map(String::as_str).collect();
        ts.deploy(&stable, &kargs)?;
        Ok(ts)
    }
}

/// An ostree sysroot in a temporary directory. Removed on drop.
#[derive(Debug)]
pub struct TestSysroot {
    sysroot: PathBuf,
    work: PathBuf,
    osname: String,
    dir: Option<tempfile::TempDir>,
}

/// One deployment as libostree sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentEntry {
    /// Position in boot order; 0 is the default.
    pub index: i32,
    pub osname: String,
    pub checksum: String,
    pub serial: i32,
    pub booted: bool,
    pub staged: bool,
    pub pinned: bool,
    /// The BLS `options` line: the kernel arguments.
    pub options: String,
    /// The whole origin file, if the deployment has one.
    pub origin: Option<String>,
}

impl DeploymentEntry {
    /// A key of the origin file, e.g. (`origin`, `refspec`).
    pub fn origin_value(&self, group: &str, key: &str) -> Option<String> {
        let kf = ostree::glib::KeyFile::new();
        kf.load_from_data(self.origin.as_deref()?, ostree::glib::KeyFileFlags::NONE)
            .ok()?;
        kf.string(group, key).ok().map(|s| s.to_string())
    }

    /// The kernel arguments split on spaces (the BLS options line has no quoting of its own).
    pub fn kargs(&self) -> Vec<&str> {
        self.options.split_whitespace().collect()
    }
}

/// One BLS entry file under `boot/loader/entries/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlsEntry {
    pub file: String,
    pub title: String,
    pub version: String,
    pub options: String,
    pub linux: String,
    pub initrd: String,
}

impl BlsEntry {
    /// The deployment index encoded in the title as `(ostree:N)`.
    pub fn ostree_index(&self) -> Option<u32> {
        let start = self.title.rfind("(ostree:")? + "(ostree:".len();
        let rest = &self.title[start..];
        rest[..rest.find(')')?].parse().ok()
    }
}

impl TestSysroot {
    /// A builder with the defaults (`fakeos`, `root=LABEL=root rw`, version `1.0`).
    pub fn builder() -> SysrootBuilder {
        SysrootBuilder::default()
    }

    /// The sysroot directory (what `--sysroot` takes).
    pub fn path(&self) -> &Path {
        &self.sysroot
    }

    /// The stateroot name.
    pub fn osname(&self) -> &str {
        &self.osname
    }

    /// The sysroot's repository.
    pub fn repo(&self) -> PathBuf {
        self.sysroot.join("ostree/repo")
    }

    /// The environment processes working on this sysroot should run with.
    pub fn env(&self) -> [(&'static str, &'static str); 1] {
        [MUTABLE_DEPLOYMENTS]
    }

    /// Commits a fresh fake OS tree of `version` to `refname` in the sysroot repo; returns the
    /// checksum. The ref keeps the commit from being pruned.
    pub fn commit(&self, refname: &str, version: &str) -> Result<String> {
        let tree = self.work.join(format!("tree-{}", sanitize(refname)));
        if tree.exists() {
            std::fs::remove_dir_all(&tree)
                .with_context(|| format!("removing {}", tree.display()))?;
        }
        write_fake_tree(&tree, &self.osname, version)?;
        let out = self.ostree(&[
            &format!("--repo={}", path_str(&self.repo())?),
            "commit",
            &format!("--branch={refname}"),
            &format!("--subject={} {version}", self.osname),
            &format!("--add-metadata-string=version={version}"),
            &format!("--tree=dir={}", path_str(&tree)?),
        ])?;
        std::fs::remove_dir_all(&tree).with_context(|| format!("removing {}", tree.display()))?;
        Ok(out.trim().to_string())
    }

    /// Resolves a ref or checksum in the sysroot repo.
    pub fn rev_parse(&self, rev: &str) -> Result<String> {
        let out = self.ostree(&[
            &format!("--repo={}", path_str(&self.repo())?),
            "rev-parse",
            rev,
        ])?;
        Ok(out.trim().to_string())
    }

    /// Deploys `rev` as the new default with exactly `kargs` (not merged from the previous one).
    pub fn deploy(&self, rev: &str, kargs: &[&str]) -> Result<()> {
        let mut args = vec![
            "admin".to_string(),
            "deploy".into(),
            format!("--sysroot={}", path_str(&self.sysroot)?),
            format!("--os={}", self.osname),
            "--karg-none".into(),
        ];
        // --karg-append keeps repeated arguments (--karg=K=V would replace all values of K).
        args.extend(kargs.iter().map(|k| format!("--karg-append={k}")));
        args.push(rev.into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.ostree(&args)?;
        Ok(())
    }

    /// `ostree admin status` output.
    pub fn admin_status(&self) -> Result<String> {
        self.ostree(&[
            "admin",
            "status",
            &format!("--sysroot={}", path_str(&self.sysroot)?),
        ])
    }

    /// The deployments as libostree reads them, in boot order.
    pub fn deployments(&self) -> Result<Vec<DeploymentEntry>> {
        read_deployments(&self.sysroot)
    }

    /// The BLS entry files, parsed, sorted by their `(ostree:N)` index.
    pub fn bls_entries(&self) -> Result<Vec<BlsEntry>> {
        read_bls_entries(&self.sysroot)
    }

    /// Runs the ostree CLI with this sysroot's environment; returns stdout.
    pub fn ostree(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("ostree")
            .args(args)
            .env(MUTABLE_DEPLOYMENTS.0, MUTABLE_DEPLOYMENTS.1)
            .output()
            .context("running ostree (is the ostree package installed? see tests/setup.sh)")?;
        if !out.status.success() {
            bail!(
                "ostree {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for TestSysroot {
    fn drop(&mut self) {
        clear_immutable(&self.sysroot);
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_path_buf();
            if let Err(e) = dir.close() {
                eprintln!("test sysroot: removing {}: {e}", path.display());
            }
        }
    }
}

/// Reads the deployments of the sysroot at `path` with libostree.
pub fn read_deployments(path: &Path) -> Result<Vec<DeploymentEntry>> {
    let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(path)));
    sysroot
        .load(gio::Cancellable::NONE)
        .with_context(|| format!("loading the ostree sysroot at {}", path.display()))?;
    let booted = sysroot.booted_deployment();
    Ok(sysroot
        .deployments()
        .iter()
        .map(|d| DeploymentEntry {
            index: d.index(),
            osname: d.osname().to_string(),
            checksum: d.csum().to_string(),
            serial: d.deployserial(),
            booted: booted.as_ref().is_some_and(|b| b.equal(d)),
            staged: d.is_staged(),
            pinned: d.is_pinned(),
            options: d
                .bootconfig()
                .and_then(|b| b.get("options"))
                .map(|s| s.to_string())
                .unwrap_or_default(),
            origin: d.origin().map(|kf| kf.to_data().to_string()),
        })
        .collect())
}

/// Parses the BLS entries of the sysroot at `path`.
pub fn read_bls_entries(path: &Path) -> Result<Vec<BlsEntry>> {
    let dir = path.join("boot/loader/entries");
    let mut entries = Vec::new();
    for ent in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let ent = ent?;
        let file = ent.file_name().to_string_lossy().into_owned();
        if !file.ends_with(".conf") {
            continue;
        }
        let text = std::fs::read_to_string(ent.path())
            .with_context(|| format!("reading {}", ent.path().display()))?;
        let get = |key: &str| {
            text.lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == key).then(|| v.trim().to_string())
                })
                .unwrap_or_default()
        };
        entries.push(BlsEntry {
            title: get("title"),
            version: get("version"),
            options: get("options"),
            linux: get("linux"),
            initrd: get("initrd"),
            file,
        });
    }
    entries.sort_by_key(|e| e.ostree_index());
    Ok(entries)
}

/// Writes a minimal OS tree of `version` at `dir`.
pub fn write_fake_tree(dir: &Path, osname: &str, version: &str) -> Result<()> {
    let files: &[(&str, String)] = &[
        (
            &format!("usr/lib/modules/{KERNEL_VERSION}/vmlinuz"),
            format!("fake kernel {KERNEL_VERSION}\n"),
        ),
        (
            &format!("usr/lib/modules/{KERNEL_VERSION}/initramfs.img"),
            format!("fake initramfs {KERNEL_VERSION}\n"),
        ),
        (
            "usr/lib/os-release",
            format!(
                "NAME=\"FakeOS\"\nID={osname}\nVERSION_ID={version}\nPRETTY_NAME=\"FakeOS {version}\"\n"
            ),
        ),
        (
            "usr/etc/passwd",
            "root:x:0:0:root:/root:/bin/sh\n".to_string(),
        ),
        ("usr/etc/group", "root:x:0:\n".to_string()),
        ("usr/etc/hostname", "fakeos\n".to_string()),
        (
            &format!("usr/share/{osname}/version"),
            format!("{version}\n"),
        ),
    ];
    for (rel, contents) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("relative path has a parent"))?;
        std::fs::write(&p, contents).with_context(|| format!("writing {}", p.display()))?;
    }
    for d in [
        "usr/bin",
        "usr/sbin",
        "usr/lib64",
        "proc",
        "sys",
        "dev",
        "run",
        "tmp",
        "var",
        "sysroot",
        "boot",
        "home",
        "root",
    ] {
        std::fs::create_dir_all(dir.join(d))?;
    }
    for (link, target) in [
        ("bin", "usr/bin"),
        ("sbin", "usr/sbin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
        ("ostree", "sysroot/ostree"),
    ] {
        std::os::unix::fs::symlink(target, dir.join(link))
            .with_context(|| format!("linking {link} -> {target}"))?;
    }
    Ok(())
}

/// Clears `chattr +i` from every deployment directory of the sysroot at `path`, best effort.
pub fn clear_immutable(path: &Path) {
    let Ok(osdirs) = std::fs::read_dir(path.join("ostree/deploy")) else {
        return;
    };
    for os in osdirs.flatten() {
        let Ok(deploys) = std::fs::read_dir(os.path().join("deploy")) else {
            continue;
        };
        for d in deploys.flatten() {
            if d.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = Command::new("chattr").arg("-i").arg(d.path()).status();
            }
        }
    }
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn path_str(p: &Path) -> Result<String> {
    p.to_str()
        .map(str::to_string)
        .with_context(|| format!("path {} is not UTF-8", p.display()))
}

mod booted;
pub use booted::BootedProcess;
