//! Kernel-argument changes in `rpm-ostree kargs` terms.

use super::error::OsError;

/// A kernel-argument change in `rpm-ostree kargs` terms.
///
/// `append`, `replace` and `delete` map onto `KernelArgs`' added/replaced/removed arrays;
/// `append_if_missing` and `delete_if_present` onto its options of the same names. rpm-ostree
/// applies them in this order: delete, replace, append, append-if-missing, then
/// delete-if-present (which deletes only arguments present in the *existing* string).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KargsChange {
    pub append: Vec<String>,
    pub replace: Vec<String>,
    pub delete: Vec<String>,
    pub append_if_missing: Vec<String>,
    pub delete_if_present: Vec<String>,
}

impl KargsChange {
    /// Reads an `rpm-ostree kargs` argv such as the plan's `--delete-if-present=a=1`,
    /// `--append=b` (each flag in its `--flag=value` form).
    pub fn from_argv<S: AsRef<str>>(argv: &[S]) -> Result<Self, OsError> {
        let mut c = KargsChange::default();
        for arg in argv {
            let arg = arg.as_ref();
            let invalid = |reason: &str| OsError::InvalidKargsArg {
                arg: arg.to_string(),
                reason: reason.to_string(),
            };
            let (flag, value) = arg
                .split_once('=')
                .ok_or_else(|| invalid("expected --flag=value"))?;
            if value.is_empty() {
                return Err(invalid("empty kernel argument"));
            }
            // Neither a kernel command line nor a D-Bus string can carry a NUL byte.
            if value.contains('\0') {
                return Err(invalid("kernel argument contains a NUL byte"));
            }
            let list = match flag {
                "--append" => &mut c.append,
                "--replace" => &mut c.replace,
                "--delete" => &mut c.delete,
                "--append-if-missing" => &mut c.append_if_missing,
                "--delete-if-present" => &mut c.delete_if_present,
                _ => {
                    return Err(invalid(
                        "expected --append, --replace, --delete, --append-if-missing or --delete-if-present",
                    ));
                }
            };
            list.push(value.to_string());
        }
        Ok(c)
    }

    pub fn is_empty(&self) -> bool {
        self.lists().all(|list| list.is_empty())
    }

    fn lists(&self) -> impl Iterator<Item = &Vec<String>> {
        [
            &self.append,
            &self.replace,
            &self.delete,
            &self.append_if_missing,
            &self.delete_if_present,
        ]
        .into_iter()
    }

    /// The arguments `existing` becomes, computed as rpm-ostreed computes them (libostree's
    /// `OstreeKernelArgs`), and whether anything changed; libostree's message on failure
    /// (e.g. deleting an argument that is not there). For the fake rpm-ostree and the `kargs`
    /// fuzz target only: the shipped agent leaves this to rpm-ostree and does not link
    /// libostree (tests/packaging.sh checks).
    #[cfg(any(test, feature = "fakes"))]
    pub fn apply_to(&self, existing: &str) -> Result<(String, bool), String> {
        let change = self;
        // libostree takes C strings: a NUL byte would panic in the bindings, not fail.
        if let Some(with_nul) = std::iter::once(existing)
            .chain(self.lists().flatten().map(String::as_str))
            .find(|s| s.contains('\0'))
        {
            return Err(format!("kernel arguments {with_nul:?} contain a NUL byte"));
        }
        let kargs = ostree::KernelArgs::from_string(existing);
        let before: Vec<String> = kargs.to_strv().iter().map(|s| s.to_string()).collect();
        let mut changed = false;
        for a in &change.delete {
            kargs.delete(a).map_err(|e| e.to_string())?;
            changed = true;
        }
        for a in &change.replace {
            kargs.new_replace(a).map_err(|e| e.to_string())?;
            changed = true;
        }
        if !change.append.is_empty() {
            let v: Vec<&str> = change.append.iter().map(String::as_str).collect();
            kargs.append_argv(&v);
            changed = true;
        }
        for a in &change.append_if_missing {
            if !kargs.to_strv().iter().any(|k| k.as_str() == a) {
                kargs.append(a);
                changed = true;
            }
        }
        for a in &change.delete_if_present {
            if before.contains(a) {
                kargs.delete(a).map_err(|e| e.to_string())?;
                changed = true;
            }
        }
        Ok((kargs.to_string(), changed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kargs_argv_maps_onto_the_kernel_args_arrays_and_options() {
        let c = KargsChange::from_argv(&[
            "--delete-if-present=a=1",
            "--delete-if-present=a=1",
            "--append=a=2",
            "--append=quoted=\"x y\"",
            "--replace=b=3",
            "--delete=c",
            "--append-if-missing=d",
        ])
        .unwrap();
        assert_eq!(c.delete_if_present, ["a=1", "a=1"]);
        assert_eq!(c.append, ["a=2", "quoted=\"x y\""]);
        assert_eq!(c.replace, ["b=3"]);
        assert_eq!(c.delete, ["c"]);
        assert_eq!(c.append_if_missing, ["d"]);
        assert!(!c.is_empty());
        assert!(KargsChange::from_argv::<&str>(&[]).unwrap().is_empty());
    }

    #[test]
    fn bad_kargs_argv_names_the_argument() {
        for (arg, why) in [
            ("--append", "--flag=value"),
            ("--append=", "empty"),
            ("--editor=x", "expected --append"),
            ("nosmt", "--flag=value"),
            ("--append=a\0b", "NUL byte"),
        ] {
            let e = KargsChange::from_argv(&[arg]).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{arg:?}")) && e.contains(why),
                "{arg:?}: {e}"
            );
        }
    }

    #[test]
    fn applying_follows_rpm_ostree_order() {
        let change = KargsChange::from_argv(&[
            "--delete-if-present=a=1",
            "--append=a=2",
            "--append-if-missing=rw",
            "--delete-if-present=gone",
        ])
        .unwrap();
        assert_eq!(
            change.apply_to("root=x rw a=1").unwrap(),
            ("root=x rw a=2".to_string(), true)
        );
        let e = KargsChange::from_argv(&["--delete=gone"])
            .unwrap()
            .apply_to("root=x")
            .unwrap_err();
        assert!(e.contains("gone"), "{e}");
    }

    /// Found by the `kargs` fuzz target: a NUL byte in the booted command line (or in an
    /// argument built without `from_argv`) panicked inside the libostree bindings.
    #[test]
    fn a_nul_byte_is_an_error_not_a_panic() {
        let change = KargsChange::from_argv(&["--append=enforcing=0"]).unwrap();
        let e = change.apply_to("root=/dev/vda\0rw").unwrap_err();
        assert!(e.contains("NUL byte") && e.contains("root=/dev/vda"), "{e}");
        let raw = KargsChange {
            delete_if_present: vec!["a\0b".to_string()],
            ..KargsChange::default()
        };
        let e = raw.apply_to("root=/dev/vda").unwrap_err();
        assert!(e.contains(r#""a\0b""#), "{e}");
    }
}
