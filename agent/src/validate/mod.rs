//! On-disk validation: does the root hold what a config says? The MCD's checks and messages
//! (files: exact mode, then contents; drop-ins; masks resolve to `/dev/null`; unit files and
//! their enablement as the root's links show it), but every mismatch is collected instead of
//! stopping at the first, each with expected and found facts (mode, size, sha256; never
//! contents).
//!
//! Differences from the MCD, on purpose: a masked unit is checked even when it has no contents
//! (the MCD skips every unit without contents, so it never checks a plain mask); and what an
//! intruder would change besides modes and bytes is checked too (see the `identity` module): the owner of
//! every managed file, unit and drop-in, core's SSH keys file and core's password hash.

mod gofmt;
mod identity;
mod report;
mod units;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use machine_config::{Config, ContentsReader, File, MachineConfig, SpecVersion};
use sha2::{Digest as _, Sha256};

use crate::rootfs::accounts::Accounts;
use crate::rootfs::{FileKind, Opened, Owner, ParentDirs, Root, RootError, go_error_text};
use crate::units::{OfflineUnits, SYSTEM_UNIT_DIR};

pub use gofmt::{go_file_mode, go_mode_triple, go_quote};
pub use report::{
    Facts, Mismatch, MismatchKind, ValidationReport, octal, public_digest, sha256_hex,
};
use units::check_unit;

/// Files the MCD never validates: the certificate writer owns them and may change them.
pub const SKIPPED_FILES: [&str; 3] = [
    "/etc/kubernetes/kubelet-ca.crt",
    "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
    "/etc/mco/internal-registry-pull-secret.json",
];

/// Mode of unit files and drop-ins.
const UNIT_FILE_MODE: u32 = 0o644;

/// The unit rules a config is validated with: those of the spec it was written in, as the MCD
/// validates a config in the spec it was created with (`validateOnDiskStateImpl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpecRules {
    /// `checkV2Unit`: enablement is not checked. Deliberately unlike `checkV2Unit`, an empty
    /// drop-in may be missing: the writer removes it (as the MCD's `writeDropins` does), and
    /// requiring it would fail every spec 2.2 config with one (docs/mcd-compatibility.md).
    V2,
    /// `checkV3Unit`: an empty drop-in may be missing (apply removes it); enablement checked.
    #[default]
    V3,
}

impl SpecRules {
    /// The rules of the spec `config` declares (spec 2.2 → [`SpecRules::V2`]).
    pub fn of(config: &MachineConfig) -> Self {
        match config.config_version() {
            Some(SpecVersion::V2_2) => SpecRules::V2,
            _ => SpecRules::V3,
        }
    }
}

/// Validates `root` against `config` (named `config_name` in messages) with the spec 3 rules.
pub fn validate(root: &Root, config_name: &str, config: &Config) -> ValidationReport {
    validate_as(root, config_name, config, SpecRules::V3)
}

/// Validates `root` against `config` with the unit `rules` of the spec it was written in.
pub fn validate_as(
    root: &Root,
    config_name: &str,
    config: &Config,
    rules: SpecRules,
) -> ValidationReport {
    // Unreadable databases resolve no names: owners given by name are then reported.
    let accounts = Accounts::load(root).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot read the root's user database");
        Accounts::default()
    });
    let check = Check {
        root,
        accounts: &accounts,
        rules,
    };
    let mut mismatches = check_files(&check, &config.storage.files);
    // Nothing changes the links while they are checked: read once for all the units.
    let units = OfflineUnits::snapshot(root);
    for unit in &config.systemd.units {
        check_unit(&check, &units, unit, &mut mismatches);
    }
    identity::check_core(root, &accounts, config, &mut mismatches);
    ValidationReport {
        config: config_name.to_string(),
        mismatches,
    }
}

