//! The agent's layers point one way: every `crate::<module>` path in `src/` names a module of
//! the same layer or one below, and the modules of one layer do not import each other in a
//! circle. The table is the one `src/lib.rs` describes; a new top-level module must be added
//! to it (the test fails on a module it does not know).
//!
//! The workspace's crates point one way too (`docs/architecture.md`, "Crates and binaries"):
//! a crate's libraries (`[dependencies]`, `[build-dependencies]`) are of a layer below its own,
//! so `mco-agent` and `mco-companion` (one layer) never link each other, and the Kubernetes
//! code both use is in `mco-kube` below them. Tests may cross (`[dev-dependencies]`: the
//! agent's tests fetch configs from the companion's server, the companion's answer the agent's
//! FleetLock client): that links no shipped binary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of the agent and its layer (0 is the bottom; `machine-config` is
/// under all of them).
const LAYERS: &[(&str, u8)] = &[
    ("failpoints", 0),
    ("idle_pages", 0),
    ("logging", 0),
    ("notify", 0),
    ("rootfs", 0),
    ("stop", 0),
    ("system_bus", 0),
    ("apply", 1),
    ("certs", 1),
    ("hooks", 1),
    ("input", 1),
    ("units", 1),
    ("validate", 1),
    ("cluster", 2),
    ("host", 2),
    ("os", 2),
    ("strategy", 2),
    ("engine", 3),
    ("pinned", 3),
    ("daemon", 4),
    ("gather", 4),
    ("metrics", 4),
    ("once", 4),
    ("pivot", 4),
    ("cli", 5),
];

fn layer(module: &str) -> u8 {
    LAYERS
        .iter()
        .find(|(m, _)| *m == module)
        .map(|(_, l)| *l)
        .unwrap_or_else(|| panic!("module `{module}` is not in the layer table of tests/layers.rs"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module `file` belongs to (`src/engine/steps.rs` → `engine`); `None` for the
/// crate root and the binary.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?;
    match first {
        "lib.rs" | "main.rs" => None,
        name => Some(name.trim_end_matches(".rs").to_string()),
    }
}

/// The modules `code` names as `crate::<module>`, outside comments.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let bounded = at == 0 || {
                let before = rest.as_bytes()[at - 1];
                !(before.is_ascii_alphanumeric() || before == b'_')
            };
            if bounded && !name.is_empty() {
                found.insert(name);
            }
            rest = after;
        }
    }
    found
}

/// `module -> the modules it names`, over every file of `src/`.
fn imports() -> BTreeMap<String, BTreeSet<(String, PathBuf)>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut graph: BTreeMap<String, BTreeSet<(String, PathBuf)>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(&src, &file) else {
            continue;
        };
        let code = std::fs::read_to_string(&file).unwrap();
        let rel = file.strip_prefix(&src).unwrap().to_path_buf();
        let targets = graph.entry(module.clone()).or_default();
        for target in crate_paths(&code) {
            if target != module {
                targets.insert((target, rel.clone()));
            }
        }
    }
    graph
}

