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
