//! A served MachineConfig kept in a private file rather than in memory.
//!
//! A config server's answer carries the rendered MachineConfig as one file ([`SERVED_CONTENT`]),
//! which is what an update reads its files' contents from. Kept in memory, that document (the
//! size of the config) would be held for the whole update. A large one is instead decoded, a
//! piece at a time, into an anonymous file (`O_TMPFILE`: never visible by name, mode 0600,
//! gone when closed) in the agent's state directory, and read from there with its sources left
//! in the file ([`machine_config::ignition_json::parse_json_file`]).
//!
//! [`SERVED_CONTENT`]: machine_config::mco::paths::SERVED_CONTENT

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use machine_config::ContentsReader;
use machine_config::ignition::File;
use machine_config::mco::paths::CURRENT_CONFIG;
use machine_config::source::SourceFile;
use rustix::fs::{Mode, OFlags};

/// Where in the root `root` a served MachineConfig is spilled: the directory of
/// `currentconfig`, which holds the same kind of document, readable by root only. When it does
/// not exist yet (a root nothing was applied to), nothing is spilled.
pub fn state_dir(root: &Path) -> PathBuf {
    let current = root.join(CURRENT_CONFIG.trim_start_matches('/'));
    current
        .parent()
        .map_or_else(|| root.to_path_buf(), Path::to_path_buf)
}

/// A served document of at most this many bytes of source is read in memory.
pub const KEEP_IN_MEMORY: usize = 1 << 20;

/// Decodes `file`'s contents into an anonymous file in `dir`. Any failure (a filesystem without
/// `O_TMPFILE`, contents that do not decode) is an error the caller answers by decoding in
/// memory, whose errors word what is wrong with the contents.
pub fn spill(dir: &Path, file: &File) -> io::Result<Arc<SourceFile>> {
    let fd = rustix::fs::open(
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut out = std::fs::File::from(fd);
    let mut contents = ContentsReader::new(file)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "contents that do not decode"))?;
    io::copy(&mut contents, &mut out)?;
    out.sync_data().ok();
    SourceFile::from_file(
        out,
        &dir.join("(an unnamed copy of the served MachineConfig)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::served::{Served, served_machine_config};
    use machine_config::ignition::Resource;
    use machine_config::mco::paths::SERVED_CONTENT;

    #[test]
    fn contents_are_decoded_into_an_unnamed_file_of_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let data = b"{\"kind\":\"MachineConfig\"}".repeat(1000);
        let file = File {
            path: "/etc/x".into(),
            contents: Resource {
                source: Some(machine_config::dataurl::encode_base64(&data).into()),
                ..Resource::default()
            },
            ..File::default()
        };
        let spilled = spill(dir.path(), &file).unwrap();
        assert_eq!(spilled.len(), data.len() as u64);
        assert_eq!(spilled.head(24).unwrap(), &data[..24]);
        // Nothing is left in the directory, under any name.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let bad = File {
            contents: Resource {
                source: Some("data:;base64,%%%%".into()),
                ..Resource::default()
            },
            ..file
        };
        assert!(spill(dir.path(), &bad).is_err());
        assert!(spill(&dir.path().join("missing"), &bad).is_err());
    }

    /// A config server's answer carrying a MachineConfig of `data` (one file).
    fn answer(data: &[u8]) -> Vec<u8> {
        let mc = serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig", "metadata": {"name": "rendered-worker-1"},
            "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [
                {"path": "/etc/big", "contents": {
                    "source": machine_config::dataurl::encode_base64(data)}}]}}}});
        let mc = serde_json::to_vec(&mc).unwrap();
        let served = serde_json::json!({"path": SERVED_CONTENT, "mode": 420,
            "contents": {"source": machine_config::dataurl::encode_base64(&mc)}});
        serde_json::to_vec(&serde_json::json!({"ignition": {"version": "3.5.0"},
            "storage": {"files": [served]}}))
        .unwrap()
    }

    #[test]
    fn a_large_served_machine_config_is_read_from_its_spilled_copy() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..900_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for spill in [None, Some(dir.path())] {
            let mc = served_machine_config(answer(&data), spill).unwrap();
            assert_eq!(mc.name(), "rendered-worker-1");
            let files = mc.ignition().unwrap().storage.files;
            assert_eq!(files[0].decoded_contents().unwrap(), data);
            // Recorded as it came: the document serializes with its source in place.
            let recorded = serde_json::to_value(&mc).unwrap();
            let source = &recorded["spec"]["config"]["storage"]["files"][0]["contents"]["source"];
            assert_eq!(
                source.as_str().unwrap().len(),
                machine_config::dataurl::encode_base64(&data).len()
            );
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // The large document took the spilled path (a small one stays in memory).
        let served_of = |body: Vec<u8>| {
            let (value, sources) = crate::input::read_document(body).unwrap();
            let config = machine_config::IgnitionJson::from_parts(value, sources)
                .parse()
                .unwrap()
                .config;
            crate::input::served::served_content(&config, Some(dir.path())).unwrap()
        };
        assert!(matches!(served_of(answer(&data)), Served::File(_)));
        assert!(matches!(served_of(answer(b"small")), Served::Memory(_)));
        assert_eq!(
            state_dir(Path::new("/r")),
            Path::new("/r/etc/machine-config-daemon")
        );
    }
}
