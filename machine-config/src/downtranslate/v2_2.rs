//! Spec 3.0-shaped config → spec 2.2.0, the way Ignition's `v32tov22` converter maps it:
//! `merge` becomes `append`, nodes get `filesystem: "root"` (or the filesystem whose `path`
//! contains them, with the path made relative), a file's `append` list becomes extra file entries
//! with `append: true`, and filesystems are named by their path.
//!
//! Differences from that converter, chosen deliberately: a file without contents keeps its entry
//! (as an empty `data:,` source) instead of being dropped, and node paths are matched to
//! filesystems by whole path components (`/var` does not contain `/variable`).

use serde_json::{Map, Value, json};

/// 2.2-only refusals, after the 3.0 field gates ran. Appends `<path>: <why>` problems.
pub(super) fn check(config: &Value, problems: &mut Vec<String>) {
    for (d, disk) in list(config, &["storage", "disks"]).iter().enumerate() {
        for (p, part) in list(disk, &["partitions"]).iter().enumerate() {
            let at = format!("$.storage.disks.{d}.partitions.{p}");
            for key in ["sizeMiB", "startMiB"] {
                if !part.get(key).unwrap_or(&Value::Null).is_null() {
                    problems.push(format!(
                        "{at}.{key}: spec 2.2 sizes partitions in sectors, not MiB"
                    ));
                }
            }
            if part.get("wipePartitionEntry") == Some(&Value::Bool(true)) {
                problems.push(format!(
                    "{at}.wipePartitionEntry: not supported by spec 2.2"
                ));
            }
            if part.get("shouldExist") == Some(&Value::Bool(false)) {
                problems.push(format!("{at}.shouldExist: not supported by spec 2.2"));
            }
        }
    }
    for (i, fs) in list(config, &["storage", "filesystems"]).iter().enumerate() {
        if fs
            .get("format")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            problems.push(format!(
                "$.storage.filesystems.{i}.format: spec 2.2 requires a filesystem format"
            ));
        }
    }
    for (i, unit) in list(config, &["systemd", "units"]).iter().enumerate() {
        if unit.get("name").and_then(Value::as_str).is_none() {
            problems.push(format!("$.systemd.units.{i}.name: missing"));
        }
    }
}

/// Builds the spec 2.2.0 config. `Err` only for shapes `check` and validation rule out.
pub(super) fn convert(config: &Value) -> Result<Value, String> {
    let fs_paths: Vec<String> = list(config, &["storage", "filesystems"])
        .iter()
        .filter_map(|fs| fs.get("path").and_then(Value::as_str).map(str::to_string))
        .collect();

    let mut out = Map::new();
    out.insert("ignition".into(), ignition(config.get("ignition")));

    let users: Vec<Value> = list(config, &["passwd", "users"])
        .iter()
        .map(user)
        .collect();
    let groups: Vec<Value> = list(config, &["passwd", "groups"])
        .iter()
        .map(group)
        .collect();
    let mut passwd = Map::new();
    put_list(&mut passwd, "users", users);
    put_list(&mut passwd, "groups", groups);
    put_obj(&mut out, "passwd", passwd);

    let units: Vec<Value> = list(config, &["systemd", "units"])
        .iter()
        .map(unit)
        .collect();
    let mut systemd = Map::new();
    put_list(&mut systemd, "units", units);
    put_obj(&mut out, "systemd", systemd);

    let mut storage = Map::new();
    put_list(
        &mut storage,
        "disks",
        list(config, &["storage", "disks"])
            .iter()
            .map(disk)
            .collect(),
    );
    put_list(
        &mut storage,
        "raid",
        list(config, &["storage", "raid"])
            .iter()
            .map(raid)
            .collect(),
    );
    put_list(&mut storage, "filesystems", filesystems(config));
    let mut files = Vec::new();
    for file in list(config, &["storage", "files"]) {
        files.extend(file_entries(file, &fs_paths)?);
    }
    put_list(&mut storage, "files", files);
    let dirs = list(config, &["storage", "directories"])
        .iter()
        .map(|d| {
            let mut entry = node(d, &fs_paths)?;
            copy(d, &mut entry, "mode");
            Ok(Value::Object(entry))
        })
        .collect::<Result<Vec<_>, String>>()?;
    put_list(&mut storage, "directories", dirs);
    let links = list(config, &["storage", "links"])
        .iter()
        .map(|l| {
            let mut entry = node(l, &fs_paths)?;
            copy_truthy(l, &mut entry, "hard");
            copy(l, &mut entry, "target");
            Ok(Value::Object(entry))
        })
        .collect::<Result<Vec<_>, String>>()?;
    put_list(&mut storage, "links", links);
    put_obj(&mut out, "storage", storage);
    Ok(Value::Object(out))
}