/// Validates only what `config` says about `changed` (node paths of files, units and drop-ins,
/// and core's keys file or the shadow file for core's keys and hash): what the drift monitor
/// checks when those paths change, instead of every file.
pub fn validate_paths(
    root: &Root,
    config_name: &str,
    config: &Config,
    changed: &BTreeSet<String>,
) -> ValidationReport {
    validate_paths_as(root, config_name, config, changed, SpecRules::V3)
}

/// [`validate_paths`] with the unit `rules` of the spec the config was written in.
pub fn validate_paths_as(
    root: &Root,
    config_name: &str,
    config: &Config,
    changed: &BTreeSet<String>,
    rules: SpecRules,
) -> ValidationReport {
    let mut subset = Config::default();
    subset.storage.files = config
        .storage
        .files
        .iter()
        .filter(|f| changed.contains(&f.path))
        .cloned()
        .collect();
    subset.systemd.units = config
        .systemd
        .units
        .iter()
        .filter(|u| {
            changed.contains(&format!("{SYSTEM_UNIT_DIR}/{}", u.name))
                || u.dropins.iter().any(|d| {
                    changed.contains(&format!("{SYSTEM_UNIT_DIR}/{}.d/{}", u.name, d.name))
                })
        })
        .cloned()
        .collect();
    if core_paths(root, config).iter().any(|p| changed.contains(p)) {
        subset.passwd = config.passwd.clone();
    }
    validate_as(root, config_name, &subset, rules)
}

/// The paths core's keys and password hash live in on `root`, when `config` manages them (see
/// [`validate`]): watched for drift like the managed files.
pub fn core_paths(root: &Root, config: &Config) -> Vec<String> {
    let accounts = Accounts::load(root).unwrap_or_default();
    identity::core_paths(&accounts, config)
}

/// The root and its user database.
struct Check<'a> {
    root: &'a Root,
    accounts: &'a Accounts,
    rules: SpecRules,
}

/// Below this many bytes of sources, one thread checks all the files (starting threads costs
/// more than it saves).
const BYTES_PER_THREAD: usize = 1 << 20;

/// Checks `files`, the decoding and comparing spread over up to the machine's cores: each
/// worker takes the next file not yet taken (a few large files do not load one worker while
/// the other idles), and the mismatches are put back in the config's order.
fn check_files(check: &Check<'_>, files: &[File]) -> Vec<Mismatch> {
    let bytes: usize = files
        .iter()
        .filter_map(|f| f.contents.source.as_ref())
        .map(machine_config::Source::len)
        .sum();
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(bytes / BYTES_PER_THREAD)
        .min(files.len())
        .max(1);
    let check_one = |file: &File, buffers: &mut WorkerScratch, out: &mut Vec<Mismatch>| {
        if SKIPPED_FILES.contains(&file.path.as_str()) {
            tracing::debug!(path = %file.path, "skipping file owned by the certificate writer");
            return;
        }
        check_config_file(check, file, buffers, out);
    };
    if threads == 1 {
        let (mut out, mut buffers) = (Vec::new(), WorkerScratch::default());
        files
            .iter()
            .for_each(|f| check_one(f, &mut buffers, &mut out));
        return out;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut found: Vec<(usize, Vec<Mismatch>)> = Vec::new();
        let mut buffers = WorkerScratch::default();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(file) = files.get(i) else {
                return found;
            };
            let mut out = Vec::new();
            check_one(file, &mut buffers, &mut out);
            if !out.is_empty() {
                found.push((i, out));
            }
        }
    };
    let mut found: Vec<(usize, Vec<Mismatch>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(found) => found,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    found.sort_by_key(|(i, _)| *i);
    found.into_iter().flat_map(|(_, m)| m).collect()
}

