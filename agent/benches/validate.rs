//! Benchmark (`cargo bench -p mco-agent --bench validate`): a realistic rendered config (over 300
//! files, over 8 MiB, a few large CA bundles, some gzip-compressed, units with drop-ins) applied
//! to a temp root with `mco-agent once-from`, then `mco-agent validate` timed against a plain read
//! of the same files, and the peak RSS of `once-from` (getrusage of the child) for the config
//! and for configs twice and four times its size (how peak memory grows with the config); and
//! what the daemon does when the drift monitor sees one managed file change (read the recorded
//! current config, check that path) against checking every file.
//!
//! `--write-config SCALE PATH` (after `--bench`) writes the config of that scale to PATH and
//! exits: the configs the peak RSS is measured on, for measuring a built agent by hand
//! (`/usr/bin/time -v mco-agent once-from PATH ...`).
//!
//! Only runs under `cargo bench` (`--bench`); listed by a test runner, it has no tests.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;

const RUNS: usize = 7;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        if !args.iter().any(|a| a == "--list") {
            eprintln!("benchmark: run it with `cargo bench -p mco-agent --bench validate`");
        }
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--write-config") {
        let scale: usize = args[at + 1].parse().expect("scale");
        std::fs::write(&args[at + 2], generate_config(scale).0).expect("write config");
        return;
    }
    let agent = PathBuf::from(env!("CARGO_BIN_EXE_mco-agent"));
    if let Some(scale) = args.iter().position(|a| a == PEAK_RSS_ARG) {
        let scale: usize = args[scale + 1].parse().expect("scale");
        println!("{}", once_from_peak_rss_kib(&agent, scale));
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path().join("root");
    seed_root(&root);
    let (config, stats) = generate_config(1);
    let config_path = tmp.path().join("rendered-worker-bench.json");
    std::fs::write(&config_path, &config).expect("write config");

    let once = measure(Who::Children, || {
        run(
            &agent,
            &[
                "once-from",
                path(&config_path),
                "--root",
                path(&root),
                "--skip-reboot",
            ],
        )
    });
    let peak_rss_kib = children_peak_rss_kib();

    let validate = median(Who::Children, || {
        run(
            &agent,
            &[
                "validate",
                "--config",
                path(&config_path),
                "--root",
                path(&root),
            ],
        )
    });
    let paths = managed_paths(&root, &config);
    let plain_read = median(Who::Itself, || {
        let mut total = 0usize;
        for p in &paths {
            total += std::fs::read(p).expect("read").len();
        }
        assert!(total > 0);
    });
    let cat = median(Who::Children, || {
        let out = Command::new("cat").args(&paths).output().expect("cat");
        assert!(out.status.success());
    });

    let drift_one = drift_check(&root, Some(&paths[0]));
    let drift_all = drift_check(&root, None);

    let mut report = String::new();
    let _ = writeln!(
        report,
        "config: {} files ({} units, {} drop-ins), {:.1} MiB of contents, {} large CA bundles, JSON {:.1} MiB",
        stats.files,
        stats.units,
        stats.dropins,
        stats.bytes as f64 / 1048576.0,
        stats.bundles,
        config.len() as f64 / 1048576.0
    );
    let _ = writeln!(report, "{:<58} {:>10} {:>10}", "", "wall ms", "CPU ms");
    let row = |r: &mut String, what: &str, m: Measure| {
        let _ = writeln!(r, "{what:<58} {:>10.1} {:>10.1}", ms(m.wall), ms(m.cpu));
    };
    row(
        &mut report,
        "once-from, first application (fsync per file)",
        once,
    );
    row(
        &mut report,
        &format!("validate, CLI (median of {RUNS})"),
        validate,
    );
    row(
        &mut report,
        &format!(
            "plain read of the {} files, in process (median)",
            paths.len()
        ),
        plain_read,
    );
    row(
        &mut report,
        &format!("`cat` of the {} files (median)", paths.len()),
        cat,
    );
    row(
        &mut report,
        "drift event: read currentconfig, check the changed file",
        drift_one,
    );
    row(
        &mut report,
        "drift check of every file (before: each drift event)",
        drift_all,
    );
    let _ = writeln!(
        report,
        "once-from peak RSS: {:.1} MiB",
        peak_rss_kib as f64 / 1024.0
    );
    for scale in SCALES {
        let (config, stats) = generate_config(scale);
        let _ = writeln!(
            report,
            "once-from peak RSS, config x{scale} ({} files, {:.1} MiB of contents, JSON {:.1} MiB): {:.1} MiB",
            stats.files,
            stats.bytes as f64 / 1048576.0,
            config.len() as f64 / 1048576.0,
            peak_rss_in_child(scale) as f64 / 1024.0
        );
    }
    print!("{report}");
    std::io::stdout().flush().ok();
}

