//! Deployment origins as rpm-ostree writes them, and how the stand-in maps container image
//! references to local ostree commits.
//!
//! An origin is a GLib key file. rpm-ostree records the base in `[origin]` as `refspec=` (an
//! ostree ref), `baserefspec=` (the same when packages are layered or overridden on top) or
//! `container-image-reference=` (e.g. `ostree-unverified-registry:quay.io/x/y@sha256:...`);
//! layered packages in `[packages] requested=` and removed base packages in
//! `[overrides] remove=`, both as sorted `a;b;` lists.
//!
//! There is no registry here, so the stand-in resolves an image reference to a commit that is
//! already in the sysroot's repository, in this order:
//! 1. the `--image-map FILE` entries: one `IMAGE REV` pair per line (`#` starts a comment),
//!    where IMAGE is the whole refspec (`ostree-unverified-registry:quay.io/x@sha256:...`) or the
//!    bare image name after the transport (`quay.io/x@sha256:...`), and REV an ostree ref or
//!    checksum; the file is re-read on every lookup so tests can add entries while it runs;
//! 2. for an image pinned by digest, the ostree ref `mco-image/sha256/<hex digest>`.
//!
//! An image found by neither fails the transaction, naming the image.

use std::collections::BTreeSet;
use std::path::Path;

use ostree::glib;

/// The prefix of the ostree ref the stand-in looks for when an image is pinned by digest.
pub const IMAGE_REF_PREFIX: &str = "mco-image/sha256/";

/// The transports of ostree container image references (ostree-ext's `OstreeImageReference`).
const CONTAINER_PREFIXES: &[&str] = &[
    "ostree-unverified-registry:",
    "ostree-unverified-image:",
    "ostree-remote-registry:",
    "ostree-remote-image:",
    "ostree-image-signed:",
];

/// What a deployment is based on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// An ostree refspec (`[remote:]ref`) or a commit checksum.
    Ostree(String),
    /// An ostree container image reference.
    Container(String),
}

impl Base {
    /// Classifies a refspec the way rpm-ostree does: container references by their transport.
    pub fn classify(refspec: &str) -> Self {
        if is_container_reference(refspec) {
            Base::Container(refspec.to_string())
        } else {
            Base::Ostree(refspec.to_string())
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Base::Ostree(s) | Base::Container(s) => s,
        }
    }
}

/// True for `ostree-unverified-registry:...` and the other container transports.
pub fn is_container_reference(refspec: &str) -> bool {
    CONTAINER_PREFIXES.iter().any(|p| refspec.starts_with(p))
}

/// True for an image in local container storage
/// (`ostree-unverified-image:containers-storage:...` and the other ostree transports).
pub fn is_local_storage(refspec: &str) -> bool {
    is_container_reference(refspec)
        && refspec
            .split_once(':')
            .is_some_and(|(_, rest)| rest.starts_with("containers-storage:"))
}

/// The image name inside an ostree container reference, without the ostree and containers
/// transports: `ostree-unverified-image:containers-storage:quay.io/x@sha256:..` gives
/// `quay.io/x@sha256:..`.
pub fn image_name(refspec: &str) -> &str {
    let rest = if let Some(r) = refspec.strip_prefix("ostree-unverified-registry:") {
        return r;
    } else if let Some(r) = refspec.strip_prefix("ostree-remote-registry:") {
        // REMOTE:IMAGE
        return r.split_once(':').map(|(_, i)| i).unwrap_or(r);
    } else if let Some(r) = refspec.strip_prefix("ostree-unverified-image:") {
        r
    } else if let Some(r) = refspec.strip_prefix("ostree-image-signed:") {
        r
    } else if let Some(r) = refspec.strip_prefix("ostree-remote-image:") {
        r.split_once(':').map(|(_, i)| i).unwrap_or(r)
    } else {
        return refspec;
    };
    // TRANSPORT:IMAGE, where docker:// carries its own slashes.
    if let Some(i) = rest.strip_prefix("docker://") {
        return i;
    }
    for t in [
        "registry:",
        "containers-storage:",
        "oci:",
        "oci-archive:",
        "docker-archive:",
        "dir:",
    ] {
        if let Some(i) = rest.strip_prefix(t) {
            return i;
        }
    }
    rest
}

/// The `sha256:<hex>` digest an image name is pinned to, if any.
pub fn image_digest(image: &str) -> Option<&str> {
    let (_, digest) = image.rsplit_once('@')?;
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(digest)
}

