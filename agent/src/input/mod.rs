//! Reading a config given on the command line: a MachineConfig (YAML or JSON) or a bare Ignition
//! config of any supported spec, from a file or an http(s) URL, into a MachineConfig (a bare
//! config is wrapped, named after the file; a config server's answer yields the MachineConfig it
//! carries, read by [`served`]), the MachineConfig recorded in a root (`currentconfig`), and a
//! policy file ([`policy`]).

pub mod irreconcilable;
mod mapped;
pub mod policy;
pub mod served;
pub mod spill;
mod tls_cause;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use machine_config::document::parse_value;
use machine_config::ignition_json::{parse_json_document, parse_json_file};
use machine_config::mco::image::{embed_image, extract_image};
use machine_config::mco::paths::{CURRENT_CONFIG, CURRENT_IMAGE, SERVED_CONTENT};
use machine_config::source::{DocumentText, SourceFile};
use machine_config::{
    Config, IgnitionJson, Issue, MachineConfig, MachineConfigSpec, ParsedConfig, SourceTable,
};
use serde_json::Value;

use crate::rootfs::{Owner, Root};

/// A config read from a file.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The MachineConfig (a bare Ignition config wrapped in one).
    pub machine_config: MachineConfig,
    /// Its Ignition config in the internal form.
    pub ignition: Config,
    /// JSON-path prefix of the Ignition config in the file: `$.spec.config` or `$`.
    pub field_prefix: &'static str,
    /// What the parse ignored (unknown keys), each at its path in the file as written
    /// (`$.spec.config.storage…` in a MachineConfig); warned about when read, refused by
    /// [`LoadedConfig::refuse_ignored`] (`--strict`).
    pub ignored: Vec<Issue>,
}

