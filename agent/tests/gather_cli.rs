//! `mco-agent gather` on a node tree in a temp dir: the real binary writes the bundle, which
//! is unpacked and checked item by item against its manifest, and searched for every secret
//! the node holds (a password hash, an SSH private key, a pull secret, a URL's password).
//! rpm-ostree is the stand-in over a real ostree sysroot on a private bus (`os_env`); the
//! journal is the real `journalctl --root`: over a root without journal files (its refusal is
//! in the manifest), and over journal files a private systemd-journald wrote (in a mount
//! namespace of its own, as `logging_journald.rs` runs it).

mod common;
mod os_env;

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use machine_config::MachineConfig;
use machine_config::mco::NodeState;
use machine_config::mco::paths::{CURRENT_CONFIG, KUBELET_PULL_SECRET};
use mco_agent::engine::Status;
use mco_agent::engine::record::{self, HookMark, HookState, Step, UpdateRecord};
use mco_agent::engine::report::STATUS_FILE;
use mco_agent::rootfs::{Owner, Root};
use mco_test_support::{child, component};
use os_env::{Env, EnvOptions};
use serde_json::{Value, json};

const HASH: &str = "$6$gathersalt$GATHERHASHsecretvalue0123456789";
const KEY_BODY: &str = "R0FUSEVSUFJJVkFURUtFWQ";
const AUTH: &str = "R0FUSEVSUFVMTFNFQ1JFVA";
const LOCK_PASSWORD: &str = "LOCKPASSWORDsecret";
const NO_BUS: &str = "unix:path=/nonexistent/bus";

fn key() -> String {
    format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\n")
}

fn pull_secret() -> String {
    format!(r#"{{"auths":{{"registry.example":{{"auth":"{AUTH}"}}}}}}"#)
}

/// Every form a secret could take in the archive: as it is, and as a `data:` URL carries it.
fn secrets() -> Vec<String> {
    let mut all = vec![
        HASH.to_string(),
        "GATHERHASHsecretvalue".to_string(),
        KEY_BODY.to_string(),
        AUTH.to_string(),
        LOCK_PASSWORD.to_string(),
    ];
    for text in [key(), pull_secret()] {
        all.push(data_url(&text));
    }
    all
}

fn data_url(text: &str) -> String {
    format!(
        "data:,{}",
        percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC)
    )
}

fn config(name: &str) -> MachineConfig {
    serde_json::from_value(json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name},
        "spec": {"config": {
            "ignition": {"version": "3.4.0"},
            "passwd": {"users": [{"name": "core", "passwordHash": HASH,
                                  "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3public core@example"]}]},
            "storage": {"files": [
                {"path": "/home/core/.ssh/id_ed25519", "mode": 384, "contents": {"source": data_url(&key())}},
                {"path": KUBELET_PULL_SECRET, "mode": 384, "contents": {"source": data_url(&pull_secret())}},
                {"path": "/etc/mco-agent/hooks.d/post-apply/10-check", "mode": 493,
                 "contents": {"source": data_url("#!/bin/sh\ntrue\n")}}
            ]}
        }}
    }))
    .unwrap()
}

fn write(root: &Root, path: &str, text: &str, mode: u32) {
    let owner = Owner {
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
    };
    root.write_atomic(Path::new(path), text.as_bytes(), mode, owner)
        .unwrap();
}

