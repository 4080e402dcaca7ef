//! The bootloader update before an OS rebase, as the MCD's `runBootloaderUpdate` makes it
//! (upstream `pkg/daemon/bootupd.go`, called first when `updateLayeredOS` rebases): on a CoreOS
//! node with Secure Boot on x86_64 or aarch64, the new image's bootloader (shim, GRUB) is
//! installed before the node boots that image, so a signing key the new shim needs is never
//! missing at the next boot.
//!
//! Gates, in order: a CoreOS variant (os-release), the architecture, `mokutil --sb-state`
//! saying `SecureBoot enabled` (a failing mokutil counts as on: the update is harmless when
//! not needed, a missed one can stop a node from booting). Then, on an OS of RHEL 9.6 or later,
//! the OS's own `bootloader-update.service` is started; when it is older or the unit fails,
//! the new image's `bootupctl update` runs in a privileged container (`systemd-run ... podman
//! run`), after pulling the image when podman does not hold it (with the MCO's
//! `policy-for-old-podman.json` when podman is older than 4.4.1). When `bootupctl update` fails
//! too, the image's EFI files are copied onto the EFI system partitions by hand ([`efi`]).
//! Nothing here ever fails the update: a failure is the warning `bootloader update failed: …`.

use std::path::Path;

use crate::host::command::HostCommands;
use crate::host::systemd::Systemd;
use crate::os::host_os;
use crate::rootfs::Root;
use machine_config::mco::paths::{KUBELET_PULL_SECRET, MERGED_PULL_SECRET};

/// The unit RHEL 9.6+ CoreOS ships to update the bootloader.
pub const UNIT: &str = "bootloader-update.service";
/// The proxy settings the MCO writes, given to the container's pull and run.
const PROXY_ENV: &str = "EnvironmentFile=-/etc/mco/proxy.env";
/// The signature policy the MCO writes for a podman that cannot read `sigstoreSigned`
/// requirements (before 4.4.1): the node's policy without them.
pub const OLD_PODMAN_POLICY: &str = "/etc/machine-config-daemon/policy-for-old-podman.json";

#[path = "bootloader_efi.rs"]
pub mod efi;

/// What the gates decided (the table tests' rows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No update: the reason, for the log.
    Skip(&'static str),
    /// Start [`UNIT`], then the container on failure.
    Unit,
    /// The container (`bootupctl update` from the new image).
    Container,
}

/// The host the gates read and the update runs on.
pub struct BootloaderHost<'a> {
    pub root: &'a Root,
    pub commands: &'a dyn HostCommands,
    pub systemd: Option<&'a dyn Systemd>,
    /// The node's architecture, as Rust names it (`x86_64`, `aarch64`, ...).
    pub arch: &'a str,
}

/// The OS version the MCD compares with 9.6: `RHEL_VERSION`; else the RHEL part of an RHCOS
/// `VERSION` (`418.94.202410090804-0` with `OPENSHIFT_VERSION="4.18"`: `9.4`); else
/// `VERSION_ID`. `None` when none parses as `major.minor`.
pub fn os_version(os_release: &str) -> Option<(u32, u32)> {
    let get = |key: &str| {
        os_release
            .lines()
            .filter_map(|l| l.trim().split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.trim().trim_matches(['"', '\'']).to_string())
            .filter(|v| !v.is_empty())
    };
    let major_minor = |v: &str| {
        let mut parts = v.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next().map_or(Some(0), |m| m.parse().ok())?;
        Some((major, minor))
    };
    if let Some(v) = get("RHEL_VERSION") {
        return major_minor(&v);
    }
    if let (Some(version), Some(ocp)) = (get("VERSION"), get("OPENSHIFT_VERSION"))
        && let Some(rest) = version.strip_prefix(&format!("{}.", ocp.replace('.', "")))
        && let Some(rhel) = rest.split('.').next()
        && rhel.len() >= 2
        && rhel.bytes().all(|b| b.is_ascii_digit())
    {
        let (major, minor) = rhel.split_at(1);
        return Some((major.parse().ok()?, minor.parse().ok()?));
    }
    major_minor(&get("VERSION_ID")?)
}

/// The gates (see the module docs): `secure_boot` is `mokutil --sb-state`'s answer (`Err`:
/// mokutil failed).
pub fn plan(
    coreos: bool,
    arch: &str,
    secure_boot: Result<&str, String>,
    version: Option<(u32, u32)>,
) -> Plan {
    if !coreos {
        return Plan::Skip("not a CoreOS variant");
    }
    if !matches!(arch, "x86_64" | "aarch64") {
        return Plan::Skip("the architecture has no Secure Boot bootloader to update");
    }
    match secure_boot {
        Ok(out) if !out.contains("SecureBoot enabled") => {
            return Plan::Skip(
                "runBootloaderUpdate: Secure Boot not enabled, bootloader update not required",
            );
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(
                error = e,
                "mokutil --sb-state failed: Secure Boot taken to be on"
            );
        }
    }
    match version {
        Some(v) if v >= (9, 6) => Plan::Unit,
        _ => Plan::Container,
    }
}