#[test]
fn no_module_imports_from_a_layer_above_it() {
    let mut upward = Vec::new();
    for (module, targets) in imports() {
        for (target, file) in targets {
            if layer(&target) > layer(&module) {
                upward.push(format!(
                    "src/{}: {module} (layer {}) uses crate::{target} (layer {})",
                    file.display(),
                    layer(&module),
                    layer(&target)
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run up the layers:\n{}",
        upward.join("\n")
    );
}

#[test]
fn modules_of_one_layer_do_not_import_each_other_in_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> = imports()
        .into_iter()
        .map(|(m, ts)| (m, ts.into_iter().map(|(t, _)| t).collect()))
        .collect();
    // Depth-first search for a path back to the start.
    fn reaches(
        graph: &BTreeMap<String, BTreeSet<String>>,
        from: &str,
        to: &str,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        graph
            .get(from)
            .into_iter()
            .flatten()
            .any(|next| next == to || (seen.insert(next.clone()) && reaches(graph, next, to, seen)))
    }
    let circular: Vec<&String> = graph
        .keys()
        .filter(|m| reaches(&graph, m, m, &mut BTreeSet::new()))
        .collect();
    assert!(
        circular.is_empty(),
        "modules in an import circle: {circular:?}"
    );
}

#[test]
fn the_scan_sees_paths_and_skips_comments() {
    let found = crate_paths(
        "use crate::rootfs::Root;\n    x = crate::engine::record::now_ms(); // crate::cli\n/// [`crate::daemon`]\nmy_crate::once",
    );
    assert_eq!(
        found,
        BTreeSet::from(["engine".to_string(), "rootfs".to_string()])
    );
}

/// Each crate of the workspace and its layer; a crate may link only crates of a lower layer.
const CRATE_LAYERS: &[(&str, u8)] = &[
    ("machine-config", 0),
    ("mco-test-support", 0),
    ("mco-kube", 1),
    ("mco-agent", 2),
    ("mco-companion", 2),
    ("kubectl-mco", 2),
    ("mco-firstboot", 3),
    ("mco-sysroot-status", 3),
    ("mco-docgen", 4),
    ("mco-vm-tests", 4),
    ("mco-cluster-tests", 4),
];

fn crate_layer(name: &str) -> u8 {
    CRATE_LAYERS
        .iter()
        .find(|(c, _)| *c == name)
        .map(|(_, l)| *l)
        .unwrap_or_else(|| panic!("crate `{name}` is not in CRATE_LAYERS of tests/layers.rs"))
}

/// `crate -> the workspace crates it links` (normal and build dependencies, target-specific
/// ones included; dev-dependencies left out), read from every member's Cargo.toml.
fn crate_links() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |path: PathBuf| -> toml::Table {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        text.parse()
            .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
    };
    let workspace = read(root.join("Cargo.toml"));
    let members: Vec<&str> = workspace["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .map(|m| m.as_str().expect("a member path"))
        .collect();
    let manifests: Vec<toml::Table> = members
        .iter()
        .map(|m| read(root.join(m).join("Cargo.toml")))
        .collect();
    let names: BTreeSet<String> = manifests
        .iter()
        .map(|m| m["package"]["name"].as_str().unwrap().to_string())
        .collect();
    let mut links = BTreeMap::new();
    for manifest in &manifests {
        let name = manifest["package"]["name"].as_str().unwrap().to_string();
        let mut tables: Vec<&toml::Table> = Vec::new();
        for key in ["dependencies", "build-dependencies"] {
            tables.extend(manifest.get(key).and_then(|t| t.as_table()));
            for target in manifest
                .get("target")
                .and_then(|t| t.as_table())
                .into_iter()
                .flat_map(|t| t.values())
            {
                tables.extend(target.get(key).and_then(|t| t.as_table()));
            }
        }
        let deps: BTreeSet<String> = tables
            .into_iter()
            .flat_map(|t| t.iter())
            .map(|(key, spec)| {
                // `alias = { package = "real-name", ... }` links `real-name`
                spec.get("package")
                    .and_then(|p| p.as_str())
                    .unwrap_or(key)
                    .to_string()
            })
            .filter(|dep| names.contains(dep))
            .collect();
        links.insert(name, deps);
    }
    links
}

/// Every crate `from` links, directly or through others.
fn linked_closure(links: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(next) = todo.pop() {
        for dep in links.get(&next).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                todo.push(dep.clone());
            }
        }
    }
    seen
}

#[test]
fn no_crate_links_a_crate_of_its_own_layer_or_above() {
    let mut wrong = Vec::new();
    for (name, deps) in crate_links() {
        for dep in deps {
            if crate_layer(&dep) >= crate_layer(&name) {
                wrong.push(format!(
                    "{name} (layer {}) links {dep} (layer {})",
                    crate_layer(&name),
                    crate_layer(&dep)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "crate dependencies that do not run down the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn neither_binary_links_the_others_library() {
    let links = crate_links();
    for (binary, other) in [
        ("mco-agent", "mco-companion"),
        ("mco-companion", "mco-agent"),
    ] {
        let closure = linked_closure(&links, binary);
        assert!(
            !closure.is_empty(),
            "{binary} links no workspace crate: the Cargo.toml scan found nothing"
        );
        assert!(
            !closure.contains(other),
            "{binary} links {other}'s library (through: {closure:?}); \
             shared code belongs in mco-kube or machine-config"
        );
        assert!(
            closure.contains("mco-kube"),
            "{binary} no longer links mco-kube: update CRATE_LAYERS and docs/architecture.md"
        );
    }
}

#[test]
fn the_crate_scan_follows_links_through_other_crates() {
    let links = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::new()),
    ]);
    assert_eq!(
        linked_closure(&links, "a"),
        BTreeSet::from(["b".to_string(), "c".to_string()])
    );
}
