//! Pinned image sets on a node, as the MCD's `PinnedImageSetManager` handles them, without I/O:
//! its settings, CRI-O's drop-in listing the pinned images ([`crio_drop_in`]), the storage an
//! image set needs ([`image_bytes`], [`check_storage`]), and what the node's MachineConfigNode
//! says about the sets ([`Outcome::conditions`], [`entries`], [`merge_conditions`]).

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::node_conditions::{
    Condition, PINNED_IMAGE_SETS_DEGRADED, PINNED_IMAGE_SETS_PROGRESSING, Set, Status,
};

/// CRI-O's drop-in listing the pinned images.
pub const CRIO_DROP_IN: &str = "/etc/crio/crio.conf.d/50-pinned-images";
/// The unit reloaded after the drop-in changed.
pub const CRIO_SERVICE: &str = "crio.service";
/// CRI-O's socket.
pub const CRI_SOCKET: &str = "/var/run/crio/crio.sock";
/// The kubelet's pull secret, the credentials of every pull.
pub const KUBELET_AUTH_FILE: &str = "/var/lib/kubelet/config.json";
/// Image workers of a node; [`CONTROL_PLANE_WORKERS`] on the control plane.
pub const WORKERS: usize = 5;
/// Image workers of a node labelled [`CONTROL_PLANE_LABEL`] (less I/O next to etcd).
pub const CONTROL_PLANE_WORKERS: usize = 1;
pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/master";
/// The pause of a worker after each image.
pub const WORKER_PAUSE: Duration = Duration::from_secs(1);
/// How long the checks and scheduling of one sync may take.
pub const PREFETCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Storage a node keeps free besides the images: 16Gi.
pub const MIN_FREE_STORAGE: i64 = 16 * 1024 * 1024 * 1024;
/// Pull attempts of one image, and the waits between them.
pub const PULL_ATTEMPTS: u32 = 4;
pub const PULL_WAITS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];
/// The largest CRI message accepted.
pub const CRI_MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// The longest `lastFailedGenerationError` the API accepts.
pub const MAX_ERROR_LEN: usize = 32768;

pub const REASON_PREFETCH: &str = "ImagePrefetch";
pub const REASON_AS_EXPECTED: &str = "AsExpected";
pub const REASON_PREFETCH_FAILED: &str = "PrefetchFailed";
pub const COMPLETE_MESSAGE: &str = "All pinned image sets complete";
pub const ALL_GOOD_MESSAGE: &str = "All is good";
pub const DEGRADED_MESSAGE: &str = "One or more PinnedImageSet is experiencing an error. See PinnedImageSet list for more details.";

/// The drop-in for `images` (sorted, without duplicates): TOML as the MCD's encoder writes it,
/// a table per level indented by two spaces.
pub fn crio_drop_in(images: &[String]) -> String {
    let quoted: Vec<String> = images.iter().map(|i| toml_string(i)).collect();
    format!(
        "[crio]\n  [crio.image]\n    pinned_images = [{}]\n",
        quoted.join(", ")
    )
}

fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether the drop-in on disk already says what `wanted` says (the MCD compares the two
/// with surrounding whitespace trimmed).
pub fn drop_in_current(on_disk: &str, wanted: &str) -> bool {
    on_disk.trim() == wanted.trim()
}

/// The images of several sets, without duplicates, sorted: what the drop-in lists.
pub fn union<'a>(images: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    images
        .into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// What one image's manifest says about its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageBytes {
    /// An image: its layers (digest, compressed size).
    Layers(Vec<(String, i64)>),
    /// A manifest list or image index: the manifest of `platform` is the entry with this
    /// digest.
    Entry(String),
}

/// A platform as OCI names it (`linux`, `amd64`, `v8`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl Platform {
    /// The platform this program runs on.
    pub fn host() -> Platform {
        let architecture = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "powerpc64" => "ppc64le",
            other => other,
        };
        Platform {
            os: "linux".into(),
            architecture: architecture.into(),
            variant: (architecture == "arm64").then(|| "v8".to_string()),
        }
    }
}

/// Reads an image manifest (Docker schema 2 or OCI) or a list of them (manifest list or image
/// index). The error says what is wrong with the document.
pub fn image_bytes(manifest: &str, platform: &Platform) -> Result<ImageBytes, String> {
    let doc: Value =
        serde_json::from_str(manifest).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    if let Some(entries) = doc.get("manifests").and_then(Value::as_array) {
        let matches = |e: &&Value, with_variant: bool| {
            let p = &e["platform"];
            p["os"].as_str() == Some(platform.os.as_str())
                && p["architecture"].as_str() == Some(platform.architecture.as_str())
                && (!with_variant || p["variant"].as_str() == platform.variant.as_deref())
        };
        let entry = entries
            .iter()
            .find(|e| matches(e, true))
            .or_else(|| entries.iter().find(|e| matches(e, false)))
            .ok_or_else(|| {
                format!(
                    "the manifest list has no image for {}/{}",
                    platform.os, platform.architecture
                )
            })?;
        let digest = entry["digest"]
            .as_str()
            .ok_or("a manifest list entry has no digest")?;
        return Ok(ImageBytes::Entry(digest.to_string()));
    }
    let layers = doc
        .get("layers")
        .and_then(Value::as_array)
        .ok_or("the manifest has neither layers nor manifests")?;
    layers
        .iter()
        .map(|l| {
            let digest = l["digest"].as_str().ok_or("a layer has no digest")?;
            let size = l["size"].as_i64().ok_or("a layer has no size")?;
            Ok((digest.to_string(), size))
        })
        .collect::<Result<_, &str>>()
        .map(ImageBytes::Layers)
        .map_err(str::to_string)
}