/// Updates the bootloader for the rebase to `image` when the gates say so; never fails (a
/// failure is logged as the MCD logs it).
pub async fn update(host: &BootloaderHost<'_>, image: &str) {
    let os_release = ["/etc/os-release", "/usr/lib/os-release"]
        .iter()
        .find_map(|p| host.root.read(Path::new(p)).ok().flatten())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let coreos = host_os::is_coreos(host.root);
    let needs_mokutil = coreos && matches!(host.arch, "x86_64" | "aarch64");
    let secure_boot = if needs_mokutil {
        host.commands
            .stdout(&["mokutil", "--sb-state"])
            .await
            .map_err(|e| e.to_string())
    } else {
        Ok(String::new())
    };
    let plan = plan(
        coreos,
        host.arch,
        secure_boot.as_deref().map_err(|e| e.clone()),
        os_version(&os_release),
    );
    match plan {
        Plan::Skip(why) => tracing::info!("{why}"),
        Plan::Unit => {
            let started = match host.systemd {
                Some(systemd) => systemd.start_unit(UNIT).await.map_err(|e| e.to_string()),
                None => Err("systemd is not reachable".to_string()),
            };
            match started {
                Ok(()) => tracing::info!(unit = UNIT, "bootloader updated"),
                Err(e) => {
                    tracing::warn!(
                        unit = UNIT,
                        error = e,
                        "starting {UNIT} failed; updating the bootloader from the new image"
                    );
                    container(host, image).await;
                }
            }
        }
        Plan::Container => container(host, image).await,
    }
}

/// `bootupctl update` from `image` in a privileged container, pulled first when podman does
/// not hold it.
async fn container(host: &BootloaderHost<'_>, image: &str) {
    if let Err(e) = run_container(host, image).await {
        tracing::warn!("bootloader update failed: {e}");
    }
}

async fn run_container(host: &BootloaderHost<'_>, image: &str) -> Result<(), String> {
    let local = match super::os_image::local_image(host.commands, image).await {
        Ok(local) => local.is_some(),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "could not ask podman for {image}; pulling it");
            false
        }
    };
    if !local {
        let authfile = [MERGED_PULL_SECRET, KUBELET_PULL_SECRET]
            .into_iter()
            .find(|p| host.root.lstat(Path::new(p)).ok().flatten().is_some());
        let mut pull = vec![
            "systemd-run",
            "--unit",
            "machine-config-daemon-bootupd",
            "-p",
            PROXY_ENV,
            "--collect",
            "--wait",
            "--",
            "podman",
            "pull",
        ];
        if let Some(secret) = authfile {
            pull.extend(["--authfile", secret]);
        }
        if old_podman_policy(host).await {
            pull.extend(["--signature-policy", OLD_PODMAN_POLICY]);
        }
        pull.push(image);
        host.commands
            .stdout(&pull)
            .await
            .map_err(|e| format!("pulling image for bootupctl: {e}"))?;
    }
    let invocation = format!(
        "INVOCATION_ID={}",
        rand::random::<[u8; 16]>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let updated = host
        .commands
        .stdout(&[
            "systemd-run",
            "--unit",
            "machine-config-daemon-bootupd-update",
            "-p",
            PROXY_ENV,
            "--collect",
            "--wait",
            "--",
            "podman",
            "run",
            "--env",
            &invocation,
            "--privileged",
            "--pid=host",
            "--net=host",
            "--rm",
            "-v",
            "/boot:/boot:rslave",
            "-v",
            "/dev:/dev",
            image,
            "bootupctl",
            "update",
        ])
        .await;
    if let Err(e) = updated {
        tracing::warn!(error = %e, "bootupctl update failed; falling back to manual EFI copy");
        efi::copy(host, image)
            .await
            .map_err(|e| format!("bootupctl fallback EFI copy: {e}"))?;
        tracing::info!(image, "bootupctl: fallback EFI copy completed");
        return Ok(());
    }
    tracing::info!(image, "bootloader updated from the new image");
    Ok(())
}

/// Whether the pull takes [`OLD_PODMAN_POLICY`]: the node has it and podman's API version
/// (`podman version --format {{.APIVersion}}`, as the MCD reads it) is older than 4.4.1.
/// Without the file nothing is asked.
async fn old_podman_policy(host: &BootloaderHost<'_>) -> bool {
    if host
        .root
        .lstat(Path::new(OLD_PODMAN_POLICY))
        .ok()
        .flatten()
        .is_none()
    {
        return false;
    }
    let version = host
        .commands
        .stdout(&["podman", "version", "--format", "{{.APIVersion}}"])
        .await;
    match version.as_deref().map(podman_is_older_than_4_4_1) {
        Ok(Some(old)) => old,
        // A version that cannot be read counts as old, as in the MCD: the pull then uses the
        // MCO's policy without sigstoreSigned requirements. An old podman given the node's
        // policy.json refuses every pull, while the OS image is named by digest, so the
        // content pulled is the same whichever policy a new podman is given.
        Ok(None) => {
            tracing::warn!(
                version = version.as_deref().unwrap_or(""),
                "podman's API version is not MAJOR.MINOR.PATCH: taken to be older than 4.4.1"
            );
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "podman version failed: podman taken to be older than 4.4.1");
            true
        }
    }
}

/// Whether `version` (`4.3.1`, `5.3.0-rc1`: semantic versions) is older than 4.4.1, a
/// pre-release older than its release; `None` when it is not `MAJOR.MINOR.PATCH[-PRE][+BUILD]`.
pub fn podman_is_older_than_4_4_1(version: &str) -> Option<bool> {
    let version = version.trim();
    let version = version.split_once('+').map_or(version, |(v, _)| v);
    let (core, pre) = match version.split_once('-') {
        Some((core, pre)) => (core, !pre.is_empty()),
        None => (version, false),
    };
    let mut parts = core.split('.').map(|p| {
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u64>().ok())
            .flatten()
    });
    let triple = (parts.next()??, parts.next()??, parts.next()??);
    if parts.next().is_some() {
        return None;
    }
    Some(triple < (4, 4, 1) || (triple == (4, 4, 1) && pre))
}

#[cfg(test)]
#[path = "bootloader_tests.rs"]
mod tests;
