//! Offline enablement against expectations and against `systemctl --root` itself.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::rootfs::Root;

/// Unit files used by the cases: name → text, written under `etc/systemd/system` unless the name
/// starts with `usr:` (then `usr/lib/systemd/system`).
const UNITS: &[(&str, &str)] = &[
    (
        "a.service",
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\nRequiredBy=foo.target\nAlias=aa.service\nAlso=b.service\n",
    ),
    (
        "usr:b.service",
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=default.target\n",
    ),
    (
        "t@.service",
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=x.target\nDefaultInstance=one\n",
    ),
    ("s.service", "[Service]\nExecStart=/bin/true\n"),
    (
        "c.service",
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
    ),
    (
        "d.socket",
        "[Socket]\nListenStream=/run/d.sock\n[Install]\nWantedBy=sockets.target\n",
    ),
];

fn make_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in UNITS {
        let path = match name.strip_prefix("usr:") {
            Some(n) => dir.path().join("usr/lib/systemd/system").join(n),
            None => dir.path().join("etc/systemd/system").join(name),
        };
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    symlink("/dev/null", dir.path().join("etc/systemd/system/m.service")).unwrap();
    // An empty dependency directory nobody's disable empties: systemctl leaves it.
    fs::create_dir_all(dir.path().join("etc/systemd/system/other.target.wants")).unwrap();
    fs::create_dir_all(dir.path().join("etc/systemd/system-preset")).unwrap();
    fs::write(
        dir.path().join("etc/systemd/system-preset/10-test.preset"),
        "disable c.service\nenable d.socket\n",
    )
    .unwrap();
    dir
}

/// Every symlink under the root: (path relative to the root, target).
fn links(root: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = tree(root);
    out.retain(|(_, target)| !target.as_os_str().is_empty());
    out
}

/// Every symlink (with its target) and every directory (with an empty target) under the root,
/// so that a directory left behind or removed counts too.
fn tree(root: &Path) -> Vec<(PathBuf, PathBuf)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(PathBuf, PathBuf)>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            let rel = e.path().strip_prefix(base).unwrap().to_path_buf();
            if ft.is_symlink() {
                out.push((rel, fs::read_link(e.path()).unwrap()));
            } else if ft.is_dir() {
                out.push((rel, PathBuf::new()));
                walk(base, &e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn systemctl(root: &Path, args: &[&str]) {
    let out = Command::new("systemctl")
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .expect("systemctl is installed (tests/setup.sh)");
    assert!(
        out.status.success(),
        "systemctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The same operations through [`OfflineUnits`] and through `systemctl --root` leave the same
/// links and directories.
#[test]
fn offline_enablement_matches_systemctl() {
    type Op = (&'static str, &'static [&'static str]);
    let cases: &[&[Op]] = &[
        &[("enable", &["a.service"])],
        &[("enable", &["t@.service", "d.socket"])],
        &[
            ("enable", &["a.service", "c.service"]),
            ("disable", &["a.service"]),
        ],
        &[
            ("enable", &["c.service", "d.socket"]),
            ("preset", &["c.service", "d.socket", "s.service"]),
        ],
        &[("preset", &["a.service"])],
        &[("enable", &["t@.service"]), ("disable", &["t@.service"])],
        // The last link of multi-user.target.wants goes: so does the directory.
        &[("enable", &["c.service"]), ("disable", &["c.service"])],
        &[
            ("enable", &["a.service", "c.service"]),
            ("disable", &["c.service", "a.service"]),
        ],
        &[("disable", &["nothere.service"])],
    ];
    for ops in cases {
        let ours = make_root();
        let theirs = make_root();
        let root = Root::open(ours.path()).unwrap();
        let offline = OfflineUnits::new(&root);
        for (op, units) in *ops {
            let units: Vec<String> = units.iter().map(|u| u.to_string()).collect();
            block_on(async {
                match *op {
                    "enable" => offline.enable(&units).await,
                    "disable" => offline.disable(&units).await,
                    _ => offline.preset(&units).await,
                }
            })
            .unwrap();
            let mut args = vec![*op];
            args.extend(units.iter().map(String::as_str));
            systemctl(theirs.path(), &args);
        }
        assert_eq!(tree(ours.path()), tree(theirs.path()), "ops {ops:?}");
    }
}

#[test]
fn states_match_systemctl_is_enabled() {
    let dir = make_root();
    let root = Root::open(dir.path()).unwrap();
    let offline = OfflineUnits::new(&root);
    offline.enable_one("c.service").unwrap();
    for unit in [
        "a.service",
        "c.service",
        "s.service",
        "m.service",
        "nope.service",
        "usr:b.service",
    ] {
        let unit = unit.trim_start_matches("usr:");
        let out = Command::new("systemctl")
            .arg("--root")
            .arg(dir.path())
            .args(["is-enabled", unit])
            .output()
            .unwrap();
        let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let ours = offline.state(unit).unwrap().to_string();
        // systemctl prints nothing (only an error) for a missing unit.
        let theirs = if theirs.is_empty() {
            "not-found".to_string()
        } else {
            theirs
        };
        assert_eq!(ours, theirs, "{unit}");
    }
}

#[test]
fn enabling_masked_or_missing_units_fails_and_masked_preset_is_skipped() {
    let dir = make_root();
    let root = Root::open(dir.path()).unwrap();
    let offline = OfflineUnits::new(&root);
    let err = offline.enable_one("m.service").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Failed to enable unit: unit m.service is masked"
    );
    let err = offline.enable_one("nope.service").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Failed to enable unit: unit nope.service does not exist"
    );
    offline
        .preset_one("m.service", &PresetPolicy::default())
        .unwrap();
    assert_eq!(
        links(dir.path()),
        vec![(
            PathBuf::from("etc/systemd/system/m.service"),
            PathBuf::from("/dev/null")
        )]
    );
}

#[test]
fn enable_replaces_stale_link_and_refuses_regular_file() {
    let dir = make_root();
    let wants = dir
        .path()
        .join("etc/systemd/system/multi-user.target.wants");
    fs::create_dir_all(&wants).unwrap();
    symlink("/usr/lib/systemd/system/c.service", wants.join("c.service")).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let offline = OfflineUnits::new(&root);
    offline.enable_one("c.service").unwrap();
    assert_eq!(
        fs::read_link(wants.join("c.service")).unwrap(),
        PathBuf::from("/etc/systemd/system/c.service")
    );
    fs::remove_file(wants.join("c.service")).unwrap();
    fs::write(wants.join("c.service"), "").unwrap();
    let err = offline.enable_one("c.service").unwrap_err();
    assert!(
        err.to_string().contains("exists and is not a symlink"),
        "{err}"
    );
}

/// Records calls, to check the order [`EnablementPlan::run`] uses and that preset errors are ignored.
#[derive(Default)]
struct Recorder {
    calls: std::sync::Mutex<Vec<String>>,
}

#[async_trait]
impl UnitEnablement for Recorder {
    async fn enable(&self, units: &[String]) -> Result<()> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("enable {}", units.join(" ")));
        Ok(())
    }
    async fn disable(&self, units: &[String]) -> Result<()> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("disable {}", units.join(" ")));
        Ok(())
    }
    async fn preset(&self, units: &[String]) -> Result<()> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("preset {}", units.join(" ")));
        anyhow::bail!("preset failed")
    }
}