fn check_config_file(
    check: &Check<'_>,
    file: &File,
    buffers: &mut WorkerScratch,
    out: &mut Vec<Mismatch>,
) {
    let mode = file.mode_or_default();
    if !file.append.is_empty() {
        out.push(Mismatch {
            path: file.path.clone(),
            unit: None,
            kind: MismatchKind::Append,
            message: "found an append section when checking files. Append is not supported"
                .to_string(),
            expected: Facts {
                mode: Some(octal(mode)),
                ..Facts::default()
            },
            found: None,
        });
        return;
    }
    let owner = match identity::expected_owner(check.accounts, file) {
        Ok(owner) => Some(owner),
        Err(why) => {
            out.push(Mismatch {
                path: file.path.clone(),
                unit: None,
                kind: MismatchKind::Owner,
                message: format!(
                    "cannot tell the owner of file {}: {why}",
                    go_quote(&file.path)
                ),
                expected: Facts::default(),
                found: None,
            });
            None
        }
    };
    if let Some(found_owner) = matches_streaming(check.root, file, mode, buffers) {
        if let Some(owner) = owner {
            out.extend(identity::check_owner(
                check.accounts,
                &file.path,
                None,
                owner,
                found_owner,
            ));
        }
        return;
    }
    match file.decoded_contents() {
        Ok(contents) => check_file(check, &file.path, None, mode, owner, &contents, out),
        Err(e) => out.push(Mismatch {
            path: file.path.clone(),
            unit: None,
            kind: MismatchKind::Decode,
            message: e.to_string(),
            expected: Facts {
                mode: Some(octal(mode)),
                ..Facts::default()
            },
            found: None,
        }),
    }
}

/// Compares the regular file at `path` with `expected` bytes, the exact `mode` and the `owner`
/// (when known), recording a mismatch for each that differs.
fn check_file(
    check: &Check<'_>,
    path: &str,
    unit: Option<&str>,
    mode: u32,
    owner: Option<Owner>,
    expected: &[u8],
    out: &mut Vec<Mismatch>,
) {
    let root = check.root;
    let quoted = go_quote(path);
    let mismatch = |kind, message: String, found: Option<Facts>| Mismatch {
        path: path.to_string(),
        unit: unit.map(str::to_string),
        kind,
        message,
        expected: Facts::of_contents(mode, expected),
        found,
    };
    let (mut file, info) = match root.open_nofollow(Path::new(path)) {
        Ok(Opened::File(f, info)) => (f, info),
        Ok(Opened::NotRegular(info)) => {
            let message = format!(
                "mode mismatch for file: {quoted}; expected: {}; received: {}",
                go_mode_triple(mode),
                go_mode_triple(go_file_mode(info.mode))
            );
            out.push(mismatch(
                MismatchKind::Mode,
                message,
                found_facts(root, path),
            ));
            return;
        }
        Err(e) => {
            let (kind, message) = match &e {
                RootError::Io { op: "lstat", .. } => (
                    MismatchKind::Missing,
                    format!("could not stat file {quoted}: {e}"),
                ),
                _ => (
                    MismatchKind::Unreadable,
                    format!("could not read file {quoted}: {e}"),
                ),
            };
            out.push(mismatch(kind, message, None));
            return;
        }
    };
    let on_disk = match compare_stream(&mut file, expected) {
        Ok(c) => c,
        Err(e) => {
            let message = format!(
                "could not read file {quoted}: read {path}: {}",
                go_error_text(&e)
            );
            out.push(mismatch(MismatchKind::Unreadable, message, None));
            return;
        }
    };
    let found = || {
        Some(Facts::of_digest(
            info.permissions(),
            on_disk.size,
            on_disk.sha256.clone(),
        ))
    };
    let found_mode = go_file_mode(info.mode);
    if found_mode != mode {
        let message = format!(
            "mode mismatch for file: {quoted}; expected: {}; received: {}",
            go_mode_triple(mode),
            go_mode_triple(found_mode)
        );
        out.push(mismatch(MismatchKind::Mode, message, found()));
    }
    if !on_disk.equal {
        out.push(mismatch(
            MismatchKind::Content,
            format!("content mismatch for file {quoted}"),
            found(),
        ));
    }
    if let Some(owner) = owner {
        out.extend(identity::check_owner(
            check.accounts,
            path,
            unit,
            owner,
            info.owner,
        ));
    }
}