/// A node rebooting into `rendered-worker-2`, with its secrets on disk and in its configs.
fn node(dir: &Path) -> PathBuf {
    let path = dir.join("root");
    std::fs::create_dir(&path).unwrap();
    let root = Root::open(&path).unwrap();
    let status = Status {
        current: Some("rendered-worker-1".into()),
        desired: Some("rendered-worker-2".into()),
        state: NodeState::Working,
        reason: String::new(),
        pending_step: Some("RebootRequested".into()),
        updated_ms: 1_700_000_000_000,
        ..Status::default()
    };
    write(
        &root,
        STATUS_FILE,
        &serde_json::to_string(&status).unwrap(),
        0o644,
    );
    let current = config("rendered-worker-1");
    write(
        &root,
        CURRENT_CONFIG,
        &serde_json::to_string(&current).unwrap(),
        0o644,
    );
    let mut rec = UpdateRecord::new(
        current,
        config("rendered-worker-2"),
        Step::RebootRequested,
        "boot-1",
    );
    rec.hooks = vec![HookMark {
        phase: "post-apply".into(),
        name: "10-check".into(),
        state: HookState::Failed,
    }];
    record::store(&root, &rec).unwrap();
    write(
        &root,
        "/etc/mco-agent/hooks.d/post-apply/10-check",
        "#!/bin/sh\ntrue\n",
        0o755,
    );
    write(
        &root,
        "/etc/mco-agent/config.d/60-fleet-lock.toml",
        &format!(
            "strategy = \"fleet_lock\"\nfleet_lock_url = \"https://lock:{LOCK_PASSWORD}@lock.example:22623\"\n"
        ),
        0o644,
    );
    write(
        &root,
        "/usr/lib/mco-agent/config.d/10-dist.toml",
        "log_level = \"info\"\n",
        0o644,
    );
    write(
        &root,
        "/etc/shadow",
        &format!("root:*:19000::::::\ncore:{HASH}:19000::::::\n"),
        0o600,
    );
    write(&root, KUBELET_PULL_SECRET, &pull_secret(), 0o600);
    write(&root, "/etc/ssh/ssh_host_ed25519_key", &key(), 0o600);
    write(&root, "/home/core/.ssh/id_ed25519", &key(), 0o600);
    write(
        &root,
        "/etc/machine-config-daemon/boot-id",
        "boot-1\n",
        0o644,
    );
    path
}

async fn gather(root: &Path, bus: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_mco-agent"))
        .arg("gather")
        .args(args)
        .arg("--root")
        .arg(root)
        .arg("--boot-id-file")
        .arg(root.join("etc/machine-config-daemon/boot-id"))
        .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap()
}

