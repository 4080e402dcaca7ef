//! Real clients the tests drive: Debian's Ignition 2.14 on a throw-away root, and curl. Both are
//! installed by `tests/setup.sh`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use base64::Engine;
use serde_json::{Value, json};

const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";

/// A file only worker-0's per-node config (in the fixture manifests) writes.
pub const NODE_FILE: &str = "/etc/mco-companion/node.txt";

/// A throw-away root prepared the way Debian's Ignition needs it: SELinux
/// config present with a no-op `setfiles` on PATH, and passwd/group/shadow for useradd --root.
pub struct IgnitionRun {
    dir: tempfile::TempDir,
}

impl IgnitionRun {
    pub fn new() -> IgnitionRun {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        fs::create_dir_all(root.join("etc/selinux")).unwrap();
        fs::write(
            root.join("etc/selinux/config"),
            "SELINUX=disabled\nSELINUXTYPE=targeted\n",
        )
        .unwrap();
        fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/bash\n").unwrap();
        fs::write(root.join("etc/group"), "root:x:0:\nusers:x:100:\n").unwrap();
        fs::write(root.join("etc/shadow"), "root:*:19000:0:99999:7:::\n").unwrap();
        fs::write(root.join("etc/gshadow"), "root:*::\nusers:*::\n").unwrap();
        fs::create_dir_all(dir.path().join("shim")).unwrap();
        let setfiles = dir.path().join("shim/setfiles");
        fs::write(&setfiles, "#!/bin/sh\ncat >/dev/null\nexit 0\n").unwrap();
        fs::set_permissions(&setfiles, fs::Permissions::from_mode(0o755)).unwrap();
        fs::create_dir_all(dir.path().join("work")).unwrap();
        IgnitionRun { dir }
    }

    pub fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("root")
    }

    /// Runs fetch-offline, fetch and files with `pointer` as the platform config; returns the
    /// first failing stage's output, or the files stage's.
    pub fn run(&self, pointer: &Value) -> Result<Output, (String, Output)> {
        let work = self.dir.path().join("work");
        let pointer_path = work.join("pointer.json");
        fs::write(&pointer_path, pointer.to_string()).unwrap();
        let path = format!(
            "{}:{}",
            self.dir.path().join("shim").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut last = None;
        for stage in ["fetch-offline", "fetch", "files"] {
            let mut cmd = Command::new(IGNITION);
            cmd.args(["-stage", stage, "-platform", "file", "-log-to-stdout"])
                .arg("-root")
                .arg(self.root())
                .arg("-config-cache")
                .arg(work.join("cache.json"))
                .arg("-state-file")
                .arg(work.join("state"))
                .args(["-fetch-timeout", "20s"])
                .env("IGNITION_CONFIG_FILE", &pointer_path)
                .env("PATH", &path);
            if stage == "fetch-offline" {
                cmd.arg("-neednet").arg(work.join("neednet"));
            }
            let out = cmd
                .output()
                .expect("running Ignition (installed by tests/setup.sh)");
            if !out.status.success() {
                return Err((stage.to_string(), out));
            }
            last = Some(out);
        }
        Ok(last.unwrap())
    }
}

/// A pointer config (spec 3.2) merging `url`, trusting `ca_pem`.
pub fn pointer(url: &str, ca_pem: &str) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    json!({
        "ignition": {
            "version": "3.2.0",
            "config": {"merge": [{"source": url}]},
            "security": {"tls": {"certificateAuthorities": [{"source": format!("data:;base64,{ca}")}]}}
        }
    })
}

/// curl with a 10 s limit.
pub fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("running curl (installed by tests/setup.sh)")
}

/// The paths of the files a served config writes, from curl's output.
pub fn served_paths(body: &[u8]) -> Vec<String> {
    let config: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)));
    config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}