impl LoadedConfig {
    /// Reads `bytes` (from `path`, used for messages and to name a bare Ignition config).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self> {
        Self::from_vec(path, bytes.to_vec())
    }

    /// [`Self::from_bytes`] taking the bytes: a JSON document is kept as the one copy of its
    /// sources (each file's contents a span of it, see `read_document`).
    pub fn from_vec(path: &Path, bytes: Vec<u8>) -> Result<Self> {
        Self::from_vec_spilling(path, bytes, None)
    }

    /// [`Self::from_vec`]; a config server's answer has its MachineConfig spilled to `spill`
    /// (see [`served::served_machine_config`]).
    fn from_vec_spilling(path: &Path, bytes: Vec<u8>, spill: Option<&Path>) -> Result<Self> {
        let (value, sources) = read_document(bytes)?;
        Self::from_document(path, value, sources, spill)
    }

    /// A config from a document read into a value whose `source` strings index `sources`.
    fn from_document(
        path: &Path,
        value: Value,
        sources: SourceTable,
        spill: Option<&Path>,
    ) -> Result<Self> {
        let is_mc = value.get("kind").is_some() || value.get("apiVersion").is_some();
        if is_mc {
            let (mc, parsed) = MachineConfig::from_document(value, sources)?;
            let ignored = warn_unused(path, &parsed, "$.spec.config");
            return Ok(LoadedConfig {
                machine_config: mc,
                ignition: parsed.config,
                field_prefix: "$.spec.config",
                ignored,
            });
        }
        if value.get("ignition").is_none() {
            anyhow::bail!(
                "$: neither a MachineConfig (no kind/apiVersion) nor an Ignition config (no ignition section)"
            );
        }
        // The config's sources are in a shared table: the wrapped MachineConfig and the
        // parsed config hold them once, not twice.
        let config = IgnitionJson::from_parts(value, sources);
        let parsed = config.parse()?;
        if parsed
            .config
            .storage
            .files
            .iter()
            .any(|f| f.path == SERVED_CONTENT)
        {
            // A config server's answer: the rendered MachineConfig is the file it appends. The
            // answer is let go once that file is decoded.
            let what =
                "a config server's answer (an Ignition config with the MachineConfig it serves)";
            let served = served::served_content(&parsed.config, spill).context(what)?;
            drop((config, parsed));
            let (mc, parsed) = served::machine_config_document(served).context(what)?;
            tracing::info!(
                config = mc.name(),
                "applying the MachineConfig a config server's answer carries"
            );
            let ignored = warn_unused(path, &parsed, "$.spec.config");
            return Ok(LoadedConfig {
                machine_config: mc,
                ignition: parsed.config,
                field_prefix: "$.spec.config",
                ignored,
            });
        }
        let ignored = warn_unused(path, &parsed, "$");
        let name = name_for(path);
        let mc = MachineConfig::new(
            name,
            MachineConfigSpec {
                config: Some(config),
                ..MachineConfigSpec::default()
            },
        );
        Ok(LoadedConfig {
            machine_config: mc,
            ignition: parsed.config,
            field_prefix: "$",
            ignored,
        })
    }

    /// Reads the file at `path`; errors name the file. A JSON file is streamed: its sources
    /// stay in the file (streamed by `read_json_file`), so the config read holds none of the
    /// contents.
    pub fn read(path: &Path) -> Result<Self> {
        let file = SourceFile::open(path).with_context(|| format!("reading {}", path.display()))?;
        if let Some((value, sources)) = read_json_file(&file) {
            return Self::from_document(path, value, sources, None)
                .with_context(|| format!("{}", path.display()));
        }
        Self::read_whole(path)
    }

    /// Reads the file at `path` whole and parses it in place: each source a span of the text,
    /// which is held as long as the config is. Faster than [`Self::read`] (the parse is not a
    /// byte at a time), for a command that is done once the config is checked. A large JSON
    /// file is mapped rather than copied (module `input::mapped`: it must not be rewritten in
    /// place meanwhile).
    pub fn read_whole(path: &Path) -> Result<Self> {
        let reading = || format!("reading {}", path.display());
        let mut file = std::fs::File::open(path).with_context(reading)?;
        if let Some(text) = mapped::MappedJson::map(&file) {
            let (value, sources) = parse_json_document(DocumentText::new(text))
                .with_context(|| format!("{}", path.display()))?;
            return Self::from_document(path, value, sources, None)
                .with_context(|| format!("{}", path.display()));
        }
        // Sized as the file says when it can be (as `std::fs::read` does).
        let size = file.metadata().map_or(0, |m| m.len());
        let mut bytes = Vec::new();
        let _ = bytes.try_reserve_exact(usize::try_from(size).unwrap_or(0));
        std::io::Read::read_to_end(&mut file, &mut bytes).with_context(reading)?;
        Self::from_vec(path, bytes).with_context(|| format!("{}", path.display()))
    }

    /// Reads `source`: a file, or an `http://`/`https://` URL fetched as the agent asks a config
    /// server (the Ignition Accept header; `ca`, a PEM bundle, is the only CA trusted for https
    /// when given, else the system's trust store; `http://` only with `insecure_http`, see
    /// [`served::check_scheme`]). Nothing is written anywhere, except that a large MachineConfig
    /// a config server answers with is decoded into an unnamed private file in `spill` when
    /// given (see [`spill`]).
    pub async fn load(
        source: &str,
        ca: Option<&Path>,
        insecure_http: bool,
        spill: Option<&Path>,
    ) -> Result<Self> {
        if !(source.starts_with("https://") || source.starts_with("http://")) {
            if let Some((scheme, _)) = source.split_once("://")
                && !scheme.is_empty()
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'+')
            {
                anyhow::bail!("{source}: a {scheme}:// URL; only http:// and https:// are fetched");
            }
            if ca.is_some() {
                anyhow::bail!("--ca is for an https:// URL; {source} is a file");
            }
            return Self::read(Path::new(source));
        }
        let url = reqwest::Url::parse(source).with_context(|| format!("{source}: not a URL"))?;
        served::check_scheme(source, insecure_http)?;
        let client = served::http_client(source, ca, None)?;
        let body = served::fetch(&client, source, None, None).await?;
        // A bare Ignition config is named after the URL's last path segment.
        Self::from_vec_spilling(Path::new(url.path()), body, spill)
            .with_context(|| source.to_string())
    }

    /// Refuses a config whose parse ignored something (`--strict`): an unknown key is most
    /// often a typo, and ignoring it changes what is applied. The error names `file` and each
    /// path as written.
    pub fn refuse_ignored(&self, file: &str) -> Result<()> {
        if self.ignored.is_empty() {
            return Ok(());
        }
        let lines: Vec<String> = self.ignored.iter().map(ToString::to_string).collect();
        anyhow::bail!("{file}: {} (refused by --strict)", lines.join("; "))
    }

    /// An empty MachineConfig (what a root holds before anything was applied).
    pub fn empty() -> Self {
        LoadedConfig {
            machine_config: MachineConfig::new(String::new(), MachineConfigSpec::default()),
            ignition: Config::empty(),
            field_prefix: "$",
            ignored: Vec::new(),
        }
    }
}

