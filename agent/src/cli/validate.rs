//! `mco-agent validate [--config FILE] [--root DIR] [-o json|yaml]`.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use machine_config::Config;
use machine_config::mco::paths::CURRENT_CONFIG;

use super::contents::{self, Digest, Sides, Version};
use super::report::{Label, say};
use super::{Classify, Exit};
use crate::input::LoadedConfig;
use crate::rootfs::{Opened, Root, go_error_text};
use crate::units::SYSTEM_UNIT_DIR;
use crate::validate::{Facts, Mismatch, MismatchKind, SKIPPED_FILES, SpecRules, validate_as};

/// Arguments of `validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// MachineConfig (YAML or JSON) or Ignition config to check against (default: the
    /// config the node is in, `/etc/machine-config-daemon/currentconfig` under --root).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Root directory of the node.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Refuse a config with a key no Ignition spec knows (most often a typo, which would
    /// otherwise be ignored with a warning and change what is applied). Exit 65.
    #[arg(long)]
    pub strict: bool,
    /// `-o json|yaml`: the mismatches as a list.
    #[command(flatten)]
    pub output: super::output::OutputArgs,
    /// Under each file whose contents differ, show how: a unified diff of the config's
    /// contents against the disk's. A secret is never shown (a file others may not read, one
    /// under /etc/kubernetes, /var/lib/kubelet or /etc/pki, SSH keys, *.key, *.pem, pull
    /// secrets, password files, or contents holding a key, a password hash or a credential):
    /// only its sizes.
    #[arg(long, conflicts_with = "output")]
    pub show_contents: bool,
}

