//! `mco-agent gather`: the support bundle of one node, what `oc adm must-gather` collects for
//! the MCD, as a tar.gz with a `manifest.json`.
//!
//! | item | from |
//! |---|---|
//! | `status.json` | `mco-agent status -o json` (given by the caller) |
//! | `node/etc/machine-config-daemon/mco-agent-update.json`, `node/var/lib/mco-agent/boot-rollback.json` | the update records, secrets left out |
//! | `node/etc/machine-config-daemon/currentconfig` | the config the node is in, secrets left out |
//! | `configs.json` | the current and desired config names and the plan between them |
//! | `journal/<unit>.boot<N>.log` | the agent's and `ostree-finalize-staged`'s journal of this boot and the one before |
//! | `rpm-ostree-status.json` | rpm-ostreed's deployments ([`NodeSources`]) |
//! | `node/<config dir>/<fragment>` | the agent's configuration fragments |
//! | `hooks.json` | the hooks found, their checksums, the results recorded for the update in progress |
//!
//! Files are read under the root ([`Root`]); the journal and rpm-ostreed are asked through
//! [`NodeSources`]. What is missing or cannot be read is an item of the manifest that says why,
//! never a failure of the bundle. Secrets are left out ([`redact`]) and listed.

mod archive;
pub mod manifest;
pub mod redact;
mod sources;

use std::path::Path;

use machine_config::MachineConfig;
use machine_config::mco::paths::{
    BOOTSTRAP_KUBECONFIG, CURRENT_CONFIG, KUBELET_KUBECONFIG, KUBELET_PULL_SECRET,
    MERGED_PULL_SECRET, OSTREE_AUTH,
};
use machine_config::plan::{Plan, PolicyOptions};
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};

use crate::engine::record::{BOOT_ROLLBACK_RECORD, UPDATE_RECORD, UpdateRecord};
use crate::hooks::{self, Phase};
use crate::rootfs::{FileKind, Root};

pub use self::archive::tar_gz;
pub use self::manifest::{Item, Manifest, NotCollected, State};
use self::redact::LeftOut;
#[cfg(test)]
pub use self::sources::FakeSources;
pub use self::sources::{HostSources, NodeSources};

/// The units whose journal is collected.
pub const JOURNAL_UNITS: [&str; 2] = ["mco-agent.service", "ostree-finalize-staged.service"];
/// The boots collected: this one and the one before (journalctl's `--boot` offsets).
pub const JOURNAL_BOOTS: [i32; 2] = [0, -1];

/// The node's files with secrets, never collected (listed in the manifest when present).
pub const NEVER_COLLECTED: &[(&str, &str)] = &[
    ("/etc/shadow", "password hashes"),
    ("/etc/gshadow", "group password hashes"),
    (
        KUBELET_PULL_SECRET,
        "the cluster's pull secret (config.json)",
    ),
    (MERGED_PULL_SECRET, "the merged pull secret"),
    (OSTREE_AUTH, "rpm-ostree's pull secret"),
    (KUBELET_KUBECONFIG, "the kubelet's credentials"),
    (BOOTSTRAP_KUBECONFIG, "the bootstrap credentials"),
    ("/etc/ssh/ssh_host_rsa_key", "an SSH host private key"),
    ("/etc/ssh/ssh_host_ecdsa_key", "an SSH host private key"),
    ("/etc/ssh/ssh_host_ed25519_key", "an SSH host private key"),
];

/// What the caller gives besides the root.
pub struct Request<'a> {
    /// `mco-agent status -o json` of the node.
    pub status: Json,
    /// The directories of the agent's configuration fragments, in the order they are read.
    pub config_dirs: &'a [&'a str],
    /// When the bundle is made (Unix milliseconds).
    pub now_ms: u64,
}

/// The bundle's files and its manifest.
#[derive(Debug)]
pub struct Bundle {
    /// `(path in the bundle, contents)`, in the manifest's order.
    pub files: Vec<(String, Vec<u8>)>,
    pub manifest: Manifest,
}

impl Bundle {
    fn add(&mut self, name: &str, source: String, bytes: Vec<u8>, left_out: Vec<LeftOut>) {
        self.manifest.items.push(Item {
            name: name.to_string(),
            source,
            state: State::Collected,
            reason: None,
            bytes: Some(bytes.len() as u64),
            left_out,
        });
        self.files.push((name.to_string(), bytes));
    }

    fn missing(&mut self, name: &str, source: String, state: State, reason: String) {
        self.manifest.items.push(Item {
            name: name.to_string(),
            source,
            state,
            reason: Some(reason),
            bytes: None,
            left_out: Vec::new(),
        });
    }

    fn add_json(&mut self, name: &str, source: String, value: &Json, left: Vec<LeftOut>) {
        let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
        bytes.push(b'\n');
        self.add(name, source, bytes, left);
    }
}

