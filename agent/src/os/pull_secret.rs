//! The OS image pull secret, arranged the way the MCD arranges it: rpm-ostree reads registry
//! credentials from `/run/ostree/auth.json`, which is made a symlink to the cluster's merged
//! pull secret (`/etc/mco/internal-registry-pull-secret.json`) when that is there and valid
//! JSON, else to the kubelet's (`/var/lib/kubelet/config.json`).
//!
//! Being a link, it follows every rewrite of the secret file; it is arranged at the daemon's
//! start-up (`/run` is empty after a boot) and again before each OS image pull (an update's
//! rebase, `mco-agent pivot`), so a merged secret that appears,
//! disappears or turns invalid is picked up too. Contents are never read beyond a JSON
//! well-formedness check and never logged: messages name paths only.

use std::path::Path;

use machine_config::mco::paths::{KUBELET_PULL_SECRET, MERGED_PULL_SECRET, OSTREE_AUTH};

use crate::rootfs::{Owner, Root, RootError};

/// What `/run/ostree/auth.json` was left pointing at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullSecret {
    /// The cluster's merged secret.
    Merged,
    /// The kubelet's secret (no usable merged one).
    Kubelet,
    /// Neither exists: the link is removed and images are pulled without credentials.
    None,
}

impl PullSecret {
    /// The file the link points at, if any.
    pub fn path(self) -> Option<&'static str> {
        match self {
            PullSecret::Merged => Some(MERGED_PULL_SECRET),
            PullSecret::Kubelet => Some(KUBELET_PULL_SECRET),
            PullSecret::None => None,
        }
    }
}

/// Points `/run/ostree/auth.json` in `root` at the secret to use (see the module docs); does
/// nothing when it already does. Errors name the path that could not be read or written.
pub fn arrange_pull_secret(root: &Root) -> Result<PullSecret, RootError> {
    let choice = match usable(root, MERGED_PULL_SECRET)? {
        Usable::Yes => PullSecret::Merged,
        other => {
            let why = match other {
                Usable::Missing => "Merged secret file does not exist",
                _ => "Merged secret file could not be validated",
            };
            if root.lstat(Path::new(KUBELET_PULL_SECRET))?.is_some() {
                tracing::info!(
                    secret = KUBELET_PULL_SECRET,
                    "{why}; defaulting to cluster pull secret"
                );
                PullSecret::Kubelet
            } else {
                tracing::warn!(
                    "{why} and {KUBELET_PULL_SECRET} neither: OS images are pulled without credentials"
                );
                PullSecret::None
            }
        }
    };
    let auth = Path::new(OSTREE_AUTH);
    let current = match root.lstat(auth)? {
        Some(_) => root.read_link(auth).ok().flatten(),
        None => None,
    };
    match choice.path() {
        Some(target) if current.as_deref() == Some(Path::new(target)) => {}
        Some(target) => {
            tracing::info!(
                authfile = OSTREE_AUTH,
                secret = target,
                "Linking rpm-ostree authfile to {target}"
            );
            root.symlink(auth, Path::new(target), Owner::ROOT)?;
        }
        None => {
            if root.remove_file(auth)? {
                tracing::info!(
                    authfile = OSTREE_AUTH,
                    "removed: no pull secret to point it at"
                );
            }
        }
    }
    Ok(choice)
}

enum Usable {
    Yes,
    Missing,
    Invalid,
}

/// Whether `path` is a readable JSON document (its contents go nowhere else).
fn usable(root: &Root, path: &str) -> Result<Usable, RootError> {
    match root.read(Path::new(path)) {
        Ok(None) => Ok(Usable::Missing),
        Ok(Some(bytes)) => Ok(
            if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok() {
                Usable::Yes
            } else {
                Usable::Invalid
            },
        ),
        // Unreadable (e.g. a directory): the kubelet's secret is used, as the MCD does.
        Err(e) if !e.is_not_found() => {
            tracing::warn!(secret = path, error = %e, "could not read the merged pull secret");
            Ok(Usable::Invalid)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = r#"{"auths":{"registry.example":{"auth":"c2VjcmV0OnZhbHVl"}}}"#;

    fn write(root: &Root, path: &str, text: &str) {
        root.write_atomic(Path::new(path), text.as_bytes(), 0o600, Owner::ROOT)
            .unwrap();
    }

    #[test]
    fn the_link_follows_the_secret_files() {
        struct Case {
            name: &'static str,
            merged: Option<&'static str>,
            kubelet: bool,
            want: PullSecret,
        }
        let cases = [
            Case {
                name: "merged secret",
                merged: Some(SECRET),
                kubelet: true,
                want: PullSecret::Merged,
            },
            Case {
                name: "merged only",
                merged: Some(SECRET),
                kubelet: false,
                want: PullSecret::Merged,
            },
            Case {
                name: "no merged secret",
                merged: None,
                kubelet: true,
                want: PullSecret::Kubelet,
            },
            Case {
                name: "invalid merged secret",
                merged: Some("{not json"),
                kubelet: true,
                want: PullSecret::Kubelet,
            },
            Case {
                name: "no secret at all",
                merged: None,
                kubelet: false,
                want: PullSecret::None,
            },
        ];
        for c in cases {
            let dir = tempfile::tempdir().unwrap();
            let root = Root::open(dir.path()).unwrap();
            // A link from before points elsewhere: it is replaced (or removed).
            root.symlink(Path::new(OSTREE_AUTH), Path::new("/elsewhere"), Owner::ROOT)
                .unwrap();
            if let Some(m) = c.merged {
                write(&root, MERGED_PULL_SECRET, m);
            }
            if c.kubelet {
                write(&root, KUBELET_PULL_SECRET, SECRET);
            }
            assert_eq!(arrange_pull_secret(&root).unwrap(), c.want, "{}", c.name);
            let link = root.read_link(Path::new(OSTREE_AUTH)).unwrap();
            assert_eq!(link.as_deref(), c.want.path().map(Path::new), "{}", c.name);
            if c.want != PullSecret::None {
                // rpm-ostree reads the secret through the link.
                let through = root.read(Path::new(OSTREE_AUTH)).unwrap().unwrap();
                assert!(!through.is_empty(), "{}", c.name);
            }
            // Arranging again changes nothing.
            assert_eq!(arrange_pull_secret(&root).unwrap(), c.want, "{}", c.name);
        }
    }

    #[test]
    fn a_merged_secret_that_appears_later_takes_over() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        write(&root, KUBELET_PULL_SECRET, SECRET);
        assert_eq!(arrange_pull_secret(&root).unwrap(), PullSecret::Kubelet);
        write(&root, MERGED_PULL_SECRET, SECRET);
        assert_eq!(arrange_pull_secret(&root).unwrap(), PullSecret::Merged);
        // A rewrite of the secret is seen through the link without arranging again.
        let rotated = r#"{"auths":{"other.example":{"auth":"eDp5"}}}"#;
        write(&root, MERGED_PULL_SECRET, rotated);
        assert_eq!(
            root.read(Path::new(OSTREE_AUTH)).unwrap().unwrap(),
            rotated.as_bytes()
        );
    }
}