/// Where the stand-in looks for the commit of `refspec`: the `--image-map` revision when the
/// file names it, then the digest-derived ref. Returns the candidates in lookup order.
pub fn image_candidates(refspec: &str, image_map: Option<&Path>) -> Result<Vec<String>, String> {
    let name = image_name(refspec);
    let mut out = Vec::new();
    if let Some(map) = image_map {
        let text = std::fs::read_to_string(map)
            .map_err(|e| format!("reading image map {}: {e}", map.display()))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut fields = line.split_whitespace();
            let (Some(image), Some(rev), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(format!(
                    "image map {} line {}: expected \"IMAGE REV\", got {line:?}",
                    map.display(),
                    n + 1
                ));
            };
            if image == refspec || image == name {
                out.push(rev.to_string());
            }
        }
    }
    if let Some(digest) = image_digest(name) {
        out.push(format!(
            "{IMAGE_REF_PREFIX}{}",
            digest.trim_start_matches("sha256:")
        ));
    }
    Ok(out)
}

/// A deployment origin: a key file with rpm-ostree's groups and keys.
pub struct Origin {
    kf: glib::KeyFile,
}

impl Origin {
    /// Wraps a copy of `kf`.
    pub fn from_keyfile(kf: &glib::KeyFile) -> Result<Self, String> {
        let copy = glib::KeyFile::new();
        copy.load_from_data(&kf.to_data(), glib::KeyFileFlags::KEEP_COMMENTS)
            .map_err(|e| format!("Parsing origin: {e}"))?;
        Ok(Self { kf: copy })
    }