/// Collects the bundle of the node at `root`.
pub async fn collect(root: &Root, request: Request<'_>, sources: &dyn NodeSources) -> Bundle {
    let mut b = Bundle {
        files: Vec::new(),
        manifest: Manifest::new(root.path().display().to_string(), request.now_ms),
    };
    let mut status = request.status;
    let mut left = Vec::new();
    redact::strings(&mut status, "$", &mut left);
    b.add_json(
        "status.json",
        "mco-agent status -o json".into(),
        &status,
        left,
    );
    let record = update_records(root, &mut b);
    let current = current_config(root, &mut b);
    configs(&status, current.as_ref(), record.as_ref(), &mut b);
    journals(sources, &mut b).await;
    rpm_ostree(sources, &mut b).await;
    config_fragments(root, request.config_dirs, &mut b);
    hooks_found(root, record.as_ref(), &mut b);
    for (path, why) in NEVER_COLLECTED {
        if matches!(root.lstat(Path::new(path)), Ok(Some(_))) {
            b.manifest.not_collected.push(NotCollected {
                path: root.host_path(Path::new(path)).display().to_string(),
                why: (*why).to_string(),
            });
        }
    }
    b
}

/// The bundle's name for a node's file: `node/` and its path.
fn node_name(path: &str) -> String {
    format!("node/{}", path.trim_start_matches('/'))
}

/// Reads a JSON file of the node into the bundle with its MachineConfigs' secrets left out;
/// the parsed document when it was there.
fn node_json(root: &Root, path: &str, absent: &str, b: &mut Bundle) -> Option<Json> {
    let name = node_name(path);
    let source = format!("file {}", root.host_path(Path::new(path)).display());
    let bytes = match root.read(Path::new(path)) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            b.missing(&name, source, State::Absent, absent.to_string());
            return None;
        }
        Err(e) => {
            b.missing(&name, source, State::Failed, e.to_string());
            return None;
        }
    };
    let parsed: Json = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            // not JSON: its fields cannot be told apart, so only its size is kept
            let why = format!(
                "not JSON ({e}): left out whole, it may hold a config's secrets ({} bytes)",
                bytes.len()
            );
            b.missing(&name, source, State::Failed, why);
            return None;
        }
    };
    let mut kept = parsed.clone();
    let mut left = Vec::new();
    redact::machine_config(&mut kept, "$", &mut left);
    b.add_json(&name, source, &kept, left);
    Some(parsed)
}

/// Both update records; the update in progress (the boot rollback's record first, as the
/// engine reads them).
fn update_records(root: &Root, b: &mut Bundle) -> Option<UpdateRecord> {
    let mut found = None;
    for (path, absent) in [
        (
            BOOT_ROLLBACK_RECORD,
            "no boot rollback in progress (the usual case)",
        ),
        (UPDATE_RECORD, "no update in progress"),
    ] {
        if let Some(json) = node_json(root, path, absent, b) {
            found = found.or_else(|| serde_json::from_value(json).ok());
        }
    }
    found
}

fn current_config(root: &Root, b: &mut Bundle) -> Option<MachineConfig> {
    let json = node_json(
        root,
        CURRENT_CONFIG,
        "no config was applied to this root yet",
        b,
    )?;
    crate::input::read_current(root)
        .ok()
        .flatten()
        .map(|c| c.machine_config)
        .or_else(|| serde_json::from_value(json).ok())
}

/// `configs.json`: the current and desired config names and the plan between them.
fn configs(
    status: &Json,
    current: Option<&MachineConfig>,
    record: Option<&UpdateRecord>,
    b: &mut Bundle,
) {
    let desired = status["desired"].as_str().map(str::to_string);
    let current_name = current
        .map(|c| c.name().to_string())
        .or_else(|| status["current"].as_str().map(str::to_string));
    let arch = std::env::consts::ARCH.to_string();
    let (plan, note) = match (record, current) {
        (Some(rec), _) => {
            let mut opts = PolicyOptions {
                arch,
                force: rec.force,
                ..PolicyOptions::default()
            };
            if let Some(policy) = &rec.policy {
                opts.policies = policy.policies.clone();
                opts.overrides = policy.overrides.clone();
            }
            match Plan::new(&rec.current, &rec.desired, &opts) {
                Ok(plan) => (
                    serde_json::from_str::<Json>(&plan.to_json()).ok(),
                    format!("the update in progress, {}", rec.describe()),
                ),
                Err(e) => (None, format!("the update {}: no plan: {e}", rec.describe())),
            }
        }
        (None, Some(c)) if desired.as_deref().is_none_or(|d| d == c.name()) => (
            None,
            "no update: the node is in its desired config".to_string(),
        ),
        (None, _) => match &desired {
            Some(d) => (
                None,
                format!(
                    "no plan: the desired config {d} is not on the node (the agent fetches it \
                     when it updates), only its name"
                ),
            ),
            None => (
                None,
                "no plan: the desired config is not known (no status file, no update record)"
                    .to_string(),
            ),
        },
    };
    let mut value = json!({
        "current": current_name,
        "desired": desired,
        "plan_of": note,
        "plan": plan,
    });
    let mut left = Vec::new();
    redact::strings(&mut value, "$", &mut left);
    b.add_json(
        "configs.json",
        "currentconfig, the status and the update record".into(),
        &value,
        left,
    );
}