/// A YAML or JSON document as a value whose `source` strings are indexes into the returned
/// table. A JSON document (UTF-8, first non-blank character `{`) is read in place: its text
/// becomes the table's storage, each source a span of it, so a large config is held once, not
/// as the bytes read plus a value's copy of every string. YAML (and JSON that is not UTF-8,
/// whose error the plain reader words) goes through a plain value.
fn read_document(mut bytes: Vec<u8>) -> Result<(Value, SourceTable)> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    let json = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if json {
        match String::from_utf8(bytes) {
            Ok(text) => return Ok(parse_json_document(text)?),
            Err(e) => bytes = e.into_bytes(),
        }
    }
    let config = IgnitionJson::from_value(parse_value(&bytes)?);
    Ok(config.into_parts())
}

/// A JSON document in `file` (first non-blank character `{`, after a byte order mark) read
/// with its sources left in the file ([`parse_json_file`]); `None` when the file is not JSON or
/// the streamed read fails: the caller then reads the file whole as before, whose error is the
/// one reported (the same parser's, or YAML's for what is not UTF-8 JSON).
fn read_json_file(file: &Arc<SourceFile>) -> Option<(Value, SourceTable)> {
    let head = file.head(4096).ok()?;
    let start = if head.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    let first = head[start..].iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return None;
    }
    parse_json_file(file, start as u64).ok()
}

/// Warns about what the parser ignored (unknown keys), as Ignition does, naming the file and
/// the path as written in it (`prefix`: where the Ignition config sits in the document); returns
/// them so that `--strict` can refuse them.
fn warn_unused(file: &Path, parsed: &ParsedConfig, prefix: &str) -> Vec<Issue> {
    let ignored: Vec<Issue> = parsed
        .warnings
        .iter()
        .map(|w| w.clone().under(prefix))
        .collect();
    for issue in &ignored {
        tracing::warn!("{}: {issue}; ignored", file.display());
    }
    ignored
}

/// Name of a MachineConfig wrapping a bare Ignition config: the file name without extension.
fn name_for(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "ignition".to_string())
}

