//! Package changes: kernel-type switches and their revert, extensions (as the MCD makes them
//! with `rpm-ostree override remove ... --install ...`, upstream `pkg/daemon/update.go`).

use super::error::OsError;
use super::types::Deployment;

/// Package layering and base-package overrides (`UpdateDeployment` modifiers).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PackageChange {
    pub install: Vec<String>,
    pub uninstall: Vec<String>,
    pub override_remove: Vec<String>,
    pub override_reset: Vec<String>,
}

/// The base kernel packages a kernel-type switch removes (the MCD's list).
pub const BASE_KERNEL_PACKAGES: &[&str] = &[
    "kernel",
    "kernel-core",
    "kernel-modules",
    "kernel-modules-core",
    "kernel-modules-extra",
];
const REALTIME_PACKAGES: &[&str] = &[
    "kernel-rt-core",
    "kernel-rt-modules",
    "kernel-rt-modules-extra",
];
const SIXTY_FOUR_K_PACKAGES: &[&str] = &[
    "kernel-64k-core",
    "kernel-64k-modules",
    "kernel-64k-modules-core",
    "kernel-64k-modules-extra",
];

impl PackageChange {
    pub fn is_empty(&self) -> bool {
        self.install.is_empty()
            && self.uninstall.is_empty()
            && self.override_remove.is_empty()
            && self.override_reset.is_empty()
    }

    /// Extensions: packages to layer and to remove.
    pub fn extensions(install: &[String], uninstall: &[String]) -> Self {
        PackageChange {
            install: install.to_vec(),
            uninstall: uninstall.to_vec(),
            ..Default::default()
        }
    }

    /// Switching to a kernel type (`realtime` or `64k-pages`): remove the base kernel and
    /// layer the other one. `default` (or empty) needs no switch: `None`.
    pub fn kernel_type(kernel_type: &str) -> Result<Option<Self>, OsError> {
        let install = match kernel_type {
            "" | "default" => return Ok(None),
            "realtime" => REALTIME_PACKAGES,
            "64k-pages" => SIXTY_FOUR_K_PACKAGES,
            other => {
                return Err(OsError::InvalidKernelType(other.to_string()));
            }
        };
        Ok(Some(PackageChange {
            override_remove: BASE_KERNEL_PACKAGES.iter().map(|s| s.to_string()).collect(),
            install: install.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }))
    }

    /// Undoing any kernel-type switch on `deployment` (the MCD's "revert kernel swap"): reset
    /// the base kernel removals it has and uninstall the layered `kernel-rt-*`/`kernel-64k-*`
    /// packages. `None` when there is nothing to undo.
    pub fn revert_kernel(deployment: &Deployment) -> Option<Self> {
        let change = PackageChange {
            override_reset: deployment
                .requested_base_removals
                .iter()
                .filter(|p| BASE_KERNEL_PACKAGES.contains(&p.as_str()))
                .cloned()
                .collect(),
            uninstall: deployment
                .requested_packages
                .iter()
                .filter(|p| p.starts_with("kernel-rt-") || p.starts_with("kernel-64k-"))
                .cloned()
                .collect(),
            ..Default::default()
        };
        (!change.is_empty()).then_some(change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_type_changes_follow_the_mcd() {
        assert_eq!(PackageChange::kernel_type("default").unwrap(), None);
        assert_eq!(PackageChange::kernel_type("").unwrap(), None);
        let rt = PackageChange::kernel_type("realtime").unwrap().unwrap();
        assert_eq!(rt.override_remove, BASE_KERNEL_PACKAGES);
        assert_eq!(
            rt.install,
            [
                "kernel-rt-core",
                "kernel-rt-modules",
                "kernel-rt-modules-extra"
            ]
        );
        let k64 = PackageChange::kernel_type("64k-pages").unwrap().unwrap();
        assert_eq!(k64.install.len(), 4);
        let e = PackageChange::kernel_type("turbo").unwrap_err().to_string();
        assert!(e.contains("\"turbo\""), "{e}");

        let switched = Deployment {
            requested_packages: vec![
                "kernel-rt-core".into(),
                "kernel-rt-modules".into(),
                "usbguard".into(),
            ],
            requested_base_removals: vec!["kernel".into(), "kernel-core".into()],
            ..Default::default()
        };
        let revert = PackageChange::revert_kernel(&switched).unwrap();
        assert_eq!(revert.uninstall, ["kernel-rt-core", "kernel-rt-modules"]);
        assert_eq!(revert.override_reset, ["kernel", "kernel-core"]);
        assert_eq!(PackageChange::revert_kernel(&Deployment::default()), None);
    }
}
