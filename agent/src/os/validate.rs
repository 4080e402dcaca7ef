//! The two on-disk checks the MCD makes of the OS (upstream `pkg/daemon/on_disk_validation.go`
//! and `daemon.go`), with its messages:
//! `expected target osImageURL %q, have %q` and `missing expected kernel arguments: %v`.

use machine_config::kargs;

use super::types::Deployment;
use crate::validate::go_quote;

/// An OS check that failed. `Display` is the MCD's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OsMismatch {
    #[error(
        "expected target osImageURL {}, have {}",
        go_quote(expected),
        go_quote(have)
    )]
    OsImage { expected: String, have: String },
    #[error(
        "missing expected kernel arguments: {}",
        kargs::go_string_slice(missing)
    )]
    KernelArgs {
        missing: Vec<String>,
        /// What the deployment has (for logs; the MCD logs it beside the error).
        have: String,
    },
}

/// The booted image must be `expected` (the MachineConfig's `osImageURL`). The image is the
/// deployment's container image reference without transport, or a `pivot://` custom origin;
/// a deployment with neither has `""`. A URL without a `sha256:` digest is allowed, with a
/// warning, as the MCD does.
pub fn check_os_image(expected: &str, booted: &Deployment) -> Result<(), OsMismatch> {
    if !expected.contains("@sha256:") {
        tracing::warn!(
            os_image_url = expected,
            "the expected osImageURL is not pinned by digest"
        );
    }
    let have = booted.image_url().unwrap_or_default();
    if have == expected {
        Ok(())
    } else {
        Err(OsMismatch::OsImage {
            expected: expected.to_string(),
            have,
        })
    }
}

/// Every argument of the MachineConfig's `kernelArguments` entries must be among the
/// deployment's kernel arguments (its BLS `options`, what `rpm-ostree kargs` prints); extra
/// arguments are fine. Both sides are split with the kernel's quoting rules by the model's
/// `machine_config::kargs` (so, unlike the MCD, a quoted argument with a space can match).
pub fn check_kernel_args(expected: &[String], options: &str) -> Result<(), OsMismatch> {
    let missing = kargs::missing(expected, options);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(OsMismatch::KernelArgs {
            missing,
            have: options.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(image: Option<&str>) -> Deployment {
        Deployment {
            container_image_reference: image.map(|i| format!("ostree-unverified-registry:{i}")),
            ..Default::default()
        }
    }

    #[test]
    fn os_image_matches_or_names_both() {
        let img = "quay.io/openshift/rhcos@sha256:abcd";
        assert_eq!(check_os_image(img, &deployment(Some(img))), Ok(()));
        let e = check_os_image(img, &deployment(Some("quay.io/old@sha256:1"))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected target osImageURL \"quay.io/openshift/rhcos@sha256:abcd\", have \"quay.io/old@sha256:1\""
        );
        let e = check_os_image(img, &deployment(None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected target osImageURL \"quay.io/openshift/rhcos@sha256:abcd\", have \"\""
        );
    }

    #[test]
    fn kernel_args_report_every_missing_one_in_go_form() {
        let have = "root=LABEL=root rw quoted=\"a b\" nosmt ostree=/ostree/boot.1/x/y/0";
        let entries = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(check_kernel_args(&entries(&["nosmt rw"]), have), Ok(()));
        assert_eq!(
            check_kernel_args(&entries(&["quoted=\"a b\""]), have),
            Ok(())
        );
        let e = check_kernel_args(
            &entries(&["nosmt mitigations=off", "hugepages=2", "rw"]),
            have,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "missing expected kernel arguments: [mitigations=off hugepages=2]"
        );
        assert_eq!(check_kernel_args(&[], ""), Ok(()));
    }
}
