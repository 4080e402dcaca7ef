//! A change as one call of the rpm-ostree method that creates its transaction.

use zbus::zvariant::Value;

use super::DbusOsUpdater;
use super::proxies::{Options, OsProxy};
use crate::os::error::OsError;
use crate::os::{KargsChange, KargsTarget, OsUpdater, PackageChange};

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A change, as one rpm-ostree method call.
pub(super) enum Request<'a> {
    KernelArgs {
        existing: Option<&'a str>,
        change: &'a KargsChange,
    },
    Rebase {
        refspec: &'a str,
    },
    Packages(&'a PackageChange),
    Cleanup(Vec<&'static str>),
    Finalize {
        checksum: &'a str,
    },
    Rollback,
}

impl Request<'_> {
    /// The method called; a rebase with finalization locked goes through `UpdateDeployment`.
    pub(super) fn method(&self, lock_finalization: bool) -> &'static str {
        match self {
            Request::KernelArgs { .. } => "KernelArgs",
            Request::Rebase { .. } if lock_finalization => "UpdateDeployment",
            Request::Rebase { .. } => "Rebase",
            Request::Packages(_) => "UpdateDeployment",
            Request::Cleanup(_) => "Cleanup",
            Request::Finalize { .. } => "FinalizeDeployment",
            Request::Rollback => "Rollback",
        }
    }
}

impl DbusOsUpdater {
    /// One call of the method behind `request`; returns the transaction address.
    pub(super) async fn call_once(
        &self,
        os: &OsProxy<'_>,
        request: &Request<'_>,
    ) -> Result<String, OsError> {
        let lock = self.config.lock_finalization;
        let method = request.method(lock);
        let reply = match request {
            Request::KernelArgs { existing, change } => {
                // Read the arguments right before each attempt: after waiting for another
                // transaction they may have changed, and rpm-ostree computes the new ones
                // from the string we send.
                let current = self.kargs(KargsTarget::Pending).await?.options;
                if let Some(expected) = existing
                    && *expected != current
                {
                    return Err(OsError::KargsConflict {
                        expected: expected.to_string(),
                        found: current,
                    });
                }
                let mut opts = Options::new();
                if !change.append_if_missing.is_empty() {
                    opts.insert(
                        "append-if-missing",
                        Value::from(strs(&change.append_if_missing)),
                    );
                }
                if !change.delete_if_present.is_empty() {
                    opts.insert(
                        "delete-if-present",
                        Value::from(strs(&change.delete_if_present)),
                    );
                }
                opts.insert("initiating-command-line", self.command_line("kargs"));
                if lock {
                    opts.insert("lock-finalization", Value::from(true));
                }
                os.kernel_args(
                    &current,
                    &strs(&change.append),
                    &strs(&change.replace),
                    &strs(&change.delete),
                    opts,
                )
                .await
            }
            Request::Rebase { refspec } if lock => {
                let modifiers = Options::from([("set-refspec", Value::from(*refspec))]);
                let opts = Options::from([
                    ("lock-finalization", Value::from(true)),
                    ("initiating-command-line", self.command_line("rebase")),
                ]);
                os.update_deployment(modifiers, opts).await
            }
            Request::Rebase { refspec } => os.rebase(Options::new(), refspec, &[]).await,
            Request::Packages(change) => {
                let mut modifiers = Options::new();
                for (key, list) in [
                    ("install-packages", &change.install),
                    ("uninstall-packages", &change.uninstall),
                    ("override-remove-packages", &change.override_remove),
                    ("override-reset-packages", &change.override_reset),
                ] {
                    if !list.is_empty() {
                        modifiers.insert(key, Value::from(strs(list)));
                    }
                }
                // Packages only: never an implicit upgrade of the base.
                let mut opts = Options::from([
                    ("no-pull-base", Value::from(true)),
                    ("initiating-command-line", self.command_line("update")),
                ]);
                if lock {
                    opts.insert("lock-finalization", Value::from(true));
                }
                os.update_deployment(modifiers, opts).await
            }
            Request::Cleanup(elements) => os.cleanup(elements).await,
            Request::Finalize { checksum } => {
                let opts = Options::from([
                    ("checksum", Value::from(*checksum)),
                    (
                        "initiating-command-line",
                        self.command_line("finalize-deployment"),
                    ),
                ]);
                os.finalize_deployment(opts).await
            }
            // No `reboot` option: the agent reboots through its Rebooter, after the files.
            Request::Rollback => os.rollback(Options::new()).await,
        };
        reply.map_err(|e| OsError::call(method, e))
    }
}
