//! The internal form: Ignition config spec 3.5 types.
//!
//! Field names and optionality follow the spec (camelCase, `Option` where the spec allows the
//! field to be absent) so that a config serializes back to the JSON Ignition 3.5 accepts.
//! `disks`, `filesystems`, `raid` and `luks` stay raw JSON values: the node agent only compares
//! them (any change is unreconcilable), so typing them would add nothing but drift.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::source::Source;

/// The `version` every parsed config carries once translated to the internal form.
pub const INTERNAL_VERSION: &str = "3.5.0";

/// An Ignition config in the internal (spec 3.5) form.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    pub ignition: Ignition,
    #[serde(default, skip_serializing_if = "KernelArguments::is_empty")]
    pub kernel_arguments: KernelArguments,
    #[serde(default, skip_serializing_if = "Passwd::is_empty")]
    pub passwd: Passwd,
    #[serde(default, skip_serializing_if = "Storage::is_empty")]
    pub storage: Storage,
    #[serde(default, skip_serializing_if = "Systemd::is_empty")]
    pub systemd: Systemd,
}

/// The `ignition` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ignition {
    #[serde(default, skip_serializing_if = "IgnitionConfig::is_empty")]
    pub config: IgnitionConfig,
    #[serde(default, skip_serializing_if = "Proxy::is_empty")]
    pub proxy: Proxy,
    #[serde(default, skip_serializing_if = "Security::is_empty")]
    pub security: Security,
    #[serde(default, skip_serializing_if = "Timeouts::is_empty")]
    pub timeouts: Timeouts,
    #[serde(default)]
    pub version: String,
}

/// `ignition.config`: configs to merge with or replace this one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IgnitionConfig {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merge: Vec<Resource>,
    #[serde(default, skip_serializing_if = "Resource::is_empty")]
    pub replace: Resource,
}

/// `ignition.proxy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Proxy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_proxy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_proxy: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_proxy: Vec<String>,
}

/// `ignition.security`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Security {
    #[serde(default, skip_serializing_if = "Tls::is_empty")]
    pub tls: Tls,
}

/// `ignition.security.tls`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tls {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificate_authorities: Vec<Resource>,
}

/// `ignition.timeouts` (seconds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeouts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_response_headers: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_total: Option<i64>,
}

/// A fetched resource: file contents, an appended fragment, a CA, a merged config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    #[serde(default, skip_serializing_if = "Verification::is_empty")]
    pub verification: Verification,
}

/// An HTTP header sent when fetching a remote resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHeader {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `verification.hash`: `sha512-<hex>` or `sha256-<hex>` of the raw (still compressed) resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Verification {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

/// `kernelArguments` (spec 3.3+).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KernelArguments {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub should_exist: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub should_not_exist: Vec<String>,
}

/// The `passwd` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Passwd {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<PasswdGroup>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<PasswdUser>,
}

/// A `passwd.groups` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PasswdGroup {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<i64>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_exist: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<bool>,
}

/// A `passwd.users` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PasswdUser {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gecos: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_dir: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_create_home: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_log_init: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_user_group: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_group: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_authorized_keys: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_exist: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<i64>,
}

/// The `storage` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Storage {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<Directory>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub luks: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raid: Vec<Value>,
}

/// Owner of a node, by id or by name (not both).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeOwner {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A `storage.files` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct File {
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub group: NodeOwner,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    pub path: String,
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub user: NodeOwner,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub append: Vec<Resource>,
    #[serde(default, skip_serializing_if = "Resource::is_empty")]
    pub contents: Resource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i64>,
}

/// A `storage.directories` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Directory {
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub group: NodeOwner,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    pub path: String,
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub user: NodeOwner,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i64>,
}

/// A `storage.links` entry (symbolic unless `hard`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Link {
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub group: NodeOwner,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    pub path: String,
    #[serde(default, skip_serializing_if = "NodeOwner::is_empty")]
    pub user: NodeOwner,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The `systemd` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Systemd {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<Unit>,
}

/// A `systemd.units` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Unit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropins: Vec<Dropin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<bool>,
    pub name: String,
}

/// A drop-in of a unit, written to `/etc/systemd/system/<unit>.d/<name>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dropin {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
    pub name: String,
}

macro_rules! impl_is_empty {
    ($($t:ty),*) => {$(
        impl $t {
            /// True when every field has its default (the section serializes to nothing).
            pub fn is_empty(&self) -> bool {
                *self == Self::default()
            }
        }
    )*};
}
impl_is_empty!(
    KernelArguments,
    Passwd,
    Storage,
    Systemd,
    IgnitionConfig,
    Proxy,
    Security,
    Tls,
    Timeouts,
    Resource,
    Verification,
    NodeOwner
);

impl Config {
    /// An empty config of the internal version.
    pub fn empty() -> Self {
        Config {
            ignition: Ignition {
                version: INTERNAL_VERSION.to_string(),
                ..Ignition::default()
            },
            ..Config::default()
        }
    }
}

/// The permission bits a `mode` sets on disk. Specs before 3.6.0 ignore the setuid, setgid
/// and sticky bits (Ignition drops them, as Go's `os.FileMode` conversion does; so does the
/// MCD); the MCO refuses them in files anyway.
const APPLIED_MODE_BITS: i64 = 0o777;

impl File {
    /// The mode the file gets on disk: `mode`, or 0644 when unset (Ignition's and the MCD's
    /// default), without special bits.
    pub fn mode_or_default(&self) -> u32 {
        self.mode.map_or(0o644, |m| (m & APPLIED_MODE_BITS) as u32)
    }
}

impl Directory {
    /// The mode the directory gets on disk: `mode`, or 0755 when unset, without the setuid,
    /// setgid and sticky bits (which Ignition ignores before spec 3.6.0).
    pub fn mode_or_default(&self) -> u32 {
        self.mode.map_or(0o755, |m| (m & APPLIED_MODE_BITS) as u32)
    }
}

impl Unit {
    /// True when `mask: true`.
    pub fn is_masked(&self) -> bool {
        self.mask == Some(true)
    }
}

impl Link {
    /// True when `hard: true`.
    pub fn is_hard(&self) -> bool {
        self.hard == Some(true)
    }
}
