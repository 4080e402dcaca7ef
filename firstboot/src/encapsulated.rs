//! The encapsulated config the config server leaves for first boot: reading it, and setting it
//! aside (`.bak`), putting it back, or removing it.

use std::path::Path;

use anyhow::{Context, Result};
use machine_config::MachineConfig;
use machine_config::mco::paths::{ENCAPSULATED, ENCAPSULATED_BAK};
use mco_agent::rootfs::{DEFAULT_FILE_MODE, Owner, Root};

/// The encapsulated MachineConfig; `None` when there is none (first boot is complete, or was
/// never needed). A file that is not a MachineConfig is an error naming the file and what is
/// wrong with it.
pub fn read(root: &Root) -> Result<Option<MachineConfig>> {
    let path = Path::new(ENCAPSULATED);
    let shown = root.host_path(path).display().to_string();
    let Some(bytes) = root
        .read(path)
        .with_context(|| format!("reading {shown}"))?
    else {
        return Ok(None);
    };
    let mc = MachineConfig::from_slice(&bytes).with_context(|| shown.clone())?;
    if mc.name().is_empty() {
        anyhow::bail!("{shown}: $.metadata.name: missing (the MachineConfig has no name)");
    }
    mc.ignition()
        .with_context(|| format!("{shown}: the Ignition config"))?;
    Ok(Some(mc))
}

/// Moves the file to `.bak` (first boot is staged; the unit's condition no longer holds).
pub fn set_aside(root: &Root) -> Result<()> {
    move_file(root, ENCAPSULATED, ENCAPSULATED_BAK)
}

/// Moves `.bak` back (the reboot could not be requested: the next run tries again).
pub fn put_back(root: &Root) -> Result<()> {
    move_file(root, ENCAPSULATED_BAK, ENCAPSULATED)
}

/// Removes the file (nothing to do; the MCD removes it too).
pub fn remove(root: &Root) -> Result<()> {
    root.remove_file(Path::new(ENCAPSULATED)).with_context(|| {
        format!(
            "removing {}",
            root.host_path(Path::new(ENCAPSULATED)).display()
        )
    })?;
    Ok(())
}

/// Copies `from` to `to` atomically, then removes `from`: a crash in between leaves both,
/// and the next run, finding the original, starts over.
fn move_file(root: &Root, from: &str, to: &str) -> Result<()> {
    let (from, to) = (Path::new(from), Path::new(to));
    let bytes = root
        .read(from)?
        .with_context(|| format!("{} disappeared", root.host_path(from).display()))?;
    root.write_atomic(to, &bytes, DEFAULT_FILE_MODE, Owner::ROOT)
        .with_context(|| format!("writing {}", root.host_path(to).display()))?;
    root.remove_file(from)
        .with_context(|| format!("removing {}", root.host_path(from).display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn absent_is_nothing_to_do_and_bad_files_are_named() {
        let (dir, root) = root();
        assert!(read(&root).unwrap().is_none());
        let file = dir.path().join(ENCAPSULATED.trim_start_matches('/'));
        for (contents, want) in [
            ("{", "ignition-machine-config-encapsulated.json"),
            (
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#,
                "$.apiVersion",
            ),
            (
                r#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{},"spec":{}}"#,
                "$.metadata.name: missing",
            ),
            (
                r#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":"x"},"spec":{"config":{"ignition":{"version":"9.9.9"}}}}"#,
                "$.spec.config.ignition.version: unsupported config version \"9.9.9\"",
            ),
        ] {
            std::fs::write(&file, contents).unwrap();
            let e = format!("{:#}", read(&root).unwrap_err());
            assert!(e.contains(want), "{contents}: {e}");
            assert!(e.contains(&file.display().to_string()), "{e}");
        }
    }

    #[test]
    fn set_aside_and_put_back() {
        let (dir, root) = root();
        let file = dir.path().join(ENCAPSULATED.trim_start_matches('/'));
        let bak = dir.path().join(ENCAPSULATED_BAK.trim_start_matches('/'));
        std::fs::write(&file, "x").unwrap();
        set_aside(&root).unwrap();
        assert!(!file.exists());
        assert_eq!(std::fs::read_to_string(&bak).unwrap(), "x");
        put_back(&root).unwrap();
        assert!(!bak.exists());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
        remove(&root).unwrap();
        assert!(!file.exists());
    }
}