/// The storage check's error, as the MCD words it.
pub const INSUFFICIENT_STORAGE: &str = "storage available is less than minimum required";

/// The MCD's storage rule for one set: the node's allocatable ephemeral storage must be at
/// least [`MIN_FREE_STORAGE`], and twice the compressed size of the set's missing layers (for
/// decompression) must stay below what is left above it.
pub fn check_storage(allocatable: i64, missing_layer_bytes: i64) -> Result<(), String> {
    if allocatable < MIN_FREE_STORAGE {
        return Err(format!(
            "{INSUFFICIENT_STORAGE} capacity: {allocatable}, required: {MIN_FREE_STORAGE}"
        ));
    }
    if missing_layer_bytes.saturating_mul(2) >= allocatable - MIN_FREE_STORAGE {
        return Err(INSUFFICIENT_STORAGE.to_string());
    }
    Ok(())
}

/// A Kubernetes quantity (`120Gi`, `102687672Ki`, `96143933831`, `1e9`, `500M`) in whole
/// units, rounded up as `Quantity.Value()` rounds; `None` when it is not one.
pub fn parse_quantity(text: &str) -> Option<i64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor: f64 = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    let value = (number * factor).ceil();
    (value.is_finite() && value.abs() < 9.2e18).then_some(value as i64)
}

/// Whether an error is the disk being full (the MCD stops pulling the rest of the images).
pub fn is_no_space(error: &str) -> bool {
    error.contains("no space left on device")
}

/// How a sync of the node's sets stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It started.
    Started,
    /// Every image of every set is on the node and pinned.
    Complete,
    /// It failed with this error.
    Failed(String),
}

impl Outcome {
    /// The conditions it sets, with the MCD's reasons and messages (`node`: the node's name).
    pub fn conditions(&self, node: &str) -> Vec<Set> {
        let set = |kind, status, reason: &str, message: String| Set {
            kind,
            status,
            reason: reason.to_string(),
            message,
        };
        match self {
            Outcome::Started => vec![set(
                PINNED_IMAGE_SETS_PROGRESSING,
                Status::True,
                REASON_PREFETCH,
                format!("node is prefetching images: {node}"),
            )],
            Outcome::Complete => vec![
                set(
                    PINNED_IMAGE_SETS_PROGRESSING,
                    Status::False,
                    REASON_AS_EXPECTED,
                    COMPLETE_MESSAGE.into(),
                ),
                set(
                    PINNED_IMAGE_SETS_DEGRADED,
                    Status::False,
                    REASON_AS_EXPECTED,
                    ALL_GOOD_MESSAGE.into(),
                ),
            ],
            Outcome::Failed(_) => vec![set(
                PINNED_IMAGE_SETS_DEGRADED,
                Status::True,
                REASON_PREFETCH_FAILED,
                DEGRADED_MESSAGE.into(),
            )],
        }
    }
}

/// The pinned-image conditions folded into a MachineConfigNode's `existing` ones: each
/// replaces the condition of its type (or is added), stamped `now`; every other condition is
/// left as it is. `None` when nothing would change but the times.
pub fn merge_conditions(existing: &[Condition], sets: &[Set], now: &str) -> Option<Vec<Condition>> {
    let mut out = existing.to_vec();
    let mut changed = false;
    for s in sets {
        let new = Condition {
            kind: s.kind.to_string(),
            status: s.status,
            reason: s.reason.clone(),
            message: s.message.clone(),
            last_transition_time: now.to_string(),
        };
        match out.iter_mut().find(|c| c.kind == s.kind) {
            Some(c)
                if c.status == new.status && c.reason == new.reason && c.message == new.message => {
            }
            Some(c) => {
                *c = new;
                changed = true;
            }
            None => {
                out.push(new);
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

/// One set of the node's pool, as the sync sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetState {
    pub name: String,
    pub generation: i64,
    /// Every image of this generation of the set is known to be on the node.
    pub complete: bool,
}

/// One entry of the MachineConfigNode's `status.pinnedImageSets`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusEntry {
    pub name: String,
    pub desired_generation: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_generation_error: Option<String>,
}

/// `status.pinnedImageSets` after `outcome`, one entry per set of the pool: the desired
/// generation always; the current one for a set known complete, or for every set once the sync
/// completed; after a failure, the failed generation and the error for every set not complete.
pub fn entries(sets: &[SetState], outcome: &Outcome) -> Vec<StatusEntry> {
    sets.iter()
        .map(|s| {
            let mut e = StatusEntry {
                name: s.name.clone(),
                desired_generation: s.generation,
                ..StatusEntry::default()
            };
            match outcome {
                _ if s.complete => e.current_generation = Some(s.generation),
                Outcome::Complete => e.current_generation = Some(s.generation),
                Outcome::Failed(error) => {
                    e.last_failed_generation = Some(s.generation);
                    e.last_failed_generation_error = Some(truncate(error, MAX_ERROR_LEN));
                }
                Outcome::Started => {}
            }
            e
        })
        .collect()
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
#[path = "pinned_images_tests.rs"]
mod tests;