fn ignition(ign: Option<&Value>) -> Value {
    let empty = Value::Null;
    let ign = ign.unwrap_or(&empty);
    let mut out = Map::new();
    out.insert("version".into(), json!("2.2.0"));
    let mut config = Map::new();
    let appends: Vec<Value> = list(ign, &["config", "merge"])
        .iter()
        .map(reference)
        .collect();
    put_list(&mut config, "append", appends);
    if let Some(replace) = ign.pointer("/config/replace")
        && replace.get("source").is_some_and(|s| !s.is_null())
    {
        config.insert("replace".into(), reference(replace));
    }
    put_obj(&mut out, "config", config);
    let cas: Vec<Value> = list(ign, &["security", "tls", "certificateAuthorities"])
        .iter()
        .map(reference)
        .collect();
    if !cas.is_empty() {
        out.insert(
            "security".into(),
            json!({ "tls": { "certificateAuthorities": cas } }),
        );
    }
    if let Some(timeouts) = ign.get("timeouts") {
        let mut t = Map::new();
        copy(timeouts, &mut t, "httpResponseHeaders");
        copy(timeouts, &mut t, "httpTotal");
        put_obj(&mut out, "timeouts", t);
    }
    Value::Object(out)
}

/// `{source, verification}` of a config or CA reference.
fn reference(resource: &Value) -> Value {
    let mut out = Map::new();
    copy(resource, &mut out, "source");
    out.insert("verification".into(), verification(resource));
    Value::Object(out)
}

fn verification(resource: &Value) -> Value {
    let mut out = Map::new();
    if let Some(hash) = resource
        .pointer("/verification/hash")
        .filter(|h| !h.is_null())
    {
        out.insert("hash".into(), hash.clone());
    }
    Value::Object(out)
}

fn user(u: &Value) -> Value {
    let mut out = Map::new();
    for key in [
        "name",
        "passwordHash",
        "sshAuthorizedKeys",
        "uid",
        "gecos",
        "homeDir",
    ] {
        copy(u, &mut out, key);
    }
    copy_truthy(u, &mut out, "noCreateHome");
    copy(u, &mut out, "primaryGroup");
    copy(u, &mut out, "groups");
    copy_truthy(u, &mut out, "noUserGroup");
    copy_truthy(u, &mut out, "noLogInit");
    copy(u, &mut out, "shell");
    copy_truthy(u, &mut out, "system");
    Value::Object(out)
}

fn group(g: &Value) -> Value {
    let mut out = Map::new();
    copy(g, &mut out, "name");
    copy(g, &mut out, "gid");
    copy(g, &mut out, "passwordHash");
    copy_truthy(g, &mut out, "system");
    Value::Object(out)
}

fn unit(u: &Value) -> Value {
    let mut out = Map::new();
    copy(u, &mut out, "name");
    copy(u, &mut out, "enabled");
    copy_truthy(u, &mut out, "mask");
    copy(u, &mut out, "contents");
    let dropins: Vec<Value> = list(u, &["dropins"])
        .iter()
        .map(|d| {
            let mut dropin = Map::new();
            copy(d, &mut dropin, "name");
            copy(d, &mut dropin, "contents");
            Value::Object(dropin)
        })
        .collect();
    put_list(&mut out, "dropins", dropins);
    Value::Object(out)
}

fn disk(d: &Value) -> Value {
    let mut out = Map::new();
    copy(d, &mut out, "device");
    copy_truthy(d, &mut out, "wipeTable");
    let parts: Vec<Value> = list(d, &["partitions"])
        .iter()
        .map(|p| {
            let mut part = Map::new();
            for key in ["label", "number", "typeGuid", "guid"] {
                copy(p, &mut part, key);
            }
            Value::Object(part)
        })
        .collect();
    put_list(&mut out, "partitions", parts);
    Value::Object(out)
}

fn raid(r: &Value) -> Value {
    let mut out = Map::new();
    for key in ["name", "level", "devices", "spares", "options"] {
        copy(r, &mut out, key);
    }
    Value::Object(out)
}

/// Filesystems are named by their path, or `1`, `2`, ... when they have none.
fn filesystems(config: &Value) -> Vec<Value> {
    let mut unnamed = 0;
    list(config, &["storage", "filesystems"])
        .iter()
        .map(|fs| {
            let name = match fs.get("path").and_then(Value::as_str) {
                Some(path) => path.to_string(),
                None => {
                    unnamed += 1;
                    unnamed.to_string()
                }
            };
            let mut mount = Map::new();
            for key in ["device", "format", "label", "uuid", "options"] {
                copy(fs, &mut mount, key);
            }
            copy_truthy(fs, &mut mount, "wipeFilesystem");
            json!({ "name": name, "mount": mount })
        })
        .collect()
}

