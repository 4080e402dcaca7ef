//! The two on-disk checks the MCD makes of the OS (mcd-behaviour.md §3), with its messages:
//! `expected target osImageURL %q, have %q` and `missing expected kernel arguments: %v`.

use super::types::Deployment;

/// An OS check that failed. `Display` is the MCD's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OsMismatch {
    #[error(
        "expected target osImageURL {}, have {}",
        go_quote(expected),
        go_quote(have)
    )]
    OsImage { expected: String, have: String },
    #[error("missing expected kernel arguments: {}", go_slice(missing))]
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

/// Every expected kernel argument must be one of the space-separated arguments in `kargs`
/// (the deployment's BLS `options`, what `rpm-ostree kargs` prints); extra arguments are fine.
/// `expected` holds the MachineConfig's `kernelArguments` already split with kernel-cmdline
/// quoting rules (the model crate's splitter).
pub fn check_kernel_args<S: AsRef<str>>(expected: &[S], kargs: &str) -> Result<(), OsMismatch> {
    let have: Vec<&str> = kargs.split(' ').collect();
    let missing: Vec<String> = expected
        .iter()
        .map(AsRef::as_ref)
        .filter(|e| !have.contains(e))
        .map(str::to_string)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(OsMismatch::KernelArgs {
            missing,
            have: kargs.to_string(),
        })
    }
}

/// Go's `%q` of a string: double-quoted, with Go escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%v` of a `[]string`: `[a b c]`.
pub fn go_slice(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
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
        assert_eq!(check_kernel_args(&["nosmt", "rw"], have), Ok(()));
        let e = check_kernel_args(&["nosmt", "mitigations=off", "hugepages=2", "rw"], have)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "missing expected kernel arguments: [mitigations=off hugepages=2]"
        );
        // A quoted argument is one token in the cmdline only when it has no space inside.
        assert!(check_kernel_args(&["quoted=\"a b\""], have).is_err());
        assert_eq!(check_kernel_args::<&str>(&[], ""), Ok(()));
    }

    #[test]
    fn go_quoting() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
        assert_eq!(go_slice(&[]), "[]");
    }
}