/// Validates and prints the report: the MCD-compatible line first, then one line per mismatch.
pub fn run(args: &Args) -> Result<ExitCode> {
    // A one-shot command: its text is read whole and parsed in place, which is about three
    // times cheaper in CPU than the streamed read the daemon and `once-from` use to keep the
    // contents out of memory (docs/benchmarks.md, "validate").
    // Files' base64 is not decoded by the parse: the comparison decodes it (see
    // `read_deferring_base64`).
    let path = config_path(args)?;
    let config = read_deferring_base64(&path).invalid_input()?;
    if args.strict {
        config
            .refuse_ignored(&path.display().to_string())
            .invalid_input()?;
    }
    let root = match super::open_root(&args.root) {
        Ok(root) => root,
        Err(e) => {
            full_parse_if_undecodable(&path, config.ignition.storage.files.iter())
                .invalid_input()?;
            return Err(e);
        }
    };
    let rules = SpecRules::of(&config.machine_config);
    let report = validate_as(&root, config.machine_config.name(), &config.ignition, rules);
    // A file that matched was decoded whole by the comparison; every other one, and those not
    // compared, are checked as the parse would have (the report was of a config the parse
    // refuses when one fails).
    let unconfirmed = config.ignition.storage.files.iter().filter(|f| {
        !report.is_ok() || SKIPPED_FILES.contains(&f.path.as_str()) || !f.append.is_empty()
    });
    full_parse_if_undecodable(&path, unconfirmed).invalid_input()?;
    if args.output.print(&report.mismatches)? {
    } else if report.is_ok() {
        println!("on-disk state matches {}", report.config);
    } else {
        // the MCD's line, then each mismatch with, under a content mismatch, its hashes and
        // (--show-contents) how the contents differ
        if let Some(line) = report.mcd_error() {
            println!("{line}");
        }
        for m in &report.mismatches {
            println!("{}", m.detail_line());
            for line in content_lines(&root, &config.ignition, m, args.show_contents) {
                println!("{line}");
            }
        }
    }
    if report.is_ok() {
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(hint) = recover_hint(args, &path) {
        say(Label::Hint, hint);
    }
    Ok(Exit::NotAsWanted.into())
}

/// The lines under a content mismatch: the short hashes and sizes, and with `show` how the
/// contents differ (never a secret's: [`contents`]).
fn content_lines(root: &Root, config: &Config, m: &Mismatch, show: bool) -> Vec<String> {
    let Some(found) = m.found.as_ref().filter(|_| m.kind == MismatchKind::Content) else {
        return Vec::new();
    };
    let digest = |f: &Facts| Digest {
        size: f.size.unwrap_or_default(),
        sha256: f.sha256.clone(),
    };
    let mut out = vec![contents::hash_line(
        &Sides::VALIDATE,
        &digest(&m.expected),
        &digest(found),
    )];
    if show {
        out.extend(show_contents(root, config, m, found));
    }
    out
}

/// How the config's contents of a mismatched file differ from the disk's, or why not shown.
fn show_contents(root: &Root, config: &Config, m: &Mismatch, found: &Facts) -> Vec<String> {
    // an unknown mode counts as private
    let mode = |f: &Facts| {
        f.mode
            .as_deref()
            .and_then(|m| u32::from_str_radix(m, 8).ok())
            .unwrap_or(0)
    };
    let (want_mode, disk_mode) = (mode(&m.expected), mode(found));
    // decided before anything is read: a secret is not even read from the disk
    if let Some(why) = contents::secret_reason(&m.path, &[want_mode, disk_mode]) {
        let sizes = Sides::VALIDATE.sizes(
            m.expected.size.unwrap_or_default(),
            found.size.unwrap_or_default(),
        );
        return vec![contents::not_shown(&why, &sizes)];
    }
    let Some(expected) = expected_contents(config, m) else {
        return vec![
            "  contents not shown: the config's contents of this path were not found".to_string(),
        ];
    };
    let (disk, size, disk_mode) = match read_capped(root, &m.path) {
        Ok(read) => read,
        Err(why) => return vec![format!("  contents not shown: {why}")],
    };
    contents::show(
        &m.path,
        &Sides::VALIDATE,
        Version::whole(&expected, want_mode),
        Version {
            bytes: &disk,
            size,
            mode: disk_mode,
        },
    )
}

/// The config's contents at the mismatch's path: a file's, a unit's or a drop-in's.
fn expected_contents(config: &Config, m: &Mismatch) -> Option<Vec<u8>> {
    let Some(name) = &m.unit else {
        let file = config
            .storage
            .files
            .iter()
            .rev()
            .find(|f| f.path == m.path)?;
        return file.decoded_contents().ok();
    };
    let unit = config
        .systemd
        .units
        .iter()
        .rev()
        .find(|u| &u.name == name)?;
    if m.path == format!("{SYSTEM_UNIT_DIR}/{name}") {
        return unit.contents.clone().map(String::into_bytes);
    }
    let dropin = m
        .path
        .strip_prefix(&format!("{SYSTEM_UNIT_DIR}/{name}.d/"))?;
    let dropin = unit.dropins.iter().rev().find(|d| d.name == dropin)?;
    Some(dropin.contents.clone().unwrap_or_default().into_bytes())
}

/// The file at `path` (not followed if a link), its size and permission bits; its bytes only
/// up to [`contents::MAX_DIFF_BYTES`] (a larger file is not diffed).
fn read_capped(root: &Root, path: &str) -> std::result::Result<(Vec<u8>, u64, u32), String> {
    match root.open_nofollow(Path::new(path)) {
        Ok(Opened::File(file, info)) => {
            let mut bytes = Vec::new();
            if info.size <= contents::MAX_DIFF_BYTES {
                file.take(contents::MAX_DIFF_BYTES + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|e| format!("read {path}: {}", go_error_text(&e)))?;
            }
            let size = if bytes.is_empty() {
                info.size
            } else {
                bytes.len() as u64
            };
            Ok((bytes, size, info.permissions()))
        }
        Ok(Opened::NotRegular(_)) => Err(format!("{path} is no longer a regular file")),
        Err(e) => Err(e.to_string()),
    }
}

/// The next step after mismatches, where `recover` can take it: a node the agent applied a
/// config to (it has a `currentconfig`). `recover` re-applies the node's own desired config, so
/// the hint says so when another config was validated.
fn recover_hint(args: &Args, validated: &Path) -> Option<String> {
    let current = args.root.join(CURRENT_CONFIG.trim_start_matches('/'));
    let current = std::fs::canonicalize(current).ok()?;
    let root = if args.root == Path::new("/") {
        String::new()
    } else {
        format!(" --root {}", args.root.display())
    };
    let other = if std::fs::canonicalize(validated).ok().as_ref() == Some(&current) {
        String::new()
    } else {
        format!(" (the node's config, not {})", validated.display())
    };
    Some(format!(
        "`mco-agent recover{root}` proposes a remedy and, confirmed, has the running agent re-apply the node's desired config over what differs{other}"
    ))
}

/// Reads the config at `path` as [`LoadedConfig::read_whole`] does, except that the base64 data
/// of files' contents is not decoded to check it ([`machine_config::deferring_contents_base64`]):
/// the comparison with the disk decodes it. What the parse refuses for any other reason is
/// refused with the very error of a full parse (the full parse then words it).
/// `--config`, else the config the node is in (as the MCD validates against `currentconfig`).
fn config_path(args: &Args) -> Result<PathBuf> {
    if let Some(path) = &args.config {
        return Ok(path.clone());
    }
    super::check_root(&args.root)?;
    let current = args.root.join(CURRENT_CONFIG.trim_start_matches('/'));
    if !current.exists() {
        return Err(super::exit::error(
            Exit::InvalidInput,
            format!(
                "no --config given, and {} does not exist (no config was applied to this root yet): pass --config FILE",
                current.display()
            ),
        ));
    }
    Ok(current)
}

fn read_deferring_base64(path: &Path) -> Result<LoadedConfig> {
    match machine_config::deferring_contents_base64(|| LoadedConfig::read_whole(path)) {
        Ok(config) => Ok(config),
        Err(_) => LoadedConfig::read_whole(path),
    }
}

/// Fails with the full parse's error when one of `files` has contents whose data URL the full
/// parse refuses (their base64 does not decode): the error `validate` gave before it deferred
/// that check. Only data URLs are checked here, the rest of the config was checked by the parse.
fn full_parse_if_undecodable<'a>(
    path: &Path,
    files: impl Iterator<Item = &'a machine_config::File>,
) -> Result<()> {
    let undecodable = files
        .filter_map(|f| f.contents.source.as_ref()?.text().ok())
        .any(|src| {
            machine_config::dataurl::scheme(&src) == Some("data")
                && machine_config::dataurl::check(&src).is_err()
        });
    if undecodable {
        LoadedConfig::read_whole(path)?;
    }
    Ok(())
}