#[test]
fn plan_runs_disable_enable_preset_and_ignores_preset_errors() {
    let plan = EnablementPlan {
        disable: vec!["x.service".into()],
        enable: vec!["x.service".into(), "y.service".into()],
        preset: vec!["z.service".into()],
    };
    let rec = Recorder::default();
    block_on(plan.run(&rec)).unwrap();
    assert_eq!(
        *rec.calls.lock().unwrap(),
        [
            "disable x.service",
            "enable x.service y.service",
            "preset z.service"
        ]
    );
    let rec = Recorder::default();
    block_on(EnablementPlan::default().run(&rec)).unwrap();
    assert!(rec.calls.lock().unwrap().is_empty());
}

#[test]
fn a_snapshot_reports_the_states_reading_per_unit_does() {
    let dir = make_root();
    let root = Root::open(dir.path()).unwrap();
    let offline = OfflineUnits::new(&root);
    for unit in ["a.service", "t@.service", "d.socket"] {
        offline.enable_one(unit).unwrap();
    }
    // a link of another unit's name to a's unit file, and a stray instance link
    let wants = dir.path().join("etc/systemd/system/x.target.wants");
    symlink(
        "/etc/systemd/system/t@.service",
        wants.join("t@two.service"),
    )
    .unwrap();
    symlink(
        "/etc/systemd/system/a.service",
        dir.path().join("etc/systemd/system/other-alias.service"),
    )
    .unwrap();
    let units = [
        "a.service",
        "aa.service",
        "b.service",
        "c.service",
        "d.socket",
        "t@.service",
        "t@one.service",
        "t@two.service",
        "s.service",
        "m.service",
        "nope.service",
    ];
    let per_unit: Vec<_> = units.iter().map(|u| offline.state(u).unwrap()).collect();
    let snapshot = OfflineUnits::snapshot(&root);
    let from_snapshot: Vec<_> = units.iter().map(|u| snapshot.state(u).unwrap()).collect();
    assert_eq!(from_snapshot, per_unit);
    assert!(
        per_unit.contains(&UnitFileState::Enabled) && per_unit.contains(&UnitFileState::Static)
    );
}

#[test]
fn a_snapshot_without_a_unit_directory_finds_no_links() {
    let dir = tempfile::tempdir().unwrap();
    let unit_dir = dir.path().join("usr/lib/systemd/system");
    fs::create_dir_all(&unit_dir).unwrap();
    fs::write(unit_dir.join("c.service"), UNITS[4].1).unwrap();
    let root = Root::open(dir.path()).unwrap();
    let snapshot = OfflineUnits::snapshot(&root);
    assert_eq!(
        snapshot.state("c.service").unwrap(),
        UnitFileState::Disabled
    );
    assert_eq!(
        snapshot.state("nope.service").unwrap(),
        UnitFileState::NotFound
    );
}
