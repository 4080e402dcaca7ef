//! Ignition spec 2.2 and its translation to the internal (3.5) form, the way the MCO does it
//! (its `removeIgnDuplicateFilesUnitsUsers`, then Ignition's 2.2 → 2.3 translation, then
//! ign-converter's `v23tov30` with the filesystem map `{"root": "/"}`): duplicate files and units
//! are collapsed (the last entry wins; a dropped unit's drop-ins are kept when the winner lacks
//! them), every user must be `core` and their SSH keys are gathered into one user, files default
//! to `overwrite: true` (2.x semantics) and `append: true` becomes an append fragment with
//! `overwrite: false`. What is refused before translation, and what is dropped with a warning,
//! is in [`check`]. Sources are kept as they are, an empty one included (`source: ""`, as
//! `v23tov30` keeps it).
//!
//! One deliberate difference: survivors of de-duplication keep their original relative order
//! (the MCO's helper reverses them), which changes nothing but serialization order.

use serde_json::{Map, Value, json};

use crate::ignition::types as v3;
pub(crate) use types::*;

mod check;
mod types;
use crate::error::Issue;

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn true_or_none(b: bool) -> Option<bool> {
    b.then_some(true)
}

/// A translated config and what translation dropped or reinterpreted.
pub(crate) struct Translated {
    pub(crate) config: v3::Config,
    pub(crate) warnings: Vec<Issue>,
}

/// Translates a decoded spec 2.2 config. Errors and warnings are located in the 2.2 document.
pub(crate) fn translate(cfg: Config) -> Result<Translated, Vec<Issue>> {
    let findings = check::check(&cfg);
    if !findings.errors.is_empty() {
        return Err(findings.errors);
    }
    Ok(Translated {
        config: build(cfg),
        warnings: findings.warnings,
    })
}

fn build(cfg: Config) -> v3::Config {
    let reference = |r: &Reference| v3::Resource {
        source: Some(r.source.clone()),
        verification: r.verification.clone(),
        ..v3::Resource::default()
    };
    let mut out = v3::Config::empty();
    out.ignition.config.merge = cfg.ignition.config.append.iter().map(reference).collect();
    if let Some(r) = &cfg.ignition.config.replace {
        out.ignition.config.replace = reference(r);
    }
    out.ignition.security.tls.certificate_authorities = cfg
        .ignition
        .security
        .tls
        .certificate_authorities
        .iter()
        .map(reference)
        .collect();
    out.ignition.timeouts = cfg.ignition.timeouts.clone();
    out.passwd.groups = cfg
        .passwd
        .groups
        .iter()
        .map(|g| v3::PasswdGroup {
            gid: g.gid,
            name: g.name.clone(),
            password_hash: non_empty(&g.password_hash),
            system: true_or_none(g.system),
            should_exist: None,
        })
        .collect();
    out.passwd.users = merge_users(&cfg.passwd.users);
    out.systemd.units = dedupe_units(&cfg.systemd.units);
    out.storage.files = dedupe_files(&cfg.storage.files)
        .into_iter()
        .map(translate_file)
        .collect();
    out.storage.directories = cfg
        .storage
        .directories
        .iter()
        .map(|d| {
            let (group, overwrite, path, user) = node(&d.node);
            v3::Directory {
                group,
                overwrite,
                path,
                user,
                mode: d.mode,
            }
        })
        .collect();
    out.storage.links = cfg
        .storage
        .links
        .iter()
        .map(|l| {
            let (group, overwrite, path, user) = node(&l.node);
            v3::Link {
                group,
                overwrite,
                path,
                user,
                hard: true_or_none(l.hard),
                target: Some(l.target.clone()),
            }
        })
        .collect();
    out.storage.disks = cfg.storage.disks.iter().map(disk).collect();
    out.storage.raid = cfg.storage.raid.iter().map(raid).collect();
    out
}

fn node(n: &Node) -> (v3::NodeOwner, Option<bool>, String, v3::NodeOwner) {
    let owner = |o: &Option<Owner>| {
        o.as_ref()
            .map_or_else(v3::NodeOwner::default, |o| v3::NodeOwner {
                id: o.id,
                name: non_empty(&o.name),
            })
    };
    (
        owner(&n.group),
        n.overwrite,
        crate::ignition::clean_path(&n.path),
        owner(&n.user),
    )
}

