//! Credentials for pulling an image through the container runtime, picked from the kubelet's
//! pull secret (`/var/lib/kubelet/config.json`) as the MCD picks them for pinned images: those
//! of the first pull location of the image that has some (its mirrors, then its registry, per
//! `registries.conf`; each tried as the full location, then as its host), else those of the
//! image's own host, else none (an anonymous pull).

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use serde::Deserialize;

use crate::registries::digest_pull_locations;

/// A user name and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // never the password, not even in a debug log
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The `auths` of a pull secret, by registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullSecret {
    auths: BTreeMap<String, Credentials>,
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    auth: String,
}

impl PullSecret {
    /// Reads a pull secret (`{"auths": {"<registry>": {"auth": "<base64 user:password>"}}}`).
    /// Errors are the MCD's and name the registry of a bad entry, never its secret.
    pub fn parse(text: &str) -> Result<PullSecret, String> {
        let file: File = serde_json::from_str(text)
            .map_err(|e| format!("failed to unmarshal pull secret: {e}"))?;
        let mut auths = BTreeMap::new();
        for (registry, entry) in file.auths {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(entry.auth.as_bytes())
                .map_err(|e| format!("failed to decode auth for registry {registry:?}: {e}"))?;
            let decoded = String::from_utf8_lossy(&decoded);
            let Some((username, password)) = decoded.split_once(':') else {
                return Err(format!("invalid auth for registry {registry:?}"));
            };
            auths.insert(
                registry,
                Credentials {
                    username: username.to_string(),
                    password: password.to_string(),
                },
            );
        }
        Ok(PullSecret { auths })
    }

    fn get(&self, key: &str) -> Option<&Credentials> {
        self.auths.get(key)
    }

    /// The credentials for pulling `image` (a reference by digest), with the mirrors of
    /// `registries_conf` (its text; `None` when there is no such file). Errors name a
    /// registries.conf that cannot be read.
    pub fn for_image(
        &self,
        registries_conf: Option<&str>,
        image: &str,
    ) -> Result<Option<&Credentials>, String> {
        let image = image.trim();
        if let Some(text) = registries_conf {
            for location in digest_pull_locations(text, image)? {
                if let Some(found) = names(&location).iter().find_map(|n| self.get(n)) {
                    return Ok(Some(found));
                }
            }
        }
        Ok(self.get(host(image)))
    }
}

/// A location, then its host alone (`quay.io/ns/repo`, `quay.io`).
fn names(location: &str) -> Vec<&str> {
    let host = host(location);
    if location.is_empty() {
        Vec::new()
    } else if host == location {
        vec![location]
    } else {
        vec![location, host]
    }
}

fn host(reference: &str) -> &str {
    reference.split('/').next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(pairs: &[(&str, &str)]) -> String {
        let auths: BTreeMap<&str, serde_json::Value> = pairs
            .iter()
            .map(|(r, up)| {
                let b64 = base64::engine::general_purpose::STANDARD.encode(up);
                (
                    *r,
                    serde_json::json!({"auth": b64, "email": "x@example.com"}),
                )
            })
            .collect();
        serde_json::json!({ "auths": auths }).to_string()
    }

    const IMAGE: &str = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123";

    #[test]
    fn the_image_host_or_nothing_without_mirrors() {
        let s = PullSecret::parse(&secret(&[("quay.io", "u:p:with:colons")])).unwrap();
        let c = s.for_image(None, IMAGE).unwrap().unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("u", "p:with:colons")
        );
        assert!(!format!("{c:?}").contains("colons"), "no password in Debug");
        assert_eq!(
            s.for_image(None, "registry.local/x@sha256:1").unwrap(),
            None
        );
    }

    #[test]
    fn a_mirror_with_credentials_comes_first() {
        let conf = r#"
[[registry]]
location = "quay.io/openshift-release-dev"
[[registry.mirror]]
location = "mirror-a.local/release"
[[registry.mirror]]
location = "mirror-b.local:5000/release"
"#;
        let s = PullSecret::parse(&secret(&[
            ("quay.io", "quay:q"),
            ("mirror-b.local:5000", "b:b"),
        ]))
        .unwrap();
        let pick = |conf| {
            s.for_image(conf, IMAGE)
                .unwrap()
                .map(|c| c.username.clone())
        };
        assert_eq!(pick(Some(conf)), Some("b".into()), "by the mirror's host");
        let full = PullSecret::parse(&secret(&[
            ("mirror-a.local/release", "full:f"),
            ("mirror-a.local", "host:h"),
        ]))
        .unwrap();
        assert_eq!(
            full.for_image(Some(conf), IMAGE).unwrap().unwrap().username,
            "full",
            "the full location before its host"
        );
        assert_eq!(pick(None), Some("quay".into()));
        assert!(s.for_image(Some("[[registry"), IMAGE).is_err());
    }

    #[test]
    fn bad_pull_secrets_are_named_without_the_secret() {
        assert!(
            PullSecret::parse("{")
                .unwrap_err()
                .starts_with("failed to unmarshal pull secret: ")
        );
        let e = PullSecret::parse(r#"{"auths":{"quay.io":{"auth":"!!!secret"}}}"#).unwrap_err();
        assert!(
            e.starts_with("failed to decode auth for registry \"quay.io\": "),
            "{e}"
        );
        assert!(!e.contains("secret\""), "{e}");
        let no_colon = base64::engine::general_purpose::STANDARD.encode("justuser");
        let e = PullSecret::parse(&format!(
            r#"{{"auths":{{"r.io":{{"auth":"{no_colon}"}}}}}}"#
        ))
        .unwrap_err();
        assert_eq!(e, "invalid auth for registry \"r.io\"");
        assert_eq!(PullSecret::parse("{}").unwrap(), PullSecret::default());
    }
}