/// The daemon's reaction to a drift event, in process (median): the recorded current config
/// read and parsed, then the changed file checked (`changed`), or every file (`None`).
fn drift_check(root: &Path, changed: Option<&Path>) -> Measure {
    let handle = mco_agent::rootfs::Root::open(root).expect("root");
    let changed: Option<std::collections::BTreeSet<String>> = changed.map(|p| {
        let node_path = format!(
            "/{}",
            p.strip_prefix(root).expect("under the root").display()
        );
        std::collections::BTreeSet::from([node_path])
    });
    median(Who::Itself, || {
        let current = mco_agent::input::read_current(&handle)
            .expect("currentconfig")
            .expect("recorded by once-from");
        let name = current.machine_config.name();
        let report = match &changed {
            Some(paths) => {
                mco_agent::validate::validate_paths(&handle, name, &current.ignition, paths)
            }
            None => mco_agent::validate::validate(&handle, name, &current.ignition),
        };
        assert!(report.is_ok(), "{:?}", report.lines());
    })
}

/// The config sizes peak memory is measured at (multiples of the benchmark config).
const SCALES: [usize; 3] = [1, 2, 4];
/// Runs this benchmark in a child that measures one `once-from` of a config of that scale: a
/// process's RUSAGE_CHILDREN peak is the largest child's so far, so each size gets its own.
const PEAK_RSS_ARG: &str = "--once-from-peak-rss";

fn peak_rss_in_child(scale: usize) -> i64 {
    let out = Command::new(std::env::current_exe().expect("current exe"))
        .args(["--bench", PEAK_RSS_ARG, &scale.to_string()])
        .output()
        .expect("run the benchmark's child");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("peak RSS")
}

/// Applies the config of `scale` to a fresh root with `once-from`; its peak RSS.
fn once_from_peak_rss_kib(agent: &Path, scale: usize) -> i64 {
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path().join("root");
    seed_root(&root);
    let config_path = tmp.path().join("rendered-worker-bench.json");
    std::fs::write(&config_path, generate_config(scale).0).expect("write config");
    run(
        agent,
        &[
            "once-from",
            path(&config_path),
            "--root",
            path(&root),
            "--skip-reboot",
        ],
    );
    children_peak_rss_kib()
}

/// Whose CPU time a measurement counts.
#[derive(Clone, Copy)]
enum Who {
    Itself,
    Children,
}

/// Wall-clock and CPU (user + system) time of one run.
#[derive(Clone, Copy)]
struct Measure {
    wall: Duration,
    cpu: Duration,
}

fn cpu_time(who: Who) -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let who = match who {
        Who::Itself => UsageWho::RUSAGE_SELF,
        Who::Children => UsageWho::RUSAGE_CHILDREN,
    };
    let u = getrusage(who).expect("getrusage");
    let tv =
        |t: nix::sys::time::TimeVal| Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000);
    tv(u.user_time()) + tv(u.system_time())
}

fn measure(who: Who, f: impl FnOnce()) -> Measure {
    let (cpu, wall) = (cpu_time(who), Instant::now());
    f();
    Measure {
        wall: wall.elapsed(),
        cpu: cpu_time(who) - cpu,
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn run(agent: &Path, args: &[&str]) {
    let out = Command::new(agent)
        .args(args)
        .output()
        .expect("run mco-agent");
    assert!(
        out.status.success(),
        "mco-agent {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Median wall and median CPU time of [`RUNS`] runs (taken separately).
fn median(who: Who, mut f: impl FnMut()) -> Measure {
    let mut runs: Vec<Measure> = (0..RUNS).map(|_| measure(who, &mut f)).collect();
    runs.sort_by_key(|m| m.wall);
    let wall = runs[RUNS / 2].wall;
    runs.sort_by_key(|m| m.cpu);
    Measure {
        wall,
        cpu: runs[RUNS / 2].cpu,
    }
}

/// Peak RSS of the largest child waited for so far.
fn children_peak_rss_kib() -> i64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage")
        .max_rss()
}

fn seed_root(root: &Path) {
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/home/core:/bin/bash\n",
    )
    .unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\ncore:x:1000:\n").unwrap();
    std::fs::write(root.join("etc/shadow"), "core:*:19000:0:99999:7:::\n").unwrap();
}

struct Stats {
    files: usize,
    units: usize,
    dropins: usize,
    bytes: usize,
    bundles: usize,
}

/// Deterministic pseudo-random bytes (xorshift), so contents do not compress to nothing.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn text(&mut self, len: usize) -> String {
        const WORDS: &[&str] = &[
            "kubelet",
            "node",
            "registry",
            "mirror",
            "timeout",
            "true",
            "false",
            "=",
            "\n",
            "cluster",
            "0.0.0.0",
            "# comment",
            "[section]",
            "value",
        ];
        let mut s = String::with_capacity(len + 16);
        while s.len() < len {
            s.push_str(WORDS[(self.next() % WORDS.len() as u64) as usize]);
            s.push(' ');
        }
        s.truncate(len);
        s
    }

    /// A PEM bundle of `certs` certificates of pseudo-random base64 bodies (~1.3 KiB each).
    fn ca_bundle(&mut self, certs: usize) -> String {
        let mut s = String::new();
        for _ in 0..certs {
            let body: Vec<u8> = (0..960).map(|_| self.next() as u8).collect();
            let b64 = base64::engine::general_purpose::STANDARD.encode(body);
            s.push_str("-----BEGIN CERTIFICATE-----\n");
            for line in b64.as_bytes().chunks(64) {
                s.push_str(std::str::from_utf8(line).unwrap());
                s.push('\n');
            }
            s.push_str("-----END CERTIFICATE-----\n");
        }
        s
    }
}

