//! The guest side of the power-cut scenarios: preparing the node, holding and releasing the
//! agent around a cut, arming failpoints without touching the disk under test, and reading the
//! state a cut left (from inside the guest, through the guest agent).

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

use super::configs::{CHECKED_FILES, CORE_HOME, UNIT_LINK, VENDOR_FILE, vendor_original};
use crate::vm::{GUEST_SHARE, Vm};

/// With this on the kernel command line, `mco-agent.service` does not start at boot: the boot
/// after a cut is held until the harness has looked at what the cut left.
pub const HOLD_KARG: &str = "mco.powercut.hold";
/// The file (in the VM's share) where a paused failpoint says where it paused.
pub const PAUSED_MARKER: &str = "failpoint-paused";
pub const UPDATE_RECORD: &str = "/etc/machine-config-daemon/mco-agent-update.json";
pub const CURRENT_CONFIG: &str = "/etc/machine-config-daemon/currentconfig";
pub const VENDOR_ORIG: &str =
    "/etc/machine-config-daemon/orig/etc/mco-powercut/vendor.conf.mcdorig";
pub const STATUS_FILE: &str = "/run/mco-agent/status.json";

/// Prepares a guest with the agent installed: user core, the vendor file, ext4 without its
/// rename heuristic, the journal forwarded to the serial console, the hold drop-in; everything
/// synced; core's home is under /var, as on Fedora CoreOS. Returns the baseline `/etc/shadow` (`stat` line, then the file).
pub fn prepare(vm: &mut Vm) -> Result<String> {
    std::fs::write(vm.share().join("vendor.conf"), vendor_original())?;
    let vendor_dir = std::path::Path::new(VENDOR_FILE)
        .parent()
        .context("vendor dir")?
        .display()
        .to_string();
    vm.run(&format!(
        "set -e\n\
         mkdir -p /var/home\n\
         id core >/dev/null 2>&1 || useradd --create-home --home-dir {CORE_HOME} --user-group core\n\
         mkdir -p {vendor_dir}\n\
         install -m644 {GUEST_SHARE}/vendor.conf {VENDOR_FILE}\n\
         # XFS-like: a rename over a file does not push the new file's data out first\n\
         sed -i 's|^/dev/vda / ext4 [^ ]*|/dev/vda / ext4 rw,noatime,noauto_da_alloc|' /etc/fstab\n\
         mount -o remount,noauto_da_alloc /\n\
         grep -q '^/dev/vda / ext4 .*noauto_da_alloc' /proc/mounts\n\
         # the agent's log survives a cut on the serial console (the journal is in /run)\n\
         mkdir -p /etc/systemd/journald.conf.d\n\
         printf '[Journal]\\nForwardToConsole=yes\\nTTYPath=/dev/ttyS0\\nMaxLevelConsole=info\\n' \
           > /etc/systemd/journald.conf.d/50-powercut-console.conf\n\
         systemctl restart systemd-journald\n\
         mkdir -p /etc/systemd/system/mco-agent.service.d\n\
         # the unit's ProtectSystem=strict leaves the share read-only: a paused failpoint\n\
         # writes its marker there ($FAILPOINTS_PAUSED)\n\
         printf '[Unit]\\nConditionKernelCommandLine=!{HOLD_KARG}\\n[Service]\\nReadWritePaths={GUEST_SHARE}\\n' \
           > /etc/systemd/system/mco-agent.service.d/50-powercut-hold.conf\n\
         systemctl daemon-reload\n\
         sync\n"
    ))
    .context("preparing the guest for power cuts")?;
    vm.run("stat -c '%a %U %G' /etc/shadow && cat /etc/shadow")
}

/// Sets (or clears, with `None`) the failpoints of the agent started next, in systemd's manager
/// environment: memory only, gone with the next cut or boot.
pub fn set_failpoints(vm: &mut Vm, spec: Option<&str>) -> Result<()> {
    let _ = std::fs::remove_file(vm.share().join(PAUSED_MARKER));
    match spec {
        Some(spec) => {
            ensure!(!spec.contains('\''), "failpoint spec {spec:?}");
            vm.run(&format!(
                "systemctl set-environment 'FAILPOINTS={spec}' \
                 FAILPOINTS_PAUSED={GUEST_SHARE}/{PAUSED_MARKER}"
            ))?
        }
        None => vm.run("systemctl unset-environment FAILPOINTS FAILPOINTS_PAUSED")?,
    };
    Ok(())
}