/// The common case, told without holding the decoded file: `file` is a regular file of exactly
/// `mode` whose bytes are its decoded contents, decoded as they are compared. Returns the owner
/// found then (still to be checked). `None` for anything else, including a file whose contents
/// do not decode: the full check ([`check_file`] after decoding) then says what differs, in the
/// MCD's words. A size that differs from the decoded size, when that is known without decoding,
/// ends this at once.
fn matches_streaming(
    root: &Root,
    file: &File,
    mode: u32,
    buffers: &mut WorkerScratch,
) -> Option<Owner> {
    let mut expected = ContentsReader::new(file)?;
    let WorkerScratch {
        disk_buf,
        want_buf,
        dirs,
    } = buffers;
    let Ok(Opened::File(mut on_disk, info)) =
        root.open_nofollow_cached(dirs, Path::new(&file.path))
    else {
        return None;
    };
    if go_file_mode(info.mode) != mode {
        return None;
    }
    if expected.decoded_len().is_some_and(|len| len != info.size) {
        return None;
    }
    loop {
        let n = read_full(&mut on_disk, disk_buf).ok()?;
        let m = read_full(&mut expected, &mut want_buf[..n.max(1)]).ok()?;
        if n == 0 {
            // The file ended: so must the contents (their hash is checked at their end).
            return (m == 0).then_some(info.owner);
        }
        if m != n || disk_buf[..n] != want_buf[..n] {
            return None;
        }
    }
}

/// Bytes compared per step.
const COMPARE_CHUNK: usize = 64 * 1024;

/// What a worker keeps for all its files: the two buffers [`matches_streaming`] compares in
/// (allocating and zeroing 128 KiB for each of hundreds of small files cost more than reading
/// them), and the directories it opened files in (resolving each path from the root again cost
/// more than reading the files too).
struct WorkerScratch {
    disk_buf: Vec<u8>,
    want_buf: Vec<u8>,
    dirs: ParentDirs,
}

impl Default for WorkerScratch {
    fn default() -> Self {
        WorkerScratch {
            disk_buf: vec![0u8; COMPARE_CHUNK],
            want_buf: vec![0u8; COMPARE_CHUNK],
            dirs: ParentDirs::default(),
        }
    }
}

/// Reads until `buf` is full or the end; how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// What reading a file while comparing it with the expected contents found.
struct OnDisk {
    equal: bool,
    size: u64,
    /// Lowercase hex, for the report.
    sha256: String,
}

/// Reads `file` in fixed-size chunks, comparing them with `expected` and hashing them: memory
/// stays one buffer whatever the file's size (it may be any file a user put at a config path).
fn compare_stream(file: &mut impl Read, expected: &[u8]) -> std::io::Result<OnDisk> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut hasher = Sha256::new();
    let (mut equal, mut size) = (true, 0usize);
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        equal = equal && expected.get(size..size + n) == Some(&buf[..n]);
        size += n;
    }
    Ok(OnDisk {
        equal: equal && size == expected.len(),
        size: size as u64,
        sha256: hex::encode(hasher.finalize()),
    })
}

/// Facts about whatever is at `path` that is not a readable regular file.
fn found_facts(root: &Root, path: &str) -> Option<Facts> {
    let info = root.lstat(Path::new(path)).ok().flatten()?;
    let kind = match info.kind {
        FileKind::File => "file",
        FileKind::Dir => "directory",
        FileKind::Symlink => "symlink",
        FileKind::Other => "other",
    };
    let target = if info.kind == FileKind::Symlink {
        root.read_link(Path::new(path))
            .ok()
            .flatten()
            .map(|t| t.display().to_string())
    } else {
        None
    };
    Some(Facts {
        kind: Some(kind),
        mode: Some(octal(info.permissions())),
        size: (info.kind == FileKind::File).then_some(info.size),
        target,
        ..Facts::default()
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod identity_tests;