fn translate_file(f: File) -> v3::File {
    let (group, overwrite, path, user) = node(&f.node);
    // 2.x files overwrite by default; an append fragment must not overwrite.
    let overwrite = if f.append {
        Some(false)
    } else {
        Some(overwrite.unwrap_or(true))
    };
    let contents = v3::Resource {
        compression: non_empty(&f.contents.compression),
        source: Some(f.contents.source.clone()),
        verification: f.contents.verification.clone(),
        ..v3::Resource::default()
    };
    let (append, contents) = if f.append {
        (vec![contents], v3::Resource::default())
    } else {
        (Vec::new(), contents)
    };
    v3::File {
        group,
        overwrite,
        path,
        user,
        append,
        contents,
        mode: f.mode,
    }
}

/// Last entry per path wins; survivors keep their relative order.
fn dedupe_files(files: &[File]) -> Vec<File> {
    let mut out: Vec<File> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let later = files[i + 1..].iter().any(|g| g.node.path == f.node.path);
        if !later {
            out.push(f.clone());
        }
    }
    out
}

/// Last entry per name wins; drop-ins of the losers are appended when the winner lacks them
/// (latest first, like the MCO).
fn dedupe_units(units: &[Unit]) -> Vec<v3::Unit> {
    let mut out = Vec::new();
    for (i, u) in units.iter().enumerate() {
        if units[i + 1..].iter().any(|g| g.name == u.name) {
            continue;
        }
        let mut winner = u.clone();
        for loser in units[..i].iter().rev().filter(|g| g.name == u.name) {
            for d in &loser.dropins {
                if !winner.dropins.iter().any(|w| w.name == d.name) {
                    winner.dropins.push(d.clone());
                }
            }
        }
        out.push(translate_unit(&winner));
    }
    out
}

fn translate_unit(u: &Unit) -> v3::Unit {
    let enabled = match u.enabled {
        Some(false) => Some(false),
        Some(true) => Some(true),
        None => u.enable.then_some(true),
    };
    v3::Unit {
        name: u.name.clone(),
        enabled,
        mask: true_or_none(u.mask),
        contents: non_empty(&u.contents),
        dropins: u
            .dropins
            .iter()
            .map(|d| v3::Dropin {
                name: d.name.clone(),
                contents: non_empty(&d.contents),
            })
            .collect(),
    }
}

/// All users are `core` (checked before): the last one wins, with every user's SSH keys
/// gathered (its own first, then earlier users' from the latest back), duplicates dropped.
fn merge_users(users: &[User]) -> Vec<v3::PasswdUser> {
    let Some(last) = users.last() else {
        return Vec::new();
    };
    let mut keys: Vec<String> = last.ssh_authorized_keys.clone();
    for u in users[..users.len() - 1].iter().rev() {
        keys.extend(u.ssh_authorized_keys.iter().cloned());
    }
    let mut unique: Vec<String> = Vec::new();
    for k in keys {
        if !unique.contains(&k) {
            unique.push(k);
        }
    }
    vec![v3::PasswdUser {
        name: last.name.clone(),
        password_hash: last.password_hash.clone(),
        ssh_authorized_keys: unique,
        uid: last.uid,
        gecos: non_empty(&last.gecos),
        home_dir: non_empty(&last.home_dir),
        no_create_home: true_or_none(last.no_create_home),
        primary_group: non_empty(&last.primary_group),
        groups: last.groups.clone(),
        no_user_group: true_or_none(last.no_user_group),
        no_log_init: true_or_none(last.no_log_init),
        shell: non_empty(&last.shell),
        system: true_or_none(last.system),
        should_exist: None,
    }]
}

fn disk(d: &Disk) -> Value {
    let mut m = Map::new();
    m.insert("device".into(), json!(d.device));
    if !d.partitions.is_empty() {
        let parts: Vec<Value> = d
            .partitions
            .iter()
            .map(|p| {
                let mut pm = Map::new();
                pm.insert("label".into(), json!(p.label));
                if p.number != 0 {
                    pm.insert("number".into(), json!(p.number));
                }
                if !p.type_guid.is_empty() {
                    pm.insert("typeGuid".into(), json!(p.type_guid));
                }
                if !p.guid.is_empty() {
                    pm.insert("guid".into(), json!(p.guid));
                }
                Value::Object(pm)
            })
            .collect();
        m.insert("partitions".into(), Value::Array(parts));
    }
    if d.wipe_table {
        m.insert("wipeTable".into(), json!(true));
    }
    Value::Object(m)
}

fn raid(r: &Raid) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(r.name));
    m.insert("level".into(), json!(r.level));
    m.insert("devices".into(), json!(r.devices));
    if r.spares != 0 {
        m.insert("spares".into(), json!(r.spares));
    }
    if !r.options.is_empty() {
        m.insert("options".into(), json!(r.options));
    }
    Value::Object(m)
}
