//! The agent's layers point one way: every `crate::<module>` path in `src/` names a module of
//! the same layer or one below, and the modules of one layer do not import each other in a
//! circle. The table is the one `src/lib.rs` describes; a new top-level module must be added
//! to it (the test fails on a module it does not know).

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
    ("system_bus", 0),
    ("apply", 1),
    ("hooks", 1),
    ("input", 1),
    ("units", 1),
    ("validate", 1),
    ("cluster", 2),
    ("host", 2),
    ("os", 2),
    ("strategy", 2),
    ("engine", 3),
    ("daemon", 4),
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