fn b64_url(bytes: &[u8]) -> String {
    format!(
        "data:;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

fn gzip_url(bytes: &[u8]) -> String {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    b64_url(&enc.finish().unwrap())
}

/// A rendered MachineConfig as an OpenShift worker pool would have: many small config files, a
/// few large CA bundles, some files gzip-compressed, units with drop-ins.
/// `scale` multiplies the number of bundles and of small files (1: the benchmark config).
fn generate_config(scale: usize) -> (Vec<u8>, Stats) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut files = Vec::new();
    let mut bytes = 0usize;
    let bundles = 4 * scale;
    for i in 0..bundles {
        let pem = rng.ca_bundle(1200);
        bytes += pem.len();
        files.push(serde_json::json!({"path": format!("/etc/pki/ca-trust/source/anchors/bundle-{i}.crt"), "mode": 420, "overwrite": true, "contents": {"source": b64_url(pem.as_bytes())}}));
    }
    let dirs = [
        "/etc/kubernetes/manifests",
        "/etc/containers/registries.d",
        "/etc/crio/crio.conf.d",
        "/etc/sysctl.d",
        "/etc/modprobe.d",
        "/etc/NetworkManager/conf.d",
        "/etc/mco/app",
        "/usr/local/bin",
    ];
    for i in 0..320 * scale {
        let dir = dirs[i % dirs.len()];
        let len = 500 + (rng.next() % 12_000) as usize;
        let text = rng.text(len);
        bytes += text.len();
        let source = if i % 5 == 0 {
            gzip_url(text.as_bytes())
        } else {
            b64_url(text.as_bytes())
        };
        let mut f = serde_json::json!({"path": format!("{dir}/file-{i:04}.conf"), "mode": if dir == "/usr/local/bin" { 493 } else { 420 }, "overwrite": true, "contents": {"source": source}});
        if i % 5 == 0 {
            f["contents"]["compression"] = "gzip".into();
        }
        files.push(f);
    }
    let mut units = Vec::new();
    let mut dropins = 0;
    for i in 0..30 {
        let mut u = serde_json::json!({"name": format!("bench-{i:02}.service"), "enabled": i % 3 != 0,
            "contents": format!("[Unit]\nDescription=bench {i}\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n")});
        if i % 2 == 0 {
            u["dropins"] = serde_json::json!([{"name": "10-bench.conf", "contents": "[Service]\nEnvironment=BENCH=1\n"}]);
            dropins += 1;
        }
        units.push(u);
    }
    let mc = serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "rendered-worker-bench"},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": files}, "systemd": {"units": units}}}
    });
    let stats = Stats {
        files: files_len(&mc),
        units: 30,
        dropins,
        bytes,
        bundles,
    };
    (serde_json::to_vec(&mc).unwrap(), stats)
}

fn files_len(mc: &serde_json::Value) -> usize {
    mc["spec"]["config"]["storage"]["files"]
        .as_array()
        .map_or(0, Vec::len)
}

/// Host paths of the config's files (the ones validate reads).
fn managed_paths(root: &Path, config: &[u8]) -> Vec<PathBuf> {
    let mc: serde_json::Value = serde_json::from_slice(config).unwrap();
    mc["spec"]["config"]["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| root.join(f["path"].as_str().unwrap().trim_start_matches('/')))
        .collect()
}