/// The archive's files (`mco-agent-gather/` stripped) and its whole uncompressed bytes.
fn unpack(path: &Path) -> (BTreeMap<String, Vec<u8>>, Vec<u8>) {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let mut files = BTreeMap::new();
    let mut archive = tar::Archive::new(raw.as_slice());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().display().to_string();
        let name = name
            .strip_prefix("mco-agent-gather/")
            .unwrap_or_else(|| panic!("{name} is outside the bundle's directory"))
            .to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        assert!(files.insert(name.clone(), bytes).is_none(), "{name} twice");
    }
    (files, raw)
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundle_holds_every_item_of_its_manifest_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let root = node(dir.path());
    let env = Env::start(EnvOptions::default()).await;
    let bundle = dir.path().join("bundle.tar.gz");
    let out = gather(
        &root,
        env.bus.address(),
        &["--output", bundle.to_str().unwrap()],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&format!("wrote {}", bundle.display())),
        "{stdout}"
    );
    assert_eq!(
        std::fs::metadata(&bundle).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let (files, raw) = unpack(&bundle);
    let raw = String::from_utf8_lossy(&raw);
    for secret in secrets() {
        assert!(!raw.contains(&secret), "{secret:?} is in the archive");
    }

    // every collected item is in the archive with its size, and the archive holds nothing else
    let manifest: Value = serde_json::from_slice(&files["manifest.json"]).unwrap();
    let items = manifest["items"].as_array().unwrap();
    let mut listed: Vec<String> = vec!["manifest.json".into()];
    let mut states = BTreeMap::new();
    for item in items {
        let name = item["name"].as_str().unwrap().to_string();
        let state = item["state"].as_str().unwrap().to_string();
        if state == "collected" {
            let bytes = files
                .get(&name)
                .unwrap_or_else(|| panic!("{name} not in the archive"));
            assert_eq!(item["bytes"], bytes.len(), "{name}");
            listed.push(name.clone());
        } else {
            assert!(
                !files.contains_key(&name),
                "{name} is {state} but in the archive"
            );
            let reason = item["reason"].as_str().unwrap_or_default();
            assert!(!reason.is_empty(), "{name} is {state} without a reason");
        }
        states.insert(name, state);
    }
    listed.sort();
    assert_eq!(files.keys().cloned().collect::<Vec<_>>(), listed);
    let want = [
        ("status.json", "collected"),
        ("node/var/lib/mco-agent/boot-rollback.json", "absent"),
        (
            "node/etc/machine-config-daemon/mco-agent-update.json",
            "collected",
        ),
        ("node/etc/machine-config-daemon/currentconfig", "collected"),
        ("configs.json", "collected"),
        ("journal/mco-agent.service.boot0.log", "failed"),
        ("journal/mco-agent.service.boot-1.log", "failed"),
        ("journal/ostree-finalize-staged.service.boot0.log", "failed"),
        (
            "journal/ostree-finalize-staged.service.boot-1.log",
            "failed",
        ),
        ("rpm-ostree-status.json", "collected"),
        ("node/usr/lib/mco-agent/config.d/10-dist.toml", "collected"),
        (
            "node/etc/mco-agent/config.d/60-fleet-lock.toml",
            "collected",
        ),
        ("hooks.json", "collected"),
    ];
    let got: Vec<(&str, &str)> = states
        .iter()
        .map(|(n, s)| (n.as_str(), s.as_str()))
        .collect();
    let mut want_sorted = want.to_vec();
    want_sorted.sort();
    assert_eq!(got, want_sorted);

    // the journal: the real journalctl, over a root without journal files, says why not
    let journal = items
        .iter()
        .find(|i| i["name"] == "journal/mco-agent.service.boot0.log")
        .unwrap();
    assert_eq!(
        journal["source"].as_str().unwrap(),
        format!(
            "journalctl --root={} --no-pager --output=short-iso-precise --unit=mco-agent.service --boot=0",
            root.display()
        )
    );
    assert!(
        journal["reason"]
            .as_str()
            .unwrap()
            .starts_with("journalctl "),
        "{journal}"
    );

    // rpm-ostree: the stand-in's deployments, in rpm-ostree's keys
    let rpm: Value = serde_json::from_slice(&files["rpm-ostree-status.json"]).unwrap();
    let deployments = env.deployments();
    assert_eq!(
        rpm["deployments"][0]["osname"],
        deployments[0].osname.as_str()
    );
    assert_eq!(
        rpm["deployments"][0]["checksum"],
        deployments[0].checksum.as_str()
    );
    assert_eq!(rpm["transaction"], Value::Null);

    // the status, names and plan
    let status: Value = serde_json::from_slice(&files["status.json"]).unwrap();
    assert_eq!(status["state"], "Working");
    assert_eq!(status["pending"]["step"], "RebootRequested");
    let configs: Value = serde_json::from_slice(&files["configs.json"]).unwrap();
    assert_eq!(configs["current"], "rendered-worker-1");
    assert_eq!(configs["desired"], "rendered-worker-2");
    assert_eq!(configs["plan"]["reconcilable"], true, "{configs}");

    // the record keeps what support needs, the secrets are markers listed in the manifest
    let record: Value =
        serde_json::from_slice(&files["node/etc/machine-config-daemon/mco-agent-update.json"])
            .unwrap();
    assert_eq!(record["step"], "RebootRequested");
    let user = &record["desired"]["spec"]["config"]["passwd"]["users"][0];
    assert_eq!(
        user["sshAuthorizedKeys"][0],
        "ssh-ed25519 AAAAC3public core@example"
    );
    assert_eq!(
        user["passwordHash"],
        "<left out by mco-agent gather: a password hash>"
    );
    let record_item = items
        .iter()
        .find(|i| i["name"] == "node/etc/machine-config-daemon/mco-agent-update.json")
        .unwrap();
    assert_eq!(record_item["left_out"].as_array().unwrap().len(), 8);
    let fragment =
        String::from_utf8(files["node/etc/mco-agent/config.d/60-fleet-lock.toml"].clone()).unwrap();
    assert!(
        fragment.contains(
            "https://<left out by mco-agent gather: the credentials of a URL>lock.example:22623"
        ),
        "{fragment}"
    );

    // hooks: found, checksummed, the recorded result
    let hooks: Value = serde_json::from_slice(&files["hooks.json"]).unwrap();
    assert_eq!(hooks["hooks"][0]["name"], "10-check");
    assert_eq!(hooks["hooks"][0]["last_result"]["state"], "failed");

    // the secret files present on the node, never read, are named with why
    let not_collected: Vec<(String, String)> = manifest["not_collected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["path"].as_str().unwrap().to_string(),
                n["why"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let at = |p: &str| root.join(p.trim_start_matches('/')).display().to_string();
    assert_eq!(
        not_collected,
        [
            (at("/etc/shadow"), "password hashes".to_string()),
            (
                at(KUBELET_PULL_SECRET),
                "the cluster's pull secret (config.json)".to_string()
            ),
            (
                at("/etc/ssh/ssh_host_ed25519_key"),
                "an SSH host private key".to_string()
            ),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_output_is_refused_unless_forced_and_bad_places_are_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let root = node(dir.path());
    let out_file = dir.path().join("bundle.tar.gz");
    std::fs::write(&out_file, "keep me").unwrap();
    let out_arg = out_file.to_str().unwrap();

    // (arguments, exit code, what stderr says)
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--output", out_arg], 65, "exists"),
        (
            &["--output", "/nonexistent/dir/b.tar.gz"],
            65,
            "no such directory /nonexistent/dir",
        ),
        (
            &["--output", dir.path().to_str().unwrap()],
            65,
            "is a directory",
        ),
        (&[], 64, "--output"),
    ];
    for (args, code, says) in cases {
        let out = gather(&root, NO_BUS, args).await;
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out)
        );
    }
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), "keep me");

    let missing_root = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco-agent"))
        .args(["gather", "--output"])
        .arg(dir.path().join("other.tar.gz"))
        .args(["--root", "/nonexistent/root"])
        .output()
        .await
        .unwrap();
    assert_eq!(
        missing_root.status.code(),
        Some(65),
        "{}",
        text(&missing_root)
    );
    assert!(!dir.path().join("other.tar.gz").exists());

    // --force replaces it, atomically: no temp file is left beside it
    let out = gather(&root, NO_BUS, &["--output", out_arg, "--force"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (files, _) = unpack(&out_file);
    let manifest: Value = serde_json::from_slice(&files["manifest.json"]).unwrap();
    let rpm = manifest["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "rpm-ostree-status.json")
        .unwrap();
    // without rpm-ostreed the bundle is made all the same, and says why that item is not in it
    assert_eq!(rpm["state"], "failed");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("not collected: rpm-ostree-status.json"),
        "{}",
        text(&out)
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["bundle.tar.gz", "root"]);
}

const JOURNALD: &str = "/lib/systemd/systemd-journald";
/// Where the child copies the journal files its journald wrote.
const JOURNAL_OUT_ENV: &str = "MCO_TEST_GATHER_JOURNAL_OUT";
/// What the child logs for the agent's unit: a line support needs, and lines with secrets.
const AGENT_LINES: [&str; 3] = [
    "update to rendered-worker-2: rebooting",
    "hook 10-check printed core:$6$gathersalt$GATHERHASHsecretvalue0123456789:",
    "fetching https://lock:LOCKPASSWORDsecret@lock.example:22623/v1/pre-reboot",
];

#[test]
fn the_journal_of_this_boot_is_collected_from_the_roots_journal_files() {
    if !rustix::process::geteuid().is_root() {
        component::missing(
            "journald",
            "a private systemd-journald (not running as root)",
        );
    }
    for tool in [
        JOURNALD,
        "/usr/bin/journalctl",
        "/usr/bin/unshare",
        "/usr/bin/logger",
    ] {
        if !Path::new(tool).exists() {
            component::missing(
                "journald",
                &format!("{tool} (systemd, util-linux, bsdutils)"),
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let root = node(dir.path());
    let journal = root.join("var/log/journal");
    let inner = child::test_command("child_writes_the_journal_of_the_agent");
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--"])
        .arg(inner.get_program())
        .args(inner.get_args());
    for (k, v) in inner.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let status = cmd
        .env(JOURNAL_OUT_ENV, &journal)
        .env_remove("RUST_LOG")
        .status()
        .expect("run the child in a mount namespace");
    assert!(
        status.success(),
        "the child that writes the journal failed: {status}"
    );

    let bundle = dir.path().join("bundle.tar.gz");
    let out = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(gather(
            &root,
            NO_BUS,
            &["--output", bundle.to_str().unwrap()],
        ));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (files, raw) = unpack(&bundle);
    let raw = String::from_utf8_lossy(&raw);
    for secret in secrets() {
        assert!(!raw.contains(&secret), "{secret:?} is in the archive");
    }
    let log = String::from_utf8_lossy(&files["journal/mco-agent.service.boot0.log"]).into_owned();
    assert!(log.contains(AGENT_LINES[0]), "{log}");
    assert!(
        log.contains("hook 10-check printed core:<left out by mco-agent gather: a password hash>:"),
        "{log}"
    );
    let finalize =
        String::from_utf8_lossy(&files["journal/ostree-finalize-staged.service.boot0.log"])
            .into_owned();
    assert!(
        finalize.contains("Finalizing staged deployment"),
        "{finalize}"
    );
    assert!(
        !finalize.contains(AGENT_LINES[0]),
        "another unit's lines: {finalize}"
    );

    let manifest: Value = serde_json::from_slice(&files["manifest.json"]).unwrap();
    let item = |name: &str| -> Value {
        manifest["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in the manifest"))
            .clone()
    };
    let agent = item("journal/mco-agent.service.boot0.log");
    assert_eq!(agent["state"], "collected");
    let whys: Vec<&str> = agent["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["why"].as_str().unwrap())
        .collect();
    assert_eq!(
        whys,
        ["a password hash", "the credentials of a URL"],
        "{agent}"
    );
    // one boot in the files: the one before is not there, and the manifest says so
    let before = item("journal/mco-agent.service.boot-1.log");
    assert_eq!(before["state"], "failed");
    assert!(
        before["reason"].as_str().unwrap().contains("(-1)"),
        "{before}"
    );
}

/// Starts journald in this (private) mount namespace, with tmpfs over `/run` and the persistent
/// journal directory, so nothing reaches the host's journal.
fn private_journald() -> std::process::Child {
    for dir in ["/run", "/var/log/journal"] {
        std::fs::create_dir_all(dir).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs", dir])
            .status()
            .expect("mount");
        assert!(status.success(), "mount tmpfs on {dir}");
    }
    for dir in ["/run/systemd/journal", "/run/log/journal"] {
        std::fs::create_dir_all(dir).expect("journal dirs");
    }
    let journald = Command::new(JOURNALD)
        .stdin(Stdio::null())
        .spawn()
        .expect("start journald");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !Path::new("/run/systemd/journal/socket").exists() {
        assert!(
            Instant::now() < deadline,
            "journald did not create its socket within 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    journald
}

/// Logs `message` as a line of `unit` (as root, `OBJECT_SYSTEMD_UNIT` is what `journalctl
/// --unit` matches besides the unit's own processes).
fn log_for_unit(unit: &str, message: &str) {
    let fields = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        fields.path(),
        format!("MESSAGE={message}\nOBJECT_SYSTEMD_UNIT={unit}\nSYSLOG_IDENTIFIER=test\n"),
    )
    .unwrap();
    let status = Command::new("logger")
        .arg(format!("--journald={}", fields.path().display()))
        .status()
        .expect("logger");
    assert!(status.success(), "logger --journald");
}

#[test]
#[ignore = "child of the_journal_of_this_boot_is_collected_from_the_roots_journal_files, in a private mount namespace"]
fn child_writes_the_journal_of_the_agent() {
    child::assert_child("the_journal_of_this_boot_is_collected_from_the_roots_journal_files");
    let out = std::env::var_os(JOURNAL_OUT_ENV).expect("output directory");
    let mut journald = private_journald();
    for line in AGENT_LINES {
        log_for_unit("mco-agent.service", line);
    }
    log_for_unit(
        "ostree-finalize-staged.service",
        "Finalizing staged deployment",
    );
    let synced = Command::new("journalctl")
        .arg("--sync")
        .status()
        .expect("journalctl --sync");
    assert!(synced.success(), "journalctl --sync");
    std::fs::create_dir_all(Path::new(&out).parent().unwrap()).unwrap();
    let copied = Command::new("cp")
        .args(["-r", "/run/log/journal"])
        .arg(&out)
        .status()
        .expect("cp");
    assert!(copied.success(), "copy the journal out");
    journald.kill().expect("stop journald");
    journald.wait().expect("reap journald");
}