/// Restarts the running agent (it picks up the failpoints) and waits for READY.
/// The harness starts the agent's unit far more often than anything on a node does (a restart
/// and a start after each stop, every update): without this, the unit's `StartLimitBurst=5` in
/// `StartLimitIntervalSec=10min` refused the sixth start of a rebootless sequence
/// (`start-limit-hit`), and the node never converged. `reset-failed` clears that count.
pub const RESET_START_LIMIT: &str = "{ systemctl reset-failed mco-agent.service || true; }";

pub fn restart_agent(vm: &mut Vm) -> Result<()> {
    vm.run(&format!(
        "{RESET_START_LIMIT} && systemctl restart mco-agent.service && \
         systemctl is-active mco-agent.service"
    ))
    .context("restarting mco-agent.service")?;
    Ok(())
}

/// Lets the agent of a held boot start (a runtime drop-in that clears the hold condition) and
/// starts it without waiting: it may resume an update that reboots the node at once.
pub fn release_agent(vm: &mut Vm) -> Result<()> {
    vm.run(&format!(
        "mkdir -p /run/systemd/system/mco-agent.service.d && \
         printf '[Unit]\\nConditionKernelCommandLine=\\n' \
           > /run/systemd/system/mco-agent.service.d/90-powercut-release.conf && \
         systemctl daemon-reload && {RESET_START_LIMIT} && systemctl start --no-block mco-agent.service"
    ))
    .context("releasing mco-agent.service")?;
    Ok(())
}

/// A file as found in the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub size: u64,
    pub sha256: String,
    /// `stat -c '%a %U'`.
    pub mode_owner: String,
    /// The first 80 bytes, for messages.
    pub head: Vec<u8>,
}

/// What the guest holds after a cut or at the end of an update.
#[derive(Debug, Clone, Default)]
pub struct GuestState {
    /// Path -> file (`None`: absent).
    pub files: BTreeMap<String, Option<Found>>,
    pub record: Option<serde_json::Value>,
    pub current_config: Option<serde_json::Value>,
    /// `stat` line and contents of /etc/shadow.
    pub shadow: String,
    pub unit_link: Option<String>,
    pub temp_files: Vec<String>,
    /// `/usr/share/mco-os-version` of the booted deployment.
    pub os_version: String,
    pub cmdline: String,
    pub ostree_status: String,
    /// The agent's status file of this boot.
    pub status: Option<serde_json::Value>,
}

/// The guest script printing the state: one `key value` line per item, values base64 (`-`:
/// missing).
fn state_script() -> String {
    let mut paths: Vec<&str> = CHECKED_FILES.to_vec();
    paths.push(VENDOR_ORIG);
    let mut s = String::from(
        "b() { if [ -e \"$2\" ]; then printf '%s %s\\n' \"$1\" \"$(base64 -w0 < \"$2\")\"; \
         else printf '%s -\\n' \"$1\"; fi; }\n\
         f() { if [ -f \"$1\" ]; then printf 'file %s %s %s %s %s\\n' \"$1\" \"$(stat -c %s \"$1\")\" \
         \"$(sha256sum < \"$1\" | cut -d' ' -f1)\" \"$(stat -c '%a:%U' \"$1\")\" \"$(head -c 80 \"$1\" | base64 -w0)\"; \
         elif [ -e \"$1\" ] || [ -L \"$1\" ]; then printf 'file %s notfile\\n' \"$1\"; \
         else printf 'file %s -\\n' \"$1\"; fi; }\n",
    );
    for p in paths {
        s.push_str(&format!("f {p}\n"));
    }
    s.push_str(&format!(
        "b record {UPDATE_RECORD}\nb current {CURRENT_CONFIG}\nb status {STATUS_FILE}\n\
         printf 'shadow %s\\n' \"$( (stat -c '%a %U %G' /etc/shadow; cat /etc/shadow) | base64 -w0)\"\n\
         printf 'link %s\\n' \"$(readlink {UNIT_LINK} | base64 -w0)\"\n\
         printf 'temps %s\\n' \"$(find /etc /var /home /root -xdev -name '*.mco-tmp-*' 2>/dev/null | base64 -w0)\"\n\
         b osversion /usr/share/mco-os-version\nb cmdline /proc/cmdline\n\
         printf 'ostree %s\\n' \"$(ostree admin status 2>&1 | base64 -w0)\"\n"
    ));
    s
}

/// Reads the guest's state.
pub fn read_state(vm: &mut Vm) -> Result<GuestState> {
    let out = vm
        .run(&state_script())
        .context("reading the guest's state")?;
    parse_state(&out)
}