/// The MachineConfig recorded in `root`, or `None` if nothing was applied yet. In an
/// image-mode pool the layered image recorded in `currentimage` is embedded in it
/// ([`machine_config::mco::image`]), as the MCD reads its on-disk config.
pub fn read_current(root: &Root) -> Result<Option<LoadedConfig>> {
    let path = Path::new(CURRENT_CONFIG);
    let host_path = root.host_path(path);
    // Streamed, its sources left in the file (see `read_json_file`): the file is replaced by a
    // rename, never written in place, so the open file keeps them while the update runs.
    let Some(file) = root.open_file(path).map_err(|e| root.on_host(e))? else {
        return Ok(None);
    };
    let file = SourceFile::from_file(file, &host_path)
        .with_context(|| format!("reading {}", host_path.display()))?;
    let (value, sources) = match read_json_file(&file) {
        Some(document) => document,
        None => {
            let Some(bytes) = root.read(path).map_err(|e| root.on_host(e))? else {
                return Ok(None);
            };
            let text = String::from_utf8(bytes)
                .with_context(|| format!("{}: invalid JSON", host_path.display()))?;
            parse_json_document(text)
                .with_context(|| format!("{}: invalid JSON", host_path.display()))?
        }
    };
    let (mc, parsed) = MachineConfig::from_document(value, sources)
        .with_context(|| root.host_path(path).display().to_string())?;
    let ignition = parsed.config;
    let image = read_current_image(root)?;
    Ok(Some(LoadedConfig {
        machine_config: embed_image(&mc, image.as_deref()),
        ignition,
        field_prefix: "$.spec.config",
        ignored: Vec::new(),
    }))
}

/// Mode of `currentconfig`: the whole MachineConfig (password hashes, the contents of files the
/// config makes 0600) is in it, so only root reads it. A file left 0644 by an earlier version
/// is tightened by the next write (a new file renamed over it).
const CURRENT_CONFIG_MODE: u32 = 0o600;

/// The layered image recorded in `currentimage` (`None`: missing or empty, not in image mode).
pub fn read_current_image(root: &Root) -> Result<Option<String>> {
    let Some(bytes) = root
        .read(Path::new(CURRENT_IMAGE))
        .map_err(|e| root.on_host(e))?
    else {
        return Ok(None);
    };
    let text = String::from_utf8(bytes).with_context(|| {
        format!(
            "{}: not UTF-8",
            root.host_path(Path::new(CURRENT_IMAGE)).display()
        )
    })?;
    Ok(Some(text.trim().to_string()).filter(|i| !i.is_empty()))
}

