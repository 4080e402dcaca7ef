//! Standalone mode's input: MachineConfig and MachineConfigPool manifests in a directory.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file directly in the directory is read (hidden files and
//! subdirectories are skipped); a YAML file may hold several documents separated by `---`
//! lines. Objects of other kinds are skipped with a warning, so a directory of mixed manifests
//! works. Two objects of the same kind and name are an error naming both files.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use machine_config::document::parse_value;
use machine_config::{MachineConfig, MachineConfigPool};
use serde_json::Value;

/// Objects read from a manifests directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifests {
    /// MachineConfigs, by name order.
    pub machine_configs: Vec<MachineConfig>,
    /// Pools, by name order.
    pub pools: Vec<MachineConfigPool>,
}

impl Manifests {
    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&MachineConfigPool> {
        self.pools.iter().find(|p| p.name() == name)
    }
}

/// The manifest files in `dir`, sorted.
pub fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let entries = fs::read_dir(dir)
        .with_context(|| format!("reading manifests directory {}", dir.display()))?;
    for entry in entries {
        let entry =
            entry.with_context(|| format!("reading manifests directory {}", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let wanted = !name.starts_with('.')
            && [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| name.ends_with(ext));
        if wanted
            && entry
                .file_type()
                .map(|t| t.is_file() || t.is_symlink())
                .unwrap_or(false)
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// A cheap summary of the directory's manifest files (names, sizes, modification times), to
/// notice changes without reading them.
pub fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    manifest_files(dir)
        .unwrap_or_default()
        .into_iter()
        .map(|path| {
            let meta = fs::metadata(&path).ok();
            let len = meta.as_ref().map_or(0, |m| m.len());
            let mtime = meta.and_then(|m| m.modified().ok());
            (path, len, mtime)
        })
        .collect()
}

/// Reads every manifest in `dir`.
pub fn load(dir: &Path) -> Result<Manifests> {
    let mut configs: BTreeMap<String, (MachineConfig, PathBuf)> = BTreeMap::new();
    let mut pools: BTreeMap<String, (MachineConfigPool, PathBuf)> = BTreeMap::new();
    for path in manifest_files(dir)? {
        let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        for (index, document) in split_documents(&bytes).into_iter().enumerate() {
            let at = || format!("{} (document {})", path.display(), index + 1);
            let value = parse_value(document).with_context(at)?;
            if value.is_null() {
                continue;
            }
            match value.get("kind").and_then(Value::as_str) {
                Some("MachineConfig") => {
                    let mc = MachineConfig::from_value(value).with_context(at)?;
                    insert_unique(
                        &mut configs,
                        mc.name().to_string(),
                        mc,
                        &path,
                        "MachineConfig",
                    )?;
                }
                Some("MachineConfigPool") => {
                    let pool = MachineConfigPool::from_value(value).with_context(at)?;
                    insert_unique(
                        &mut pools,
                        pool.name().to_string(),
                        pool,
                        &path,
                        "MachineConfigPool",
                    )?;
                }
                other => tracing::warn!(
                    "{}: skipping an object of kind {}",
                    at(),
                    other.unwrap_or("(none)")
                ),
            }
        }
    }
    Ok(Manifests {
        machine_configs: configs.into_values().map(|(mc, _)| mc).collect(),
        pools: pools.into_values().map(|(p, _)| p).collect(),
    })
}

fn insert_unique<T>(
    into: &mut BTreeMap<String, (T, PathBuf)>,
    name: String,
    object: T,
    path: &Path,
    kind: &str,
) -> Result<()> {
    if name.is_empty() {
        bail!("{}: a {kind} without metadata.name", path.display());
    }
    if let Some((_, first)) = into.get(&name) {
        bail!(
            "{kind} {name:?} is defined twice: in {} and in {}",
            first.display(),
            path.display()
        );
    }
    into.insert(name, (object, path.to_path_buf()));
    Ok(())
}

/// Splits YAML on `---` document separator lines; JSON files are one document.
fn split_documents(bytes: &[u8]) -> Vec<&[u8]> {
    let text_start = bytes.iter().position(|b| !b.is_ascii_whitespace());
    if text_start.is_some_and(|i| bytes[i] == b'{') {
        return vec![bytes];
    }
    let mut documents = Vec::new();
    let mut start = 0;
    let mut line_start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' || i + 1 == bytes.len() {
            let end = if *b == b'\n' { i } else { i + 1 };
            let line = &bytes[line_start..end];
            let trimmed = line.strip_suffix(b"\r").unwrap_or(line);
            let is_separator =
                trimmed.starts_with(b"---") && trimmed[3..].iter().all(|c| c.is_ascii_whitespace());
            if is_separator {
                documents.push(&bytes[start..line_start]);
                start = (i + 1).min(bytes.len());
            }
            line_start = i + 1;
        }
    }
    documents.push(&bytes[start.min(bytes.len())..]);
    documents
        .into_iter()
        .filter(|d| d.iter().any(|b| !b.is_ascii_whitespace()) && !only_comments(d))
        .collect()
}

fn only_comments(document: &[u8]) -> bool {
    String::from_utf8_lossy(document)
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
";

    fn mc(name: &str) -> String {
        format!(
            "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
      - path: /etc/{name}
        mode: 0644
        contents:
          source: data:,x
"
        )
    }

    #[test]
    fn loads_multi_document_yaml_and_json_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("pool.yaml"), POOL).unwrap();
        fs::write(
            dir.path().join("mcs.yml"),
            format!("# leading comment\n---\n{}---\n{}\n---\n", mc("b"), mc("a")),
        )
        .unwrap();
        let json = serde_json::to_string(&parse_value(mc("c").as_bytes()).unwrap()).unwrap();
        fs::write(dir.path().join("c.json"), json).unwrap();
        fs::write(
            dir.path().join("node.yaml"),
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n",
        )
        .unwrap();
        fs::write(dir.path().join("README.md"), "not a manifest").unwrap();
        fs::write(dir.path().join(".hidden.yaml"), "garbage: [").unwrap();
        let m = load(dir.path()).unwrap();
        let names: Vec<&str> = m.machine_configs.iter().map(|mc| mc.name()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(m.pool("worker").is_some());
        // YAML 1.1 octal mode
        let file = &m.machine_configs[0].ignition().unwrap().storage.files[0];
        assert_eq!(file.mode, Some(0o644));
        assert_eq!(fingerprint(dir.path()).len(), 4);
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.yaml"), mc("dup")).unwrap();
        fs::write(dir.path().join("b.yaml"), mc("dup")).unwrap();
        let err = format!("{:#}", load(dir.path()).unwrap_err());
        assert!(
            err.contains("MachineConfig \"dup\" is defined twice") && err.contains("b.yaml"),
            "{err}"
        );

        fs::remove_file(dir.path().join("b.yaml")).unwrap();
        fs::write(
            dir.path().join("bad.yaml"),
            mc("bad").replace("0644", "0o7777"),
        )
        .unwrap();
        let err = format!("{:#}", load(dir.path()).unwrap_err());
        assert!(err.contains("bad.yaml (document 1)"), "{err}");

        let err = format!("{:#}", load(&dir.path().join("missing")).unwrap_err());
        assert!(err.contains("reading manifests directory"), "{err}");
    }
}