/// One 2.2 entry for the contents (or an empty file), then one `append: true` entry per append.
fn file_entries(file: &Value, fs_paths: &[String]) -> Result<Vec<Value>, String> {
    let mut base = node(file, fs_paths)?;
    if base.get("overwrite").is_none() {
        // spec 3 defaults overwrite to false; keep that meaning in spec 2 (whose default is true)
        base.insert("overwrite".into(), Value::Bool(false));
    }
    copy(file, &mut base, "mode");
    let mut entries = Vec::new();
    let contents = file.get("contents");
    let has_source = contents.is_some_and(|c| c.get("source").is_some_and(|s| !s.is_null()));
    let appends = list(file, &["append"]);
    if has_source || appends.is_empty() {
        let mut entry = base.clone();
        let empty = json!({ "source": "data:," });
        entry.insert(
            "contents".into(),
            file_contents(if has_source {
                contents.unwrap_or(&empty)
            } else {
                &empty
            }),
        );
        entries.push(Value::Object(entry));
    }
    for append in appends {
        let mut entry = base.clone();
        entry.insert("overwrite".into(), Value::Bool(false));
        entry.insert("append".into(), Value::Bool(true));
        entry.insert("contents".into(), file_contents(append));
        entries.push(Value::Object(entry));
    }
    Ok(entries)
}

fn file_contents(resource: &Value) -> Value {
    let mut out = Map::new();
    if let Some(c) = resource.get("compression").and_then(Value::as_str)
        && !c.is_empty()
    {
        out.insert("compression".into(), json!(c));
    }
    copy(resource, &mut out, "source");
    out.insert("verification".into(), verification(resource));
    Value::Object(out)
}

/// The 2.2 node fields: filesystem + relative path, overwrite, user and group.
fn node(entry: &Value, fs_paths: &[String]) -> Result<Map<String, Value>, String> {
    let path = entry
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| "a storage entry has no path".to_string())?;
    // the longest filesystem path containing the node; "/" itself is the root filesystem
    let mut best: Option<(&str, &str)> = None;
    for fs in fs_paths {
        let trimmed = fs.trim_end_matches('/');
        if trimmed.is_empty() {
            continue;
        }
        let inside = path
            .strip_prefix(trimmed)
            .filter(|rest| rest.starts_with('/'));
        if let Some(rest) = inside
            && best.is_none_or(|(name, _)| fs.len() > name.len())
        {
            best = Some((fs.as_str(), rest));
        }
    }
    let (filesystem, relative) = best.unwrap_or(("root", path));
    let mut out = Map::new();
    out.insert("filesystem".into(), json!(filesystem));
    out.insert("path".into(), json!(relative));
    copy(entry, &mut out, "overwrite");
    for key in ["user", "group"] {
        if let Some(Value::Object(owner)) = entry.get(key) {
            let mut o = Map::new();
            copy_value(owner, &mut o, "id");
            copy_value(owner, &mut o, "name");
            if !o.is_empty() {
                out.insert(key.into(), Value::Object(o));
            }
        }
    }
    Ok(out)
}

fn list<'a>(value: &'a Value, keys: &[&str]) -> &'a [Value] {
    let mut cur = value;
    for key in keys {
        match cur.get(key) {
            Some(next) => cur = next,
            None => return &[],
        }
    }
    cur.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// Copies `key` unless absent or null.
fn copy(from: &Value, to: &mut Map<String, Value>, key: &str) {
    if let Some(map) = from.as_object() {
        copy_value(map, to, key);
    }
}

fn copy_value(from: &Map<String, Value>, to: &mut Map<String, Value>, key: &str) {
    if let Some(v) = from.get(key).filter(|v| !v.is_null()) {
        to.insert(key.to_string(), v.clone());
    }
}

/// Copies a boolean only when true (spec 2.2 booleans are plain `omitempty` fields).
fn copy_truthy(from: &Value, to: &mut Map<String, Value>, key: &str) {
    if from.get(key) == Some(&Value::Bool(true)) {
        to.insert(key.to_string(), Value::Bool(true));
    }
}

fn put_list(to: &mut Map<String, Value>, key: &str, items: Vec<Value>) {
    if !items.is_empty() {
        to.insert(key.to_string(), Value::Array(items));
    }
}

fn put_obj(to: &mut Map<String, Value>, key: &str, obj: Map<String, Value>) {
    if !obj.is_empty() {
        to.insert(key.to_string(), Value::Object(obj));
    }
}