async fn journals(sources: &dyn NodeSources, b: &mut Bundle) {
    for unit in JOURNAL_UNITS {
        for boot in JOURNAL_BOOTS {
            let name = format!("journal/{unit}.boot{boot}.log");
            let source = sources.journal_command(unit, boot);
            match sources.journal(unit, boot).await {
                Ok(bytes) => {
                    let (text, left) = redact::text(&String::from_utf8_lossy(&bytes));
                    b.add(&name, source, text.into_bytes(), left);
                }
                Err(why) => b.missing(&name, source, State::Failed, why),
            }
        }
    }
}

async fn rpm_ostree(sources: &dyn NodeSources, b: &mut Bundle) {
    let name = "rpm-ostree-status.json";
    let source = sources.rpm_ostree_source();
    match sources.rpm_ostree_status().await {
        Ok(mut value) => {
            let mut left = Vec::new();
            redact::strings(&mut value, "$", &mut left);
            b.add_json(name, source, &value, left);
        }
        Err(why) => b.missing(name, source, State::Failed, why),
    }
}

/// Every regular file of the fragment directories, secrets in their text left out.
fn config_fragments(root: &Root, dirs: &[&str], b: &mut Bundle) {
    for dir in dirs {
        let source = |p: &Path| format!("file {}", root.host_path(p).display());
        let entries = match root.read_dir(Path::new(dir)) {
            Ok(Some(entries)) => entries,
            Ok(None) => {
                b.missing(
                    &node_name(dir),
                    source(Path::new(dir)),
                    State::Absent,
                    "no such directory".into(),
                );
                continue;
            }
            Err(e) => {
                b.missing(
                    &node_name(dir),
                    source(Path::new(dir)),
                    State::Failed,
                    e.to_string(),
                );
                continue;
            }
        };
        let mut names: Vec<_> = entries
            .into_iter()
            .filter(|(_, kind)| *kind == FileKind::File)
            .map(|(name, _)| name)
            .collect();
        names.sort();
        for file in names {
            let path = Path::new(dir).join(&file);
            let name = node_name(&path.display().to_string());
            match root.read(&path) {
                Ok(Some(bytes)) => match String::from_utf8(bytes) {
                    Ok(text) => {
                        let (text, left) = redact::text(&text);
                        b.add(&name, source(&path), text.into_bytes(), left);
                    }
                    Err(_) => b.missing(
                        &name,
                        source(&path),
                        State::Failed,
                        "not UTF-8 text: left out whole (a fragment is TOML)".into(),
                    ),
                },
                Ok(None) => {}
                Err(e) => b.missing(&name, source(&path), State::Failed, e.to_string()),
            }
        }
    }
}

/// `hooks.json`: every hook found, its size and checksum (its contents are left out: a
/// script may hold credentials), and the result recorded for the update in progress.
fn hooks_found(root: &Root, record: Option<&UpdateRecord>, b: &mut Bundle) {
    let mut found = Vec::new();
    let mut left = Vec::new();
    let mut errors = Vec::new();
    for phase in Phase::ALL {
        let hooks = match hooks::discover(root, phase) {
            Ok(hooks) => hooks,
            Err(e) => {
                errors.push(format!("{e:#}"));
                continue;
            }
        };
        for hook in hooks {
            let info = root.lstat(&hook.path).ok().flatten();
            let sha256 = root
                .read(&hook.path)
                .ok()
                .flatten()
                .map(|bytes| hex::encode(Sha256::digest(&bytes)));
            let result = record.and_then(|r| {
                r.hooks
                    .iter()
                    .find(|m| m.phase == phase.as_str() && m.name == hook.name)
                    .map(|m| json!({"update": r.describe(), "state": m.state}))
            });
            found.push(json!({
                "phase": phase.as_str(),
                "name": hook.name,
                "path": hook.path,
                "kind": hook.kind,
                "mode": info.as_ref().map(|i| format!("{:o}", i.permissions())),
                "size": info.as_ref().map(|i| i.size),
                "sha256": sha256,
                "last_result": result,
            }));
            left.push(LeftOut {
                at: hook.path.display().to_string(),
                why: "a hook's contents (a script may hold credentials; its sha256 identifies it)"
                    .into(),
            });
        }
    }
    let value = json!({
        "dir": hooks::HOOKS_DIR,
        "hooks": found,
        "results": "recorded for the update in progress only; every run's output and result \
                    is in the agent's journal (journal/mco-agent.service.boot*.log)",
        "not_read": errors,
    });
    b.add_json(
        "hooks.json",
        format!("{} under the root", hooks::HOOKS_DIR),
        &value,
        left,
    );
}

#[cfg(test)]
mod tests;