/// Records `mc` as the applied config (compact JSON, atomic, mode 0600), and the layered image
/// it carries in `currentimage` (empty when none), as the MCD records both: `currentconfig`
/// holds the rendered config as the cluster has it.
pub fn write_current(root: &Root, mc: &MachineConfig) -> Result<()> {
    let (rendered, image) = extract_image(mc);
    root.write_atomic_json(
        Path::new(CURRENT_CONFIG),
        &rendered,
        CURRENT_CONFIG_MODE,
        Owner::ROOT,
    )?;
    // Written whether or not there is an image, so leaving image mode clears it.
    root.write_atomic(
        Path::new(CURRENT_IMAGE),
        image.unwrap_or_default().as_bytes(),
        0o644,
        Owner::ROOT,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_told_apart() {
        let mc = LoadedConfig::from_bytes(
            Path::new("chrony.yaml"),
            b"apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 50-examplecorp-chrony}\nspec:\n  config: {ignition: {version: 2.2.0}}\n",
        )
        .unwrap();
        assert_eq!(mc.machine_config.name(), "50-examplecorp-chrony");
        assert_eq!(mc.field_prefix, "$.spec.config");
        let bare = LoadedConfig::from_bytes(
            Path::new("/srv/bare.ign"),
            br#"{"ignition":{"version":"3.1.0"}}"#,
        )
        .unwrap();
        assert_eq!(bare.machine_config.name(), "bare");
        assert_eq!(bare.field_prefix, "$");
        let e = LoadedConfig::from_bytes(Path::new("x.yaml"), b"foo: bar\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("$: neither a MachineConfig"), "{e}");
    }

    /// A config large enough to be mapped reads as the streamed read gives it; a malformed one
    /// fails as a small one does, naming the file and where.
    #[test]
    fn a_mapped_config_reads_as_a_read_one() {
        let dir = tempfile::tempdir().unwrap();
        let big = "A".repeat(mapped::MAP_AT_LEAST as usize);
        let doc = format!(
            r#"{{"ignition":{{"version":"3.4.0"}},"storage":{{"files":[{{"path":"/etc/big","contents":{{"source":"data:;base64,{big}"}}}}]}}}}"#
        );
        let path = dir.path().join("big.ign");
        std::fs::write(&path, format!("\u{FEFF}{doc}")).unwrap();
        let mapped = LoadedConfig::read_whole(&path).unwrap();
        let streamed = LoadedConfig::read(&path).unwrap();
        assert_eq!(mapped.machine_config, streamed.machine_config);
        assert_eq!(mapped.machine_config.name(), "big");
        assert_eq!(
            mapped.ignition.storage.files[0]
                .decoded_contents()
                .unwrap()
                .len(),
            big.len() / 4 * 3
        );
        // Cut short: the parse's error, naming the file, as for a small file.
        let broken = dir.path().join("broken.ign");
        std::fs::write(&broken, &doc[..doc.len() - 3]).unwrap();
        let small = dir.path().join("small.ign");
        let small_doc = doc.replace(&big, "QUFB");
        std::fs::write(&small, &small_doc[..small_doc.len() - 3]).unwrap();
        let error = |p: &Path| format!("{:#}", LoadedConfig::read_whole(p).unwrap_err());
        let (broken_error, small_error) = (error(&broken), error(&small));
        assert!(
            broken_error.starts_with(&broken.display().to_string()),
            "{broken_error}"
        );
        assert!(
            small_error.starts_with(&small.display().to_string()),
            "{small_error}"
        );
        let tail = |e: &str| {
            e.rsplit(": ")
                .next()
                .unwrap()
                .split(" at ")
                .next()
                .unwrap()
                .to_string()
        };
        assert_eq!(tail(&broken_error), tail(&small_error));
    }

    #[test]
    fn the_layered_image_is_recorded_beside_the_rendered_config() {
        use machine_config::mco::image::layered_image;
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let rendered = MachineConfig::new(
            "rendered-a",
            MachineConfigSpec {
                os_image_url: "quay.io/base@sha256:1".into(),
                ..MachineConfigSpec::default()
            },
        );
        let layered = embed_image(&rendered, Some("registry.example/ocl@sha256:2"));
        write_current(&root, &layered).unwrap();
        let on_disk = |p: &str| std::fs::read_to_string(root.host_path(Path::new(p))).unwrap();
        assert_eq!(on_disk(CURRENT_IMAGE), "registry.example/ocl@sha256:2");
        let recorded: serde_json::Value = serde_json::from_str(&on_disk(CURRENT_CONFIG)).unwrap();
        assert_eq!(recorded["spec"]["osImageURL"], "quay.io/base@sha256:1");
        assert!(
            recorded["metadata"].get("annotations").is_none(),
            "{recorded}"
        );
        let back = read_current(&root).unwrap().unwrap().machine_config;
        assert_eq!(back, layered);
        // Leaving image mode empties currentimage; the MCD's trailing newline is tolerated.
        write_current(&root, &rendered).unwrap();
        assert_eq!(on_disk(CURRENT_IMAGE), "");
        assert_eq!(
            layered_image(&read_current(&root).unwrap().unwrap().machine_config),
            None
        );
        std::fs::write(
            root.host_path(Path::new(CURRENT_IMAGE)),
            "registry.example/x@sha256:3\n",
        )
        .unwrap();
        assert_eq!(
            read_current_image(&root).unwrap().as_deref(),
            Some("registry.example/x@sha256:3")
        );
    }

    #[test]
    fn currentconfig_is_readable_by_root_only_even_when_it_was_not() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join(CURRENT_CONFIG.trim_start_matches('/'));
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        // What an earlier version left: world-readable.
        std::fs::write(&host, "{}").unwrap();
        std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o644)).unwrap();
        let root = Root::open(dir.path()).unwrap();
        let mc = MachineConfig::new("rendered-a", MachineConfigSpec::default());
        write_current(&root, &mc).unwrap();
        let mode = std::fs::metadata(&host).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            read_current(&root).unwrap().unwrap().machine_config.name(),
            "rendered-a"
        );
    }
}
