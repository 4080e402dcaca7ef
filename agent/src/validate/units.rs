//! Units as the MCD checks them: each drop-in (an empty one may be absent), the unit file or
//! its mask (a link chain that resolves to `/dev/null`), and, under spec 3 rules, the
//! enablement the root's links show.

use std::path::{Path, PathBuf};

use machine_config::Unit;

use super::{
    Check, Facts, Mismatch, MismatchKind, SpecRules, UNIT_FILE_MODE, check_file, found_facts,
    go_quote,
};
use crate::rootfs::{FileKind, Owner, Root, RootError};
use crate::units::{OfflineUnits, SYSTEM_UNIT_DIR, UnitFileState};

pub(super) fn check_unit(
    check: &Check<'_>,
    units: &OfflineUnits<'_>,
    unit: &Unit,
    out: &mut Vec<Mismatch>,
) {
    let root = check.root;
    let unit_name = Some(unit.name.as_str());
    for dropin in &unit.dropins {
        let path = format!("{SYSTEM_UNIT_DIR}/{}.d/{}", unit.name, dropin.name);
        let contents = dropin.contents.as_deref().unwrap_or("");
        // An empty drop-in is removed by apply; a zero-length file is accepted too. A failing
        // stat is reported bare, as the MCD does. (Spec 2 too, see `SpecRules::V2`.)
        if contents.is_empty() {
            match root.lstat(Path::new(&path)) {
                Ok(None) => continue,
                Ok(Some(_)) => {}
                Err(e) => {
                    out.push(Mismatch {
                        path: path.clone(),
                        unit: Some(unit.name.clone()),
                        kind: MismatchKind::Missing,
                        message: e.with_op("stat").to_string(),
                        expected: Facts::of_contents(UNIT_FILE_MODE, b""),
                        found: None,
                    });
                    continue;
                }
            }
        }
        check_file(
            check,
            &path,
            unit_name,
            UNIT_FILE_MODE,
            Some(Owner::ROOT),
            contents.as_bytes(),
            out,
        );
    }
    let path = format!("{SYSTEM_UNIT_DIR}/{}", unit.name);
    if unit.is_masked() {
        check_mask(root, &path, &unit.name, out);
        return;
    }
    let Some(contents) = unit.contents.as_deref().filter(|c| !c.is_empty()) else {
        return;
    };
    check_file(
        check,
        &path,
        unit_name,
        UNIT_FILE_MODE,
        Some(Owner::ROOT),
        contents.as_bytes(),
        out,
    );
    // `checkV2Unit` does not check enablement.
    if let (Some(enabled), SpecRules::V3) = (unit.enabled, check.rules) {
        check_enablement(units, &path, &unit.name, enabled, out);
    }
}

fn check_mask(root: &Root, path: &str, unit: &str, out: &mut Vec<Mismatch>) {
    let expected = Facts {
        kind: Some("symlink"),
        target: Some(DEV_NULL.to_string()),
        ..Facts::default()
    };
    let (message, found) = match eval_symlinks(root, Path::new(path)) {
        Ok(link) if link == Path::new(DEV_NULL) => return,
        Ok(link) => (
            format!(
                "state validation: invalid unit masked setting. path: {}; expected: {DEV_NULL}; received: {}",
                go_quote(path),
                link.display()
            ),
            found_facts(root, path),
        ),
        Err(e) => (
            format!(
                "state validation: error while evaluation symlink for path {}: {e}",
                go_quote(path)
            ),
            None,
        ),
    };
    out.push(Mismatch {
        path: path.to_string(),
        unit: Some(unit.to_string()),
        kind: MismatchKind::Mask,
        message,
        expected,
        found,
    });
}

fn check_enablement(
    units: &OfflineUnits<'_>,
    path: &str,
    unit: &str,
    enabled: bool,
    out: &mut Vec<Mismatch>,
) {
    let state = match units.state(unit) {
        Ok(s) => s,
        Err(e) => {
            out.push(Mismatch {
                path: path.to_string(),
                unit: Some(unit.to_string()),
                kind: MismatchKind::Unreadable,
                message: format!(
                    "could not read enablement of unit {}: {e:#}",
                    go_quote(unit)
                ),
                expected: Facts {
                    state: Some(format!("enabled={enabled}")),
                    ..Facts::default()
                },
                found: None,
            });
            return;
        }
    };
    let bad = if enabled {
        matches!(
            state,
            UnitFileState::Disabled
                | UnitFileState::Masked
                | UnitFileState::MaskedRuntime
                | UnitFileState::NotFound
        )
    } else {
        state == UnitFileState::Enabled
    };
    if bad {
        out.push(Mismatch {
            path: path.to_string(),
            unit: Some(unit.to_string()),
            kind: MismatchKind::Enablement,
            message: format!(
                "unit {} expected enabled={enabled}, but systemd reports {}",
                go_quote(unit),
                go_quote(state.as_str())
            ),
            expected: Facts {
                state: Some(format!("enabled={enabled}")),
                ..Facts::default()
            },
            found: Some(Facts {
                state: Some(state.as_str().to_string()),
                ..Facts::default()
            }),
        });
    }
}

const DEV_NULL: &str = "/dev/null";

/// Go's `filepath.EvalSymlinks` inside the root, except that a link chain reaching `/dev/null`
/// stops there (a test root has no `/dev/null` of its own, a node's is a device).
fn eval_symlinks(root: &Root, path: &Path) -> Result<PathBuf, RootError> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match root.lstat(&current)? {
            None => return Err(RootError::io("lstat", current, rustix::io::Errno::NOENT)),
            Some(info) if info.kind == FileKind::Symlink => {
                let target = root.read_link(&current)?.unwrap_or_default();
                let base = current.parent().unwrap_or(Path::new("/"));
                current = crate::rootfs::normalize(&base.join(target));
                if current == Path::new(DEV_NULL) {
                    return Ok(current);
                }
            }
            Some(_) => {
                return Ok(root.canonicalize(&current)?.unwrap_or(current));
            }
        }
    }
    Err(RootError::io("lstat", path, rustix::io::Errno::LOOP))
}
