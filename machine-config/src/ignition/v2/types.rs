//! Spec 2.2 types (only what translation reads; unknown keys were reported before decoding).

use serde::Deserialize;
use serde_json::Value;

use crate::ignition::types as v3;
use crate::source::Source;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Config {
    pub(crate) ignition: Ignition,
    pub(crate) networkd: Networkd,
    pub(crate) passwd: Passwd,
    pub(crate) storage: Storage,
    pub(crate) systemd: Systemd,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Ignition {
    pub(crate) config: IgnitionConfig,
    pub(crate) security: Security,
    pub(crate) timeouts: v3::Timeouts,
    #[allow(dead_code)] // checked before typed decoding
    pub(crate) version: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct IgnitionConfig {
    pub(crate) append: Vec<Reference>,
    pub(crate) replace: Option<Reference>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Reference {
    pub(crate) source: Source,
    pub(crate) verification: v3::Verification,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Security {
    pub(crate) tls: Tls,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Tls {
    pub(crate) certificate_authorities: Vec<Reference>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Networkd {
    pub(crate) units: Vec<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Passwd {
    pub(crate) groups: Vec<Group>,
    pub(crate) users: Vec<User>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Group {
    pub(crate) gid: Option<i64>,
    pub(crate) name: String,
    pub(crate) password_hash: String,
    pub(crate) system: bool,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct User {
    pub(crate) create: Option<Value>,
    pub(crate) gecos: String,
    pub(crate) groups: Vec<String>,
    pub(crate) home_dir: String,
    pub(crate) name: String,
    pub(crate) no_create_home: bool,
    pub(crate) no_log_init: bool,
    pub(crate) no_user_group: bool,
    pub(crate) password_hash: Option<String>,
    pub(crate) primary_group: String,
    pub(crate) ssh_authorized_keys: Vec<String>,
    pub(crate) shell: String,
    pub(crate) system: bool,
    pub(crate) uid: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Storage {
    pub(crate) directories: Vec<Directory>,
    pub(crate) disks: Vec<Disk>,
    pub(crate) files: Vec<File>,
    pub(crate) filesystems: Vec<Filesystem>,
    pub(crate) links: Vec<Link>,
    pub(crate) raid: Vec<Raid>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Owner {
    pub(crate) id: Option<i64>,
    pub(crate) name: String,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Node {
    pub(crate) filesystem: String,
    pub(crate) group: Option<Owner>,
    pub(crate) overwrite: Option<bool>,
    pub(crate) path: String,
    pub(crate) user: Option<Owner>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct File {
    #[serde(flatten)]
    pub(crate) node: Node,
    pub(crate) append: bool,
    pub(crate) contents: Contents,
    pub(crate) mode: Option<i64>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Contents {
    pub(crate) compression: String,
    pub(crate) source: Source,
    pub(crate) verification: v3::Verification,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Directory {
    #[serde(flatten)]
    pub(crate) node: Node,
    pub(crate) mode: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Link {
    #[serde(flatten)]
    pub(crate) node: Node,
    pub(crate) hard: bool,
    pub(crate) target: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Disk {
    pub(crate) device: String,
    pub(crate) partitions: Vec<Partition>,
    pub(crate) wipe_table: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Partition {
    pub(crate) guid: String,
    pub(crate) label: String,
    pub(crate) number: i64,
    pub(crate) size: i64,
    pub(crate) start: i64,
    pub(crate) type_guid: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Filesystem {
    pub(crate) mount: Option<Mount>,
    pub(crate) name: String,
    pub(crate) path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Mount {
    pub(crate) create: Option<Value>,
    pub(crate) device: String,
    pub(crate) format: String,
    pub(crate) label: Option<String>,
    pub(crate) options: Vec<String>,
    pub(crate) wipe_filesystem: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Raid {
    pub(crate) devices: Vec<String>,
    pub(crate) level: String,
    pub(crate) name: String,
    pub(crate) options: Vec<String>,
    pub(crate) spares: i64,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Systemd {
    pub(crate) units: Vec<Unit>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Unit {
    pub(crate) contents: String,
    pub(crate) dropins: Vec<Dropin>,
    pub(crate) enable: bool,
    pub(crate) enabled: Option<bool>,
    pub(crate) mask: bool,
    pub(crate) name: String,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Dropin {
    pub(crate) contents: String,
    pub(crate) name: String,
}
