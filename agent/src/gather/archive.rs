//! The bundle as a tar.gz: one directory, `mco-agent-gather/`, with `manifest.json` first and
//! the items in the manifest's order.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;

use super::Bundle;

/// The directory every file of the bundle is in.
pub const TOP_DIR: &str = "mco-agent-gather";

/// The bundle compressed: regular files of mode 0600, owned by root, dated when it was made.
pub fn tar_gz(bundle: &Bundle) -> std::io::Result<Vec<u8>> {
    let mut manifest =
        serde_json::to_vec_pretty(&bundle.manifest).map_err(std::io::Error::other)?;
    manifest.push(b'\n');
    let mtime = bundle.manifest.created_ms / 1000;
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    let files = std::iter::once(("manifest.json", manifest.as_slice()))
        .chain(bundle.files.iter().map(|(n, b)| (n.as_str(), b.as_slice())));
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o600);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(mtime);
        tar.append_data(&mut header, format!("{TOP_DIR}/{name}"), bytes)?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    gz.finish()
}