    /// Parses origin text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let kf = glib::KeyFile::new();
        kf.load_from_data(text, glib::KeyFileFlags::KEEP_COMMENTS)
            .map_err(|e| format!("Parsing origin: {e}"))?;
        Ok(Self { kf })
    }

    pub fn keyfile(&self) -> &glib::KeyFile {
        &self.kf
    }

    pub fn to_text(&self) -> String {
        self.kf.to_data().to_string()
    }

    /// The base, with rpm-ostree's errors for none or both.
    pub fn base(&self) -> Result<Base, String> {
        let refspec = self
            .get("origin", "refspec")
            .or_else(|| self.get("origin", "baserefspec"));
        let image = self.get("origin", "container-image-reference");
        match (refspec, image) {
            (Some(_), Some(_)) => {
                Err("Parsing origin: Found both refspec/baserefspec and container-image-reference".into())
            }
            (None, None) => Err(
                "Parsing origin: Failed to find refspec/baserefspec/container-image-reference in origin"
                    .into(),
            ),
            (Some(r), None) => Ok(Base::Ostree(r)),
            (None, Some(i)) => Ok(Base::Container(i)),
        }
    }

    /// Layered package requests (`[packages] requested`).
    pub fn requested_packages(&self) -> BTreeSet<String> {
        self.list("packages", "requested")
    }

    /// Base package removals (`[overrides] remove`).
    pub fn override_removals(&self) -> BTreeSet<String> {
        self.list("overrides", "remove")
    }

    /// `[origin] custom-url` and `custom-description`.
    pub fn custom_origin(&self) -> Option<(String, String)> {
        let url = self.get("origin", "custom-url")?;
        Some((
            url,
            self.get("origin", "custom-description").unwrap_or_default(),
        ))
    }

    /// Rewrites the base and the package sets. An ostree base is written as `baserefspec` when
    /// packages are layered or overridden, as rpm-ostree does.
    pub fn set(&mut self, base: &Base, requested: &BTreeSet<String>, removals: &BTreeSet<String>) {
        for key in ["refspec", "baserefspec", "container-image-reference"] {
            let _ = self.kf.remove_key("origin", key);
        }
        match base {
            Base::Container(r) => self.kf.set_string("origin", "container-image-reference", r),
            Base::Ostree(r) => {
                let key = if requested.is_empty() && removals.is_empty() {
                    "refspec"
                } else {
                    "baserefspec"
                };
                self.kf.set_string("origin", key, r)
            }
        }
        self.set_list("packages", "requested", requested);
        self.set_list("overrides", "remove", removals);
    }

    /// Records a deploy of a specific commit (`[origin] override-commit`).
    pub fn set_override_commit(&mut self, checksum: Option<&str>) {
        match checksum {
            Some(c) => self.kf.set_string("origin", "override-commit", c),
            None => {
                let _ = self.kf.remove_key("origin", "override-commit");
            }
        }
    }

    fn get(&self, group: &str, key: &str) -> Option<String> {
        self.kf.string(group, key).ok().map(|s| s.to_string())
    }

    fn list(&self, group: &str, key: &str) -> BTreeSet<String> {
        self.kf
            .string_list(group, key)
            .map(|v| {
                v.iter()
                    .map(|s| s.to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn set_list(&mut self, group: &str, key: &str, items: &BTreeSet<String>) {
        if items.is_empty() {
            let _ = self.kf.remove_key(group, key);
            if self.kf.keys(group).map(|k| k.is_empty()).unwrap_or(false) {
                let _ = self.kf.remove_group(group);
            }
        } else {
            let joined: String = items.iter().map(|s| format!("{s};")).collect();
            self.kf.set_value(group, key, &joined);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn image_names_lose_their_transports() {
        let img = format!("quay.io/openshift/rhcos@{DIGEST}");
        assert!(is_local_storage(&format!(
            "ostree-unverified-image:containers-storage:{img}"
        )));
        assert!(!is_local_storage(&format!(
            "ostree-unverified-registry:{img}"
        )));
        assert!(!is_local_storage(&format!(
            "ostree-unverified-image:docker://{img}"
        )));
        assert!(!is_local_storage("containers-storage:x"));
        for (refspec, want) in [
            (format!("ostree-unverified-registry:{img}"), img.as_str()),
            (
                format!("ostree-unverified-image:containers-storage:{img}"),
                img.as_str(),
            ),
            (
                format!("ostree-unverified-image:docker://{img}"),
                img.as_str(),
            ),
            (format!("ostree-remote-registry:fedora:{img}"), img.as_str()),
            (
                format!("ostree-remote-image:fedora:registry:{img}"),
                img.as_str(),
            ),
            (format!("ostree-image-signed:registry:{img}"), img.as_str()),
        ] {
            assert!(is_container_reference(&refspec));
            assert_eq!(image_name(&refspec), want, "{refspec}");
        }
        assert!(!is_container_reference(
            "fedora:fedora/x86_64/coreos/stable"
        ));
        assert_eq!(image_digest(&img), Some(DIGEST));
        assert_eq!(image_digest("quay.io/x:latest"), None);
        assert_eq!(image_digest("quay.io/x@sha256:abc"), None);
    }

    #[test]
    fn image_candidates_check_the_map_then_the_digest_ref() {
        let dir = tempfile::tempdir().unwrap();
        let map = dir.path().join("images");
        let img = format!("quay.io/x@{DIGEST}");
        std::fs::write(
            &map,
            format!(
                "# test images\nquay.io/tagged:latest fakeos/v2\n{img} fakeos/v3  # by name\nostree-unverified-registry:{img} fakeos/v4\n"
            ),
        )
        .unwrap();
        let c = image_candidates(&format!("ostree-unverified-registry:{img}"), Some(&map)).unwrap();
        assert_eq!(
            c,
            [
                "fakeos/v3".to_string(),
                "fakeos/v4".into(),
                format!("{IMAGE_REF_PREFIX}{}", &DIGEST[7..])
            ]
        );
        let c = image_candidates(
            "ostree-unverified-registry:quay.io/tagged:latest",
            Some(&map),
        )
        .unwrap();
        assert_eq!(c, ["fakeos/v2"]);
        assert!(
            image_candidates("ostree-unverified-registry:quay.io/other:1", Some(&map))
                .unwrap()
                .is_empty()
        );
        std::fs::write(&map, "just-one-field\n").unwrap();
        let e = image_candidates("ostree-unverified-registry:quay.io/x:1", Some(&map)).unwrap_err();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn origin_round_trips_rpm_ostree_keys() {
        let mut o = Origin::parse("[origin]\nrefspec=fakeos/stable\n").unwrap();
        assert_eq!(o.base().unwrap(), Base::Ostree("fakeos/stable".into()));
        let pkgs: BTreeSet<String> = ["kernel-rt-core", "kernel-rt-modules"]
            .map(String::from)
            .into();
        let removals: BTreeSet<String> = ["kernel", "kernel-core"].map(String::from).into();
        o.set(&Base::Ostree("fakeos/stable".into()), &pkgs, &removals);
        let text = o.to_text();
        assert!(text.contains("baserefspec=fakeos/stable"), "{text}");
        assert!(
            text.contains("requested=kernel-rt-core;kernel-rt-modules;"),
            "{text}"
        );
        assert!(
            text.contains("[overrides]\nremove=kernel;kernel-core;"),
            "{text}"
        );
        let back = Origin::parse(&text).unwrap();
        assert_eq!(back.requested_packages(), pkgs);
        assert_eq!(back.override_removals(), removals);

        let img = format!("ostree-unverified-registry:quay.io/x@{DIGEST}");
        o.set(
            &Base::Container(img.clone()),
            &BTreeSet::new(),
            &BTreeSet::new(),
        );
        let text = o.to_text();
        assert!(!text.contains("refspec"), "{text}");
        assert!(!text.contains("[packages]"), "{text}");
        assert_eq!(
            Origin::parse(&text).unwrap().base().unwrap(),
            Base::Container(img)
        );
    }

    #[test]
    fn origin_without_or_with_two_bases_is_an_error() {
        let e = Origin::parse("[origin]\n").unwrap().base().unwrap_err();
        assert!(e.contains("Failed to find refspec"), "{e}");
        let e = Origin::parse(
            "[origin]\nrefspec=a\ncontainer-image-reference=ostree-unverified-registry:b\n",
        )
        .unwrap()
        .base()
        .unwrap_err();
        assert!(e.contains("Found both"), "{e}");
    }
}
