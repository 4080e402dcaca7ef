//! A node's first boot as the MCO provisions one: Debian's Ignition 2.14 (installed by
//! `tests/setup.sh`) runs its fetch and files stages into the node's root, from a pointer config
//! that merges the config server's `/config/<pool>` over TLS, optionally presenting the node's
//! bootstrap token (`httpHeaders`, Ignition spec 3.1+) and naming the node.
//!
//! What stands in: the `file` platform (the pointer config is a file instead of user data) and
//! a no-op `setfiles` (the sandbox has no SELinux policy to relabel with).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use base64::Engine;
use serde_json::{Value, json};

/// Where Debian installs Ignition.
pub const IGNITION: &str = "/usr/lib/dracut/modules.d/30ignition/ignition";

/// What the node's pointer config asks for.
pub struct Pointer<'a> {
    /// `https://HOST:PORT/config/<pool>[?node=NAME]`.
    pub url: &'a str,
    /// The config server's CA (PEM).
    pub ca_pem: &'a str,
    /// A bootstrap token, sent as `Authorization: Bearer TOKEN`.
    pub token: Option<&'a str>,
}

impl Pointer<'_> {
    /// The pointer config (spec 3.2.0).
    pub fn config(&self) -> Value {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem);
        let mut source = json!({"source": self.url});
        if let Some(token) = self.token {
            source["httpHeaders"] =
                json!([{"name": "Authorization", "value": format!("Bearer {token}")}]);
        }
        json!({
            "ignition": {
                "version": "3.2.0",
                "config": {"merge": [source]},
                "timeouts": {"httpTotal": 30},
                "security": {"tls": {"certificateAuthorities": [{"source": format!("data:;base64,{ca}")}]}}
            }
        })
    }
}

/// Runs Ignition's fetch-offline, fetch and files stages into `root` (work files in `work`).
/// Fails with the failing stage's log.
pub fn first_boot(root: &Path, work: &Path, pointer: &Pointer) -> Result<()> {
    fs::create_dir_all(root.join("etc/selinux"))?;
    fs::write(
        root.join("etc/selinux/config"),
        "SELINUX=disabled\nSELINUXTYPE=targeted\n",
    )?;
    let shim = work.join("shim");
    fs::create_dir_all(&shim)?;
    let setfiles = shim.join("setfiles");
    fs::write(&setfiles, "#!/bin/sh\ncat >/dev/null\nexit 0\n")?;
    fs::set_permissions(&setfiles, fs::Permissions::from_mode(0o755))?;
    let pointer_path = work.join("pointer.json");
    fs::write(&pointer_path, pointer.config().to_string())?;
    let path = format!(
        "{}:{}",
        shim.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for stage in ["fetch-offline", "fetch", "files"] {
        let mut command = Command::new(IGNITION);
        command
            .args(["-stage", stage, "-platform", "file", "-log-to-stdout"])
            .arg("-root")
            .arg(root)
            .arg("-config-cache")
            .arg(work.join("cache.json"))
            .arg("-state-file")
            .arg(work.join("state"))
            .args(["-fetch-timeout", "20s"])
            .env("IGNITION_CONFIG_FILE", &pointer_path)
            .env("PATH", &path);
        if stage == "fetch-offline" {
            command.arg("-neednet").arg(work.join("neednet"));
        }
        let out = command
            .output()
            .with_context(|| format!("running {IGNITION} (installed by tests/setup.sh)"))?;
        if !out.status.success() {
            bail!(
                "Ignition's {stage} stage failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    Ok(())
}
