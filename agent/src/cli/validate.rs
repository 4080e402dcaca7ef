//! `mco-agent validate [--config FILE] [--root DIR] [-o json|yaml]`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use super::{Classify, Exit};

use crate::input::LoadedConfig;
use crate::validate::{SKIPPED_FILES, SpecRules, validate_as};
use machine_config::mco::paths::CURRENT_CONFIG;

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
        for line in report.lines() {
            println!("{line}");
        }
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        Exit::NotAsWanted.into()
    })
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
