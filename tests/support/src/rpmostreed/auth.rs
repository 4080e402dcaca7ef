//! Registry credentials, as far as the stand-in checks them: rpm-ostree pulls an OS image with
//! the credentials of `/run/ostree/auth.json` (a containers-auth.json file). The stand-in has no
//! registry, so a test names the registries that need credentials; a pull from one of them is
//! refused, as the registry would refuse it, unless the auth file holds an entry for it. A
//! missing or wrong pull secret then fails the test instead of passing unnoticed.

use std::path::{Path, PathBuf};

/// Where the auth file is looked for, inside [`RegistryAuth::root`].
pub const AUTH_FILE: &str = "run/ostree/auth.json";

/// Which registries need credentials, and the root whose `/run/ostree/auth.json` holds them.
#[derive(Debug, Clone, Default)]
pub struct RegistryAuth {
    /// The root of the auth file: `/` on a booted system, the node's root in tests. Absolute
    /// symlinks (the agent links the file to the pull secret) resolve inside it.
    pub root: PathBuf,
    /// Registry hosts (`registry.example`, `registry.example:5000`) that refuse anonymous pulls.
    pub required: Vec<String>,
}

impl RegistryAuth {
    /// Ok when `image` (a name without transport) may be pulled: its registry needs no
    /// credentials, or the auth file has some for it. The error is the pull's failure.
    pub fn check(&self, image: &str) -> Result<(), String> {
        let registry = registry_of(image);
        if !self.required.iter().any(|r| r == registry) {
            return Ok(());
        }
        let path = self.root.join(AUTH_FILE);
        let refused = |why: String| {
            Err(format!(
                "Pulling manifest: reading manifest of {image}: unauthorized: authentication required ({why})"
            ))
        };
        let text = match self.read_following_links(&path) {
            Ok(Some(t)) => t,
            Ok(None) => return refused(format!("no credentials: /{AUTH_FILE} does not exist")),
            Err(e) => return refused(format!("/{AUTH_FILE}: {e}")),
        };
        let doc: serde_json::Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => return refused(format!("/{AUTH_FILE} is not JSON: {e}")),
        };
        let has = doc
            .get("auths")
            .and_then(|a| a.as_object())
            .is_some_and(|auths| {
                auths.iter().any(|(key, entry)| {
                    let key = key
                        .trim_start_matches("https://")
                        .trim_start_matches("http://");
                    let scope_matches = key == registry
                        || key
                            .strip_prefix(registry)
                            .is_some_and(|rest| rest.starts_with('/') && image.starts_with(key));
                    let non_empty = |k: &str| {
                        entry
                            .get(k)
                            .and_then(|v| v.as_str())
                            .is_some_and(|s| !s.is_empty())
                    };
                    scope_matches && (non_empty("auth") || non_empty("username"))
                })
            });
        if has {
            Ok(())
        } else {
            refused(format!("no credentials for {registry} in /{AUTH_FILE}"))
        }
    }

    /// Reads `path`, following symlinks with absolute targets inside [`Self::root`].
    fn read_following_links(&self, path: &Path) -> std::io::Result<Option<String>> {
        let mut path = path.to_path_buf();
        for _ in 0..8 {
            match std::fs::symlink_metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
                Ok(m) if m.file_type().is_symlink() => {
                    let target = std::fs::read_link(&path)?;
                    path = match target.strip_prefix("/") {
                        Ok(inside) => self.root.join(inside),
                        Err(_) => path.parent().unwrap_or(Path::new("/")).join(target),
                    };
                }
                Ok(_) => return std::fs::read_to_string(&path).map(Some),
            }
        }
        Err(std::io::Error::other("too many levels of symbolic links"))
    }
}

/// The registry host of an image name, as containers/image reads it: the first component when
/// it looks like a host (has a `.` or `:`, or is `localhost`), else `docker.io`.
pub fn registry_of(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            first
        }
        _ => "docker.io",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "registry.example/ocl/os@sha256:0123";

    fn auth(dir: &Path) -> RegistryAuth {
        RegistryAuth {
            root: dir.to_path_buf(),
            required: vec!["registry.example".into()],
        }
    }

    #[test]
    fn registries() {
        assert_eq!(registry_of(IMAGE), "registry.example");
        assert_eq!(registry_of("localhost/x:1"), "localhost");
        assert_eq!(registry_of("host:5000/x"), "host:5000");
        assert_eq!(registry_of("library/fedora"), "docker.io");
    }

    #[test]
    fn pulls_need_credentials_for_the_registries_that_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let a = auth(dir.path());
        assert!(
            a.check("quay.io/open/os@sha256:1").is_ok(),
            "anonymous registry"
        );
        let e = a.check(IMAGE).unwrap_err();
        assert!(
            e.contains("unauthorized") && e.contains("does not exist"),
            "{e}"
        );
        // The agent's link: an absolute path resolved inside the root.
        let secret = dir.path().join("etc/mco/secret.json");
        std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
        std::fs::create_dir_all(dir.path().join("run/ostree")).unwrap();
        std::os::unix::fs::symlink("/etc/mco/secret.json", dir.path().join(AUTH_FILE)).unwrap();
        assert!(a.check(IMAGE).unwrap_err().contains("does not exist"));
        std::fs::write(&secret, r#"{"auths":{"other.example":{"auth":"eDp5"}}}"#).unwrap();
        let e = a.check(IMAGE).unwrap_err();
        assert!(e.contains("no credentials for registry.example"), "{e}");
        std::fs::write(
            &secret,
            r#"{"auths":{"registry.example/ocl":{"auth":"eDp5"}}}"#,
        )
        .unwrap();
        assert!(a.check(IMAGE).is_ok());
        std::fs::write(&secret, r#"{"auths":{"registry.example":{"auth":""}}}"#).unwrap();
        assert!(a.check(IMAGE).is_err(), "an empty entry is no credential");
        std::fs::write(&secret, "{").unwrap();
        assert!(a.check(IMAGE).unwrap_err().contains("not JSON"));
    }
}
