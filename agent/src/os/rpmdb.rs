//! Which packages the booted OS has installed, from its RPM database (`rpm -q`): after the
//! reboot into an update the MCD checks that the packages of every extension the config asks
//! for are really installed before it calls the node Done (`verifyExtensionPackages`, upstream
//! `pkg/daemon/update.go`, OCPBUGS-65645). Only on an Enterprise Linux CoreOS
//! ([`super::host_os::is_el`]), as upstream.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use machine_config::extensions;

/// Asks the RPM database of the booted OS.
#[async_trait]
pub trait InstalledPackages: Send + Sync {
    /// Whether `package` is installed; `Err` (the MCD's words) when the database could not be
    /// asked.
    async fn installed(&self, package: &str) -> Result<bool, String>;
}

/// `rpm -q <package>` (with `--root` for an alternate root): exit 0 installed, 1 not
/// installed, anything else an error.
pub struct RpmQuery {
    root: PathBuf,
}

impl RpmQuery {
    pub fn new(root: &Path) -> Self {
        RpmQuery {
            root: root.to_path_buf(),
        }
    }
}

#[async_trait]
impl InstalledPackages for RpmQuery {
    async fn installed(&self, package: &str) -> Result<bool, String> {
        let mut cmd = tokio::process::Command::new("rpm");
        if self.root != Path::new("/") {
            cmd.arg("--root").arg(&self.root);
        }
        let out = cmd
            .arg("-q")
            .arg(package)
            .output()
            .await
            .map_err(|e| query_failed(package, &e.to_string(), ""))?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(query_failed(
                package,
                &out.status.to_string(),
                String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).trim(),
            )),
        }
    }
}

fn query_failed(package: &str, error: &str, output: &str) -> String {
    format!("failed to query RPM database for package {package:?}: {error}: {output}")
}

/// Checks that every extension of `extensions` has one of its package sets fully installed;
/// `Err` is the MCD's reason, e.g. `extension package verification failed: extension
/// "usbguard" verification failed: no valid package set is fully installed. Tried 1 package
/// set(s), missing packages per set: [[usbguard]]`.
pub async fn verify_extensions(
    db: &dyn InstalledPackages,
    extensions: &[String],
) -> Result<(), String> {
    let failed = |e: String| format!("extension package verification failed: {e}");
    for ext in extensions {
        let sets = extensions::valid_package_sets(ext);
        let mut missing_per_set = Vec::new();
        let mut verified = false;
        for set in &sets {
            let mut missing = Vec::new();
            for package in set {
                if !db.installed(package).await.map_err(failed)? {
                    missing.push(package.clone());
                }
            }
            if missing.is_empty() {
                tracing::info!(extension = %ext, packages = ?set, "Extension {ext:?} verified");
                verified = true;
                break;
            }
            missing_per_set.push(format!("[{}]", missing.join(" ")));
        }
        if !verified {
            return Err(failed(format!(
                "extension {ext:?} verification failed: no valid package set is fully installed. \
                 Tried {} package set(s), missing packages per set: [{}]",
                sets.len(),
                missing_per_set.join(" ")
            )));
        }
    }
    Ok(())
}

/// An RPM database in memory, for tests.
#[cfg(any(test, feature = "fakes"))]
#[derive(Default)]
pub struct FakeInstalledPackages {
    installed: std::sync::Mutex<std::collections::BTreeSet<String>>,
    broken: std::sync::Mutex<Option<String>>,
}

#[cfg(any(test, feature = "fakes"))]
impl FakeInstalledPackages {
    /// A database holding `packages`.
    pub fn with(packages: &[&str]) -> Self {
        let db = FakeInstalledPackages::default();
        db.install(packages);
        db
    }

    pub fn install(&self, packages: &[&str]) {
        let mut set = self.installed.lock().unwrap();
        set.extend(packages.iter().map(|p| p.to_string()));
    }

    /// Every query fails with `error`.
    pub fn break_with(&self, error: &str) {
        *self.broken.lock().unwrap() = Some(error.to_string());
    }
}

#[cfg(any(test, feature = "fakes"))]
#[async_trait]
impl InstalledPackages for FakeInstalledPackages {
    async fn installed(&self, package: &str) -> Result<bool, String> {
        if let Some(e) = self.broken.lock().unwrap().as_ref() {
            return Err(query_failed(package, "exit status: 2", e));
        }
        Ok(self.installed.lock().unwrap().contains(package))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per decision of the MCD's `verifyExtensionPackages` /
    /// `GetAllValidPackageSetsForExtension`.
    #[tokio::test]
    async fn extension_verification_follows_verify_extension_packages() {
        struct Case {
            name: &'static str,
            installed: &'static [&'static str],
            extensions: &'static [&'static str],
            result: Result<(), &'static str>,
        }
        let cases = [
            Case {
                name: "verifyExtensionPackages: no extensions, nothing to verify",
                installed: &[],
                extensions: &[],
                result: Ok(()),
            },
            Case {
                name: "verifyExtensionPackages: every package of the set installed",
                installed: &["usbguard", "krb5-workstation", "libkadm5"],
                extensions: &["usbguard", "kerberos"],
                result: Ok(()),
            },
            Case {
                name: "verifyExtensionPackages: a missing package fails, naming it",
                installed: &["krb5-workstation"],
                extensions: &["kerberos"],
                result: Err(
                    "extension package verification failed: extension \"kerberos\" verification \
                     failed: no valid package set is fully installed. Tried 1 package set(s), \
                     missing packages per set: [[libkadm5]]",
                ),
            },
            Case {
                name: "GetAllValidPackageSetsForExtension: the legacy ipsec set is accepted",
                installed: &["NetworkManager-libreswan", "libreswan"],
                extensions: &["ipsec"],
                result: Ok(()),
            },
            Case {
                name: "GetAllValidPackageSetsForExtension: both sets tried, each one's missing named",
                installed: &["libreswan"],
                extensions: &["ipsec"],
                result: Err(
                    "extension package verification failed: extension \"ipsec\" verification \
                     failed: no valid package set is fully installed. Tried 2 package set(s), \
                     missing packages per set: [[NetworkManager-libreswan openvswitch3.5-ipsec] \
                     [NetworkManager-libreswan]]",
                ),
            },
        ];
        for c in cases {
            let db = FakeInstalledPackages::with(c.installed);
            let exts: Vec<String> = c.extensions.iter().map(|e| e.to_string()).collect();
            let got = verify_extensions(&db, &exts).await;
            assert_eq!(got, c.result.map_err(str::to_string), "{}", c.name);
        }
    }

    #[tokio::test]
    async fn a_failing_query_is_an_error_not_a_missing_package() {
        let db = FakeInstalledPackages::default();
        db.break_with("error: cannot open Packages database");
        let e = verify_extensions(&db, &["usbguard".into()])
            .await
            .unwrap_err();
        assert!(
            e.starts_with(
                "extension package verification failed: failed to query RPM database for package \"usbguard\""
            ),
            "{e}"
        );
    }

    /// The real `rpm -q` against an empty alternate root: nothing is installed there (exit 1).
    #[tokio::test]
    async fn rpm_query_in_an_empty_root() {
        if which("rpm").is_none() {
            panic!("rpm is not installed (tests/setup.sh installs it)");
        }
        let dir = tempfile::tempdir().unwrap();
        let q = RpmQuery::new(dir.path());
        assert_eq!(q.installed("usbguard").await, Ok(false));
    }

    fn which(cmd: &str) -> Option<PathBuf> {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join(cmd))
            .find(|p| p.is_file())
    }
}
