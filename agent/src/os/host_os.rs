//! The host's OS from os-release inside the root: the labels of `mcd_host_os_and_version`, and
//! whether it is an Enterprise Linux CoreOS (the MCD's `IsEL`: RHCOS or SCOS).

use std::path::Path;

use crate::rootfs::Root;

/// Where os-release is looked for, in order (os-release(5)).
const OS_RELEASE: [&str; 2] = ["/etc/os-release", "/usr/lib/os-release"];

/// The `(os, version)` labels: the CoreOS variants by the MCD's names (`RHCOS`, `FCOS`,
/// `SCOS`), any other OS by its `ID` upper-cased; the version is `VERSION_ID`. Values may be
/// quoted as in a shell assignment.
pub fn labels(os_release: &str) -> (String, String) {
    let get = |key: &str| {
        os_release
            .lines()
            .filter_map(|l| l.trim().split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| unquote(v.trim()))
            .unwrap_or_default()
    };
    let (id, variant) = (get("ID"), get("VARIANT_ID"));
    let os = match (id.as_str(), variant.as_str()) {
        ("rhcos", _) | ("rhel", "coreos") => "RHCOS".to_string(),
        ("fedora", "coreos") => "FCOS".to_string(),
        ("scos", _) | ("centos", "coreos") => "SCOS".to_string(),
        ("", _) => "UNKNOWN".to_string(),
        (other, _) => other.to_ascii_uppercase(),
    };
    (os, get("VERSION_ID"))
}

fn unquote(v: &str) -> String {
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner.replace("\\\"", "\"").replace("\\\\", "\\");
        }
    }
    v.to_string()
}

/// The labels of the OS in `root`; `None` when it has no readable os-release.
pub fn read(root: &Root) -> Option<(String, String)> {
    OS_RELEASE.iter().find_map(|p| {
        let bytes = root.read(Path::new(p)).ok().flatten()?;
        Some(labels(&String::from_utf8_lossy(&bytes)))
    })
}

/// Whether the OS in `root` is an Enterprise Linux CoreOS (RHCOS or SCOS), where the MCD
/// verifies extension packages (`IsEL`).
pub fn is_el(root: &Root) -> bool {
    read(root).is_some_and(|(os, _)| os == "RHCOS" || os == "SCOS")
}

/// Whether the OS in `root` is a CoreOS variant (RHCOS, SCOS or FCOS: the MCD's
/// `IsCoreOSVariant`), where the MCD removes the rollback deployment and updates the bootloader.
pub fn is_coreos(root: &Root) -> bool {
    read(root).is_some_and(|(os, _)| matches!(os.as_str(), "RHCOS" | "SCOS" | "FCOS"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coreos_variants_get_the_mcds_names() {
        for (text, os, version) in [
            (
                "NAME=\"Red Hat Enterprise Linux CoreOS\"\nID=\"rhcos\"\nVERSION_ID=\"4.16\"\n",
                "RHCOS",
                "4.16",
            ),
            (
                "ID=rhel\nVARIANT_ID=coreos\nVERSION_ID=9.6\n",
                "RHCOS",
                "9.6",
            ),
            (
                "ID=fedora\nVARIANT_ID=coreos\nVERSION_ID=41\n",
                "FCOS",
                "41",
            ),
            (
                "ID=centos\nVARIANT_ID=coreos\nVERSION_ID='10'\n",
                "SCOS",
                "10",
            ),
            ("ID=debian\nVERSION_ID=\"12\"\n", "DEBIAN", "12"),
            ("# no id\n", "UNKNOWN", ""),
        ] {
            assert_eq!(
                labels(text),
                (os.to_string(), version.to_string()),
                "{text}"
            );
        }
    }

    #[test]
    fn reads_etc_before_usr_lib() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        assert_eq!(read(&root), None);
        assert!(!is_el(&root));
        assert!(!is_coreos(&root));
        std::fs::create_dir_all(dir.path().join("usr/lib")).unwrap();
        std::fs::write(
            dir.path().join("usr/lib/os-release"),
            "ID=fedora\nVARIANT_ID=coreos\nVERSION_ID=41\n",
        )
        .unwrap();
        assert_eq!(read(&root), Some(("FCOS".into(), "41".into())));
        assert!(!is_el(&root), "Fedora CoreOS is not Enterprise Linux");
        assert!(is_coreos(&root));
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(
            dir.path().join("etc/os-release"),
            "ID=rhcos\nVERSION_ID=4.17\n",
        )
        .unwrap();
        assert_eq!(read(&root), Some(("RHCOS".into(), "4.17".into())));
        assert!(is_el(&root));
    }
}
