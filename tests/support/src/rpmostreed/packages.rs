//! The package bookkeeping of `UpdateDeployment` (layering requests and base removals), with
//! rpm-ostree's refusals.

use std::collections::BTreeSet;

use super::ops::DeployOp;

/// The package bookkeeping of `UpdateDeployment`, with rpm-ostree's refusals.
pub fn apply_package_changes(
    op: &DeployOp,
    requested: &mut BTreeSet<String>,
    removals: &mut BTreeSet<String>,
) -> Result<(), String> {
    if op.no_layering {
        requested.clear();
    }
    for p in &op.uninstall {
        if !requested.remove(p) && !op.idempotent_layering {
            return Err(format!(
                "Package/capability '{p}' is not currently requested"
            ));
        }
    }
    for p in &op.install {
        if !requested.insert(p.clone()) && !op.idempotent_layering {
            return Err(format!("Package/capability '{p}' is already requested"));
        }
    }
    if op.no_overrides {
        removals.clear();
    }
    for p in &op.override_reset {
        if !removals.remove(p) {
            return Err(format!("No overrides for package '{p}'"));
        }
    }
    for p in &op.override_remove {
        if !removals.insert(p.clone()) {
            return Err(format!("Override already exists for package '{p}'"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn kernel_type_switch_and_revert_book_keeping() {
        let kernel = ["kernel", "kernel-core", "kernel-modules"];
        let rt = ["kernel-rt-core", "kernel-rt-modules"];
        let (mut req, mut rem) = (set(&[]), set(&[]));
        let switch = DeployOp {
            override_remove: kernel.map(String::from).to_vec(),
            install: rt.map(String::from).to_vec(),
            ..Default::default()
        };
        apply_package_changes(&switch, &mut req, &mut rem).unwrap();
        assert_eq!((&req, &rem), (&set(&rt), &set(&kernel)));
        // Doing it again is refused, as rpm-ostree refuses it.
        let e = apply_package_changes(&switch, &mut req.clone(), &mut rem.clone()).unwrap_err();
        assert_eq!(
            e,
            "Package/capability 'kernel-rt-core' is already requested"
        );
        let revert = DeployOp {
            override_reset: kernel.map(String::from).to_vec(),
            uninstall: rt.map(String::from).to_vec(),
            ..Default::default()
        };
        apply_package_changes(&revert, &mut req, &mut rem).unwrap();
        assert!(req.is_empty() && rem.is_empty());
        let e = apply_package_changes(&revert, &mut req.clone(), &mut rem.clone()).unwrap_err();
        assert_eq!(
            e,
            "Package/capability 'kernel-rt-core' is not currently requested"
        );
    }

    #[test]
    fn override_errors_use_rpm_ostree_wording() {
        let (mut req, mut rem) = (set(&[]), set(&["kernel"]));
        let op = DeployOp {
            override_remove: vec!["kernel".into()],
            ..Default::default()
        };
        let e = apply_package_changes(&op, &mut req, &mut rem).unwrap_err();
        assert_eq!(e, "Override already exists for package 'kernel'");
        let op = DeployOp {
            override_reset: vec!["kernel-core".into()],
            ..Default::default()
        };
        let e = apply_package_changes(&op, &mut req, &mut rem).unwrap_err();
        assert_eq!(e, "No overrides for package 'kernel-core'");
    }

    #[test]
    fn idempotent_layering_tolerates_satisfied_requests() {
        let (mut req, mut rem) = (set(&["usbguard"]), set(&[]));
        let op = DeployOp {
            install: vec!["usbguard".into()],
            uninstall: vec!["wireguard-tools".into()],
            idempotent_layering: true,
            ..Default::default()
        };
        apply_package_changes(&op, &mut req, &mut rem).unwrap();
        assert_eq!(req, set(&["usbguard"]));
    }
}
