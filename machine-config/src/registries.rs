//! `/etc/containers/registries.conf` "safe change" analysis: a change that only adds
//! digest-only mirrors or registries needs no drain (the MCD's rule for the `Special` action).
//! Both file formats are read: v2 (`[[registry]]`) and v1 (`[registries.search]` ...), the
//! latter converted the way containers/image converts it.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Path of the file.
pub const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";

const DIGEST_ONLY: &str = "digest-only";

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
struct File {
    unqualified_search_registries: Vec<String>,
    registry: Vec<Registry>,
    registries: Option<V1>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1 {
    search: V1List,
    insecure: V1List,
    block: V1List,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1List {
    registries: Vec<String>,
}

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
struct Registry {
    prefix: String,
    location: String,
    insecure: bool,
    blocked: bool,
    mirror_by_digest_only: bool,
    mirror: Vec<Mirror>,
}

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
struct Mirror {
    location: String,
    insecure: bool,
    pull_from_mirror: String,
}

/// A TOML error as where and what, without the excerpt of the file that `toml`'s own message
/// quotes and without the quoted values its message may hold (`invalid type: string "…"`):
/// a registries.conf line may hold a mirror's credentials (`location = "user:pass@host"`).
fn toml_error_without_values(text: &str, e: &toml::de::Error) -> String {
    let mut message = String::new();
    let mut quoted = false;
    for c in e.message().trim().chars() {
        if c == '"' {
            if !quoted {
                message.push_str("\"…\"");
            }
            quoted = !quoted;
        } else if !quoted {
            message.push(c);
        }
    }
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// The registries of one file, keyed by prefix (or location).
struct Conf {
    search: Vec<String>,
    registries: BTreeMap<String, Registry>,
}

fn parse(text: &str) -> Result<Conf, String> {
    let file: File = toml::from_str(text).map_err(|e| {
        format!(
            "failed decoding TOML content from file {REGISTRIES_CONF}: {}",
            toml_error_without_values(text, &e)
        )
    })?;
    let mut search = file.unqualified_search_registries;
    let mut list = file.registry;
    if let Some(v1) = file.registries {
        if !list.is_empty() || !search.is_empty() {
            return Err(format!(
                "{REGISTRIES_CONF}: mixing sysregistry v1/v2 is not supported"
            ));
        }
        search = v1.search.registries;
        let mut by_location: BTreeMap<String, Registry> = BTreeMap::new();
        for loc in v1.insecure.registries {
            by_location
                .entry(loc.clone())
                .or_insert_with(|| Registry {
                    location: loc,
                    ..Registry::default()
                })
                .insecure = true;
        }
        for loc in v1.block.registries {
            by_location
                .entry(loc.clone())
                .or_insert_with(|| Registry {
                    location: loc,
                    ..Registry::default()
                })
                .blocked = true;
        }
        list = by_location.into_values().collect();
    }
    let registries = list
        .into_iter()
        .map(|r| {
            let scope = if r.prefix.is_empty() {
                r.location.clone()
            } else {
                r.prefix.clone()
            };
            (scope, r)
        })
        .collect();
    Ok(Conf { search, registries })
}

fn all_digest_only(r: &Registry) -> bool {
    if r.mirror.is_empty() {
        r.mirror_by_digest_only
    } else {
        r.mirror.iter().all(|m| m.pull_from_mirror == DIGEST_ONLY)
    }
}

/// `Ok(None)` when moving from `old` to `new` (file contents; empty when absent) is safe without
/// a drain, `Ok(Some(why))` when it is not, `Err` when a file cannot be parsed.
pub fn unsafe_change(old: &str, new: &str) -> Result<Option<String>, String> {
    let (old, new) = (parse(old)?, parse(new)?);
    if !new.search.starts_with(&old.search) {
        return Ok(Some(
            "unqualified-search-registries was changed other than by appending".into(),
        ));
    }
    if let Some(scope) = old
        .registries
        .keys()
        .find(|k| !new.registries.contains_key(*k))
    {
        return Ok(Some(format!("registry {scope} has been removed")));
    }
    for (scope, n) in &new.registries {
        let Some(o) = old.registries.get(scope) else {
            if !all_digest_only(n) {
                return Ok(Some(format!(
                    "registry {scope} has been added with mirror does not set pull-from-mirror=digest-only"
                )));
            }
            continue;
        };
        if o == n {
            continue;
        }
        let fields = [
            ("prefix", o.prefix != n.prefix),
            ("location", o.location != n.location),
            ("blocked", o.blocked != n.blocked),
            ("insecure", o.insecure != n.insecure),
        ];
        if let Some((field, _)) = fields.iter().find(|(_, changed)| *changed) {
            return Ok(Some(format!(
                "{field} value for registry {scope} has changed"
            )));
        }
        let find = |list: &[Mirror], loc: &str| list.iter().find(|m| m.location == loc).cloned();
        if let Some(m) = o
            .mirror
            .iter()
            .find(|m| find(&n.mirror, &m.location).is_none())
        {
            return Ok(Some(format!(
                "mirror {} has been removed in registry {scope}",
                m.location
            )));
        }
        for m in &n.mirror {
            match find(&o.mirror, &m.location) {
                Some(old_m)
                    if m.pull_from_mirror != old_m.pull_from_mirror
                        && m.pull_from_mirror != DIGEST_ONLY =>
                {
                    return Ok(Some(format!(
                        "pull-from-mirror value for mirror {} has changed from {:?} to {:?}",
                        m.location, old_m.pull_from_mirror, m.pull_from_mirror
                    )));
                }
                Some(_) => {}
                None if m.pull_from_mirror != DIGEST_ONLY && !n.mirror_by_digest_only => {
                    return Ok(Some(format!(
                        "mirror {} has been added in registry {scope} that has pull-from-mirror set to {:?}",
                        m.location, m.pull_from_mirror
                    )));
                }
                None => {}
            }
        }
    }
    Ok(None)
}

/// How far `prefix` matches the reference `image` (containers/image's rule): the whole
/// prefix, followed by the end or one of `:`, `/`, `@`; a `*.example.com` prefix matches any
/// subdomain of the reference's host. `None` when it does not match.
fn matching_prefix(image: &str, prefix: &str) -> Option<usize> {
    let boundary =
        |at: usize| at == image.len() || matches!(image.as_bytes()[at], b':' | b'/' | b'@');
    if let Some(domain) = prefix.strip_prefix('*') {
        let index = image.find(domain)?;
        if image[..index].contains('/') {
            return None;
        }
        let end = index + domain.len();
        return boundary(end).then_some(end);
    }
    (image.starts_with(prefix) && boundary(prefix.len())).then_some(prefix.len())
}

/// Where a pull of `image` (a reference by digest) goes, in order, per the registries.conf
/// `text`: the locations of the mirrors of the registry entry matching it best (the longest
/// prefix), except mirrors for tag pulls only, then the entry's own location. Empty when no
/// entry matches (the image's own registry, with nothing configured).
pub fn digest_pull_locations(text: &str, image: &str) -> Result<Vec<String>, String> {
    let conf = parse(text)?;
    let best = conf
        .registries
        .iter()
        .filter_map(|(scope, r)| matching_prefix(image, scope).map(|n| (n, r)))
        .max_by_key(|(n, _)| *n);
    let Some((_, registry)) = best else {
        return Ok(Vec::new());
    };
    let mut out: Vec<String> = registry
        .mirror
        .iter()
        .filter(|m| m.pull_from_mirror != "tag-only")
        .map(|m| m.location.clone())
        .collect();
    out.push(registry.location.clone());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_locations_of_a_digest_reference() {
        let conf = r#"
[[registry]]
prefix = ""
location = "quay.io/openshift-release-dev/ocp-v4.0-art-dev"
[[registry.mirror]]
location = "mirror.local/art"
pull-from-mirror = "digest-only"
[[registry.mirror]]
location = "tags.local/art"
pull-from-mirror = "tag-only"

[[registry]]
location = "quay.io/openshift-release-dev"
[[registry.mirror]]
location = "mirror.local/release"

[[registry]]
prefix = "*.example.com"
location = ""
[[registry.mirror]]
location = "mirror.local/example"
"#;
        let d = "@sha256:0123";
        let at = |image: &str| digest_pull_locations(conf, &format!("{image}{d}")).unwrap();
        assert_eq!(
            at("quay.io/openshift-release-dev/ocp-v4.0-art-dev"),
            [
                "mirror.local/art",
                "quay.io/openshift-release-dev/ocp-v4.0-art-dev"
            ]
        );
        assert_eq!(
            at("quay.io/openshift-release-dev/ocp-release"),
            ["mirror.local/release", "quay.io/openshift-release-dev"],
            "a namespace entry covers its repositories (the longest prefix wins)"
        );
        assert_eq!(at("registry.example.com/x/y"), ["mirror.local/example", ""]);
        assert!(at("quay.io/openshift-release-dev-other/x").is_empty());
        assert!(at("example.com/x").is_empty());
        assert!(digest_pull_locations("[[registry", "a/b").is_err());
    }

    const BASE: &str = r#"
unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]
[[registry]]
prefix = "quay.io/openshift"
location = "quay.io/openshift"
mirror-by-digest-only = true
[[registry.mirror]]
location = "mirror.local/openshift"
pull-from-mirror = "digest-only"
"#;

    fn with(extra: &str) -> String {
        format!("{BASE}{extra}")
    }

    #[test]
    fn safe_changes() {
        let cases: Vec<(&str, String, String)> = vec![
            ("identical", BASE.into(), BASE.into()),
            (
                "appended search registry",
                BASE.into(),
                BASE.replace("\"docker.io\"]", "\"docker.io\", \"quay.io\"]"),
            ),
            (
                "added digest-only mirror",
                BASE.into(),
                with("[[registry.mirror]]\nlocation = \"m2.local/o\"\npull-from-mirror = \"digest-only\"\n"),
            ),
            (
                "added mirror to a mirror-by-digest-only registry",
                BASE.into(),
                with("[[registry.mirror]]\nlocation = \"m3.local/o\"\n"),
            ),
            (
                "added registry whose mirrors are all digest-only",
                BASE.into(),
                with("[[registry]]\nlocation = \"r.io\"\n[[registry.mirror]]\nlocation = \"m.local/r\"\npull-from-mirror = \"digest-only\"\n"),
            ),
            (
                "added registry without mirrors but mirror-by-digest-only",
                BASE.into(),
                with("[[registry]]\nlocation = \"r.io\"\nmirror-by-digest-only = true\n"),
            ),
            ("from no file", String::new(), "[[registry]]\nlocation = \"r.io\"\nmirror-by-digest-only = true\n".into()),
            (
                "v1 to equivalent v2",
                "[registries.search]\nregistries = ['docker.io']\n[registries.insecure]\nregistries = ['insecure.io']\n".into(),
                "unqualified-search-registries = ['docker.io', 'quay.io']\n[[registry]]\nlocation = 'insecure.io'\ninsecure = true\n".into(),
            ),
        ];
        for (name, old, new) in cases {
            assert_eq!(unsafe_change(&old, &new), Ok(None), "{name}");
        }
    }

    #[test]
    fn unsafe_changes() {
        let cases: Vec<(String, String, &str)> = vec![
            (
                BASE.into(),
                BASE.replace(
                    "[\"registry.access.redhat.com\", \"docker.io\"]",
                    "[\"docker.io\"]",
                ),
                "unqualified-search-registries was changed other than by appending",
            ),
            (
                BASE.into(),
                "unqualified-search-registries = [\"registry.access.redhat.com\", \"docker.io\"]\n"
                    .into(),
                "registry quay.io/openshift has been removed",
            ),
            (
                BASE.into(),
                BASE.replace(
                    "location = \"quay.io/openshift\"",
                    "location = \"other.io/x\"",
                ),
                "location value for registry quay.io/openshift has changed",
            ),
            (
                BASE.into(),
                BASE.replace(
                    "mirror-by-digest-only = true",
                    "mirror-by-digest-only = true\nblocked = true",
                ),
                "blocked value for registry quay.io/openshift has changed",
            ),
            (
                BASE.into(),
                BASE.replace(
                    "mirror-by-digest-only = true",
                    "mirror-by-digest-only = true\ninsecure = true",
                ),
                "insecure value for registry quay.io/openshift has changed",
            ),
            (
                BASE.into(),
                BASE.replace("mirror.local/openshift", "elsewhere.local/openshift"),
                "mirror mirror.local/openshift has been removed in registry quay.io/openshift",
            ),
            (
                BASE.into(),
                BASE.replace(
                    "pull-from-mirror = \"digest-only\"",
                    "pull-from-mirror = \"all\"",
                ),
                "pull-from-mirror value for mirror mirror.local/openshift has changed from \"digest-only\" to \"all\"",
            ),
            (
                BASE.replace("mirror-by-digest-only = true\n", ""),
                with("[[registry.mirror]]\nlocation = \"m4.local/o\"\n")
                    .replace("mirror-by-digest-only = true\n", ""),
                "mirror m4.local/o has been added in registry quay.io/openshift that has pull-from-mirror set to \"\"",
            ),
            (
                BASE.into(),
                with(
                    "[[registry]]\nlocation = \"r.io\"\n[[registry.mirror]]\nlocation = \"m.local/r\"\n",
                ),
                "registry r.io has been added with mirror does not set pull-from-mirror=digest-only",
            ),
        ];
        for (old, new, want) in cases {
            assert_eq!(
                unsafe_change(&old, &new),
                Ok(Some(want.to_string())),
                "want {want}"
            );
        }
    }

    #[test]
    fn a_parse_error_shows_no_line_and_no_value() {
        let secret = "mirror-user:hunter2@mirror.example";
        for text in [
            format!(
                "[[registry]]\nlocation = \"{secret}\"\nmirror = [ {{ location = \"{secret}\" \n"
            ),
            format!("unqualified-search-registries = \"{secret}\"\n"),
            format!(
                "[[registry]]\nprefix = \"x\"\nlocation = \"{secret}\"\ninsecure = \"{secret}\"\n"
            ),
        ] {
            let e = unsafe_change(&text, "").unwrap_err();
            assert!(
                e.starts_with(
                    "failed decoding TOML content from file /etc/containers/registries.conf: line "
                ),
                "{e}"
            );
            assert!(!e.contains("hunter2") && !e.contains("mirror-user"), "{e}");
        }
        let e = unsafe_change("search = 1\n[[registry]\n", "").unwrap_err();
        assert!(e.contains(": line 2, column "), "{e}");
    }

    #[test]
    fn bad_files_are_errors() {
        let e = unsafe_change("[[registry]\n", "").unwrap_err();
        assert!(
            e.starts_with("failed decoding TOML content from file /etc/containers/registries.conf"),
            "{e}"
        );
        let mixed =
            "unqualified-search-registries = ['a']\n[registries.search]\nregistries = ['b']\n";
        assert_eq!(
            unsafe_change(mixed, "").unwrap_err(),
            "/etc/containers/registries.conf: mixing sysregistry v1/v2 is not supported"
        );
    }
}
