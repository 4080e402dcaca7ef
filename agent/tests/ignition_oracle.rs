//! Real Ignition as the oracle: for every config under `tests/oracle/` (spec 3.0–3.3), Ignition
//! 2.14's files stage and `mco-agent once-from` run on two identical fresh roots, and the trees
//! must be equal: contents, modes, numeric owners, link targets.
//!
//! Ignition runs against an alternate root with the workarounds Debian's build needs: the config
//! cache comes from the `fetch-offline` stage, `setfiles` is a no-op shim first on PATH (the
//! Debian build always relabels), the root has `etc/selinux/config`. Ignition only writes a
//! preset file for `enabled`; `systemctl --root R preset-all` turns it into the links we create.
//! Ignored: Ignition's bookkeeping (result file, `*-` backups of the user database, its preset
//! file) and ours (`etc/machine-config-daemon/`).
//!
//! Then `mco-agent validate` must accept Ignition's tree: our validator agrees with Ignition.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{data_dir, run, seed_root, snapshot, text};

const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";

/// Paths only one side writes, by design.
fn ignored(path: &str) -> bool {
    const EXACT: &[&str] = &[
        "etc/.ignition-result.json",
        "etc/.pwd.lock",
        "etc/passwd-",
        "etc/group-",
        "etc/shadow-",
        "etc/gshadow-",
        "etc/systemd/system-preset",
        "etc/systemd/system-preset/20-ignition.preset",
    ];
    EXACT.contains(&path)
        || path == "etc/machine-config-daemon"
        || path.starts_with("etc/machine-config-daemon/")
}

/// A root both tools start from: the seeded user database, a pre-existing file to overwrite,
/// and what Ignition's Debian build needs.
fn fresh_root(dir: &Path) {
    seed_root(dir);
    fs::create_dir_all(dir.join("etc/selinux")).unwrap();
    fs::write(
        dir.join("etc/selinux/config"),
        "SELINUX=disabled\nSELINUXTYPE=targeted\n",
    )
    .unwrap();
    fs::write(
        dir.join("etc/chrony.conf"),
        "pool 2.debian.pool.ntp.org iburst\n",
    )
    .unwrap();
    fs::write(dir.join("etc/motd"), "vendor motd\n").unwrap();
    // A vendor unit enabled in the image, the only link of its .wants directory (config 15
    // disables it: the emptied directory goes, as systemctl's preset/disable removes it).
    let vendor = "usr/lib/systemd/system/vendor-timesync.service";
    fs::create_dir_all(dir.join("usr/lib/systemd/system")).unwrap();
    fs::write(
        dir.join(vendor),
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=time-sync.target\n",
    )
    .unwrap();
    fs::create_dir_all(dir.join("etc/systemd/system/time-sync.target.wants")).unwrap();
    std::os::unix::fs::symlink(
        format!("/{vendor}"),
        dir.join("etc/systemd/system/time-sync.target.wants/vendor-timesync.service"),
    )
    .unwrap();
    fs::create_dir_all(dir.join("usr/share/zoneinfo")).unwrap();
    fs::write(dir.join("usr/share/zoneinfo/UTC"), "TZif2").unwrap();
    std::os::unix::fs::symlink("/usr/share/zoneinfo/Etc/UTC", dir.join("etc/localtime")).unwrap();
}

fn run_ignition(config: &Path, root: &Path, work: &Path) {
    let shim = work.join("shim");
    fs::create_dir_all(&shim).unwrap();
    fs::write(shim.join("setfiles"), "#!/bin/sh\ncat >/dev/null\nexit 0\n").unwrap();
    fs::set_permissions(shim.join("setfiles"), fs::Permissions::from_mode(0o755)).unwrap();
    let common = |stage: &str| {
        let mut c = Command::new(IGNITION);
        c.args(["-stage", stage, "-platform", "file", "-log-to-stdout"])
            .arg("-root")
            .arg(root)
            .arg("-config-cache")
            .arg(work.join("cache.json"))
            .arg("-state-file")
            .arg(work.join("state"));
        c
    };
    let out = common("fetch-offline")
        .arg("-neednet")
        .arg(work.join("neednet"))
        .env("IGNITION_CONFIG_FILE", config)
        .output()
        .expect("run ignition fetch-offline");
    assert!(
        out.status.success(),
        "ignition fetch-offline on {}: {}",
        config.display(),
        String::from_utf8_lossy(&out.stdout)
    );
    let path = format!(
        "{}:{}",
        shim.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = common("files")
        .env("PATH", path)
        .output()
        .expect("run ignition files");
    assert!(
        out.status.success(),
        "ignition files on {}: {}",
        config.display(),
        String::from_utf8_lossy(&out.stdout)
    );
    let preset = Command::new("systemctl")
        .arg("--root")
        .arg(root)
        .arg("preset-all")
        .output()
        .unwrap();
    assert!(
        preset.status.success(),
        "preset-all: {}",
        String::from_utf8_lossy(&preset.stderr)
    );
}

fn compared(dir: &Path) -> BTreeMap<String, String> {
    let mut s = snapshot(dir);
    s.retain(|k, _| !ignored(k));
    s
}

fn configs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(data_dir().join("oracle"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ign"))
        .collect();
    v.sort();
    v
}

#[test]
fn once_from_matches_ignition() {
    assert!(
        Path::new(IGNITION).exists(),
        "{IGNITION} is missing: run tests/setup.sh (Debian package ignition)"
    );
    let configs = configs();
    assert!(configs.len() >= 10, "only {} oracle configs", configs.len());
    let mut versions = std::collections::BTreeSet::new();
    for config in &configs {
        let json: serde_json::Value = serde_json::from_slice(&fs::read(config).unwrap()).unwrap();
        versions.insert(json["ignition"]["version"].as_str().unwrap().to_string());

        let tmp = tempfile::tempdir().unwrap();
        let (theirs, ours, work) = (
            tmp.path().join("ignition"),
            tmp.path().join("agent"),
            tmp.path().join("work"),
        );
        for d in [&theirs, &ours] {
            fs::create_dir_all(d).unwrap();
            fresh_root(d);
        }
        fs::create_dir_all(&work).unwrap();
        run_ignition(config, &theirs, &work);

        let cfg = config.display().to_string();
        let (stdout, stderr, code) = text(&run(&[
            "once-from",
            &cfg,
            "--root",
            &ours.display().to_string(),
            "--skip-reboot",
        ]));
        assert_eq!(code, 0, "once-from {cfg}: {stdout}{stderr}");

        let (a, b) = (compared(&theirs), compared(&ours));
        if a != b {
            let only =
                |x: &BTreeMap<String, String>, y: &BTreeMap<String, String>| -> Vec<String> {
                    x.iter()
                        .filter(|(k, v)| y.get(*k) != Some(*v))
                        .map(|(k, v)| format!("{k}: {v}"))
                        .collect()
                };
            panic!(
                "{cfg}: trees differ\nIgnition only/different:\n  {}\nmco-agent only/different:\n  {}",
                only(&a, &b).join("\n  "),
                only(&b, &a).join("\n  ")
            );
        }

        let (stdout, stderr, code) = text(&run(&[
            "validate",
            "--config",
            &cfg,
            "--root",
            &theirs.display().to_string(),
        ]));
        assert_eq!(
            code, 0,
            "validate {cfg} against Ignition's tree: {stdout}{stderr}"
        );
    }
    let want: std::collections::BTreeSet<String> = ["3.0.0", "3.1.0", "3.2.0", "3.3.0"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(versions, want, "oracle configs must cover spec 3.0–3.3");
}
