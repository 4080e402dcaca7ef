//! RHCOS extensions the MCO supports, and the packages each one installs.

use std::collections::BTreeSet;

/// `(extension, packages)`, the MCO's `SupportedExtensions` table.
pub const SUPPORTED: &[(&str, &[&str])] = &[
    ("two-node-ha", &["pacemaker", "pcs", "fence-agents-all"]),
    (
        "ipsec",
        &[
            "NetworkManager-libreswan",
            "libreswan",
            "openvswitch3.5-ipsec",
        ],
    ),
    ("usbguard", &["usbguard"]),
    ("kerberos", &["krb5-workstation", "libkadm5"]),
    ("kernel-devel", &["kernel-devel", "kernel-headers"]),
    ("sandboxed-containers", &["kata-containers"]),
    ("sysstat", &["sysstat"]),
];

/// The packages of an extension, or `None` when it is not supported.
pub fn packages(extension: &str) -> Option<&'static [&'static str]> {
    SUPPORTED
        .iter()
        .find(|(name, _)| *name == extension)
        .map(|(_, pkgs)| *pkgs)
}

/// Extensions not in the allowlist, in the order given.
pub fn unsupported(extensions: &[String]) -> Vec<String> {
    extensions
        .iter()
        .filter(|e| packages(e).is_none())
        .cloned()
        .collect()
}

/// Every package the extensions need (an unknown extension is taken as a package name, as on
/// Fedora CoreOS).
pub fn package_set(extensions: &[String]) -> BTreeSet<String> {
    extensions
        .iter()
        .flat_map(|e| match packages(e) {
            Some(pkgs) => pkgs.iter().map(|p| p.to_string()).collect(),
            None => vec![e.clone()],
        })
        .collect()
}

/// `(extension, packages)` of extensions whose package list changed, as older releases
/// installed them (the MCO's `LegacyExtensionPackages`): a node that installed them then
/// still has them.
pub const LEGACY: &[(&str, &[&str])] = &[("ipsec", &["NetworkManager-libreswan", "libreswan"])];

/// Every package set that makes `extension` installed, the current one first, then the legacy
/// one (the MCO's `GetAllValidPackageSetsForExtension`). An extension the MCO does not list is
/// its own package, as on Fedora CoreOS.
pub fn valid_package_sets(extension: &str) -> Vec<Vec<String>> {
    let owned = |pkgs: &[&str]| pkgs.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let mut sets = match packages(extension) {
        Some(pkgs) => vec![owned(pkgs)],
        None => vec![vec![extension.to_string()]],
    };
    sets.extend(
        LEGACY
            .iter()
            .filter(|(name, _)| *name == extension)
            .map(|(_, pkgs)| owned(pkgs)),
    );
    sets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_sets_of_an_extension() {
        let cases: &[(&str, &[&[&str]])] = &[
            ("usbguard", &[&["usbguard"]]),
            (
                "ipsec",
                &[
                    &[
                        "NetworkManager-libreswan",
                        "libreswan",
                        "openvswitch3.5-ipsec",
                    ],
                    &["NetworkManager-libreswan", "libreswan"],
                ],
            ),
            ("fcos-only-tool", &[&["fcos-only-tool"]]),
        ];
        for (ext, want) in cases {
            let want: Vec<Vec<String>> = want
                .iter()
                .map(|s| s.iter().map(|p| p.to_string()).collect())
                .collect();
            assert_eq!(valid_package_sets(ext), want, "{ext}");
        }
    }
}