fn decode(value: &str) -> Result<Option<Vec<u8>>> {
    if value == "-" {
        return Ok(None);
    }
    Ok(Some(B64.decode(value)?))
}

fn text(value: &str) -> Result<String> {
    Ok(String::from_utf8_lossy(&decode(value)?.unwrap_or_default()).into_owned())
}

fn json(value: &str, what: &str) -> Result<Option<serde_json::Value>> {
    decode(value)?
        .map(|b| serde_json::from_slice(&b).with_context(|| format!("{what}: not JSON")))
        .transpose()
}

fn parse_state(out: &str) -> Result<GuestState> {
    let mut state = GuestState::default();
    for line in out.lines() {
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "file" => {
                let fields: Vec<&str> = value.split(' ').collect();
                let path = fields[0].to_string();
                let found = match fields.get(1..) {
                    Some([size, sha, mode, head]) => Some(Found {
                        size: size.parse()?,
                        sha256: sha.to_string(),
                        mode_owner: mode.replace(':', " "),
                        head: B64.decode(head)?,
                    }),
                    Some([size, sha, mode]) => Some(Found {
                        size: size.parse()?,
                        sha256: sha.to_string(),
                        mode_owner: mode.replace(':', " "),
                        head: Vec::new(),
                    }),
                    Some(["notfile"]) => Some(Found {
                        size: 0,
                        sha256: "not a regular file".into(),
                        mode_owner: String::new(),
                        head: Vec::new(),
                    }),
                    _ => None,
                };
                state.files.insert(path, found);
            }
            "record" => state.record = json(value, "the update record")?,
            "current" => state.current_config = json(value, "currentconfig")?,
            "status" => state.status = json(value, "the status file")?,
            "shadow" => state.shadow = text(value)?,
            "link" => {
                state.unit_link = Some(text(value)?.trim().to_string()).filter(|l| !l.is_empty())
            }
            "temps" => state.temp_files = text(value)?.lines().map(str::to_string).collect(),
            "osversion" => state.os_version = text(value)?.trim().to_string(),
            "cmdline" => state.cmdline = text(value)?.trim().to_string(),
            "ostree" => state.ostree_status = text(value)?,
            _ => {}
        }
    }
    ensure!(
        state.files.len() == CHECKED_FILES.len() + 1 && !state.cmdline.is_empty(),
        "the guest's state is incomplete:\n{out}"
    );
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_script_prints() {
        let mut out = String::new();
        for (i, p) in CHECKED_FILES.iter().chain([&VENDOR_ORIG]).enumerate() {
            out.push_str(&match i {
                0 => format!("file {p} 3 abc 644:root {}\n", B64.encode("hi\n")),
                1 => format!("file {p} 0 e3b0 600:core\n"),
                2 => format!("file {p} notfile\n"),
                _ => format!("file {p} -\n"),
            });
        }
        out.push_str(&format!(
            "record {}\ncurrent -\nstatus -\nshadow {}\nlink \ntemps {}\nosversion {}\ncmdline {}\nostree -\n",
            B64.encode(r#"{"step":"Writing"}"#),
            B64.encode("640 root shadow\nroot:*:1::::::\n"),
            B64.encode("/etc/.a.mco-tmp-1-2\n"),
            B64.encode("b\n"),
            B64.encode("ostree=/x mco.powercut=b\n"),
        ));
        let s = parse_state(&out).unwrap();
        let first = s.files[CHECKED_FILES[0]].as_ref().unwrap();
        assert_eq!(
            (first.size, first.mode_owner.as_str(), first.head.as_slice()),
            (3, "644 root", b"hi\n".as_slice())
        );
        assert_eq!(s.files[CHECKED_FILES[1]].as_ref().unwrap().size, 0);
        assert_eq!(
            s.files[CHECKED_FILES[2]].as_ref().unwrap().sha256,
            "not a regular file"
        );
        assert!(s.files[VENDOR_ORIG].is_none());
        assert_eq!(s.record.unwrap()["step"], "Writing");
        assert!(s.current_config.is_none() && s.unit_link.is_none());
        assert_eq!(s.temp_files, ["/etc/.a.mco-tmp-1-2"]);
        assert_eq!(
            (s.os_version.as_str(), s.cmdline.as_str()),
            ("b", "ostree=/x mco.powercut=b")
        );
        assert!(s.shadow.starts_with("640 root shadow\n"));
    }
}
