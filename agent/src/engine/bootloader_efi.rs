//! The bootloader update's last resort, as the MCD's `runBootupdFallback` makes it: when
//! `bootupctl update` from the new image fails (old kernels cannot `RENAME_EXCHANGE` on FAT),
//! the image's EFI files (`/usr/lib/bootupd/updates/EFI`) are copied by hand onto the EFI
//! system partitions (ESPs) /boot boots from.
//!
//! Every step is a program run through the host-command seam, on the host: the agent's unit
//! (`ProtectSystem=strict`, `PrivateTmp=`, `PrivateDevices=`, no `CAP_SYS_ADMIN`) can neither
//! mount an ESP nor see a mount made outside it, so `ProcessCommands` runs these programs as
//! transient services of systemd, as it runs podman. The temp directory is `mktemp`'s on the
//! host for the same reason; the mount point and `findmnt`'s target are under the agent's root
//! (`/boot/efi` and `/boot` on a node).

use std::path::Path;

use serde::Deserialize;

use super::BootloaderHost;
use crate::host::command::HostCommands;

/// The GPT partition type of an EFI system partition.
pub const ESP_TYPE: &str = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b";
/// The container the EFI files are copied out of (a fixed name, as upstream's).
pub const CONTAINER: &str = "bootupd-efi-extract";
/// Where bootupd keeps, in the image, the EFI files it installs.
const UPDATES: &str = "/usr/lib/bootupd/updates/EFI";

/// `lsblk --paths --json -o NAME,PARTTYPE,FSTYPE`.
#[derive(Debug, Deserialize)]
struct Lsblk {
    blockdevices: Vec<BlockDevice>,
}

#[derive(Debug, Deserialize)]
struct BlockDevice {
    name: String,
    #[serde(default)]
    parttype: Option<String>,
    #[serde(default)]
    fstype: Option<String>,
    #[serde(default)]
    children: Vec<BlockDevice>,
}

impl BlockDevice {
    fn is_esp(&self) -> bool {
        self.parttype
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case(ESP_TYPE))
    }

    /// This device's ESP partitions (its direct children).
    fn esps(&self) -> impl Iterator<Item = &BlockDevice> {
        self.children.iter().filter(|c| c.is_esp())
    }

    /// Whether `name` is this device or anywhere below it.
    fn holds(&self, name: &str) -> bool {
        self.name == name || self.children.iter().any(|c| c.holds(name))
    }
}

/// The ESPs to update, from `lsblk`'s JSON and the device /boot is mounted from (`findmnt`):
/// /boot on a RAID array (its partition a `linux_raid_member`): the ESP of every disk holding a
/// member, so the node boots from any disk left; several disks with an ESP: the one on /boot's
/// disk only (the others belong to something else); else the first ESP.
pub fn esp_devices(lsblk_json: &str, boot: &str) -> Result<Vec<String>, String> {
    let lsblk: Lsblk =
        serde_json::from_str(lsblk_json).map_err(|e| format!("parsing lsblk output: {e}"))?;
    let disks = &lsblk.blockdevices;
    // /boot's partition: the disk's child that is /boot's device or whose child is (an array
    // assembled from it: the array has the filesystem's type, its member the RAID one)
    let boot_partition = disks
        .iter()
        .flat_map(|d| &d.children)
        .find(|p| p.name == boot || p.children.iter().any(|c| c.name == boot));
    if boot_partition.is_some_and(|p| p.fstype.as_deref() == Some("linux_raid_member")) {
        let esps: Vec<String> = disks
            .iter()
            .filter(|d| {
                d.children
                    .iter()
                    .any(|p| p.children.iter().any(|c| c.name == boot))
            })
            .flat_map(|d| d.esps().map(|p| p.name.clone()))
            .collect();
        if esps.is_empty() {
            return Err(format!("no ESP replicas found for RAID device {boot}"));
        }
        return Ok(esps);
    }
    if disks.iter().filter(|d| d.esps().next().is_some()).count() > 1 {
        // upstream looks at the disk's partitions only; /boot on LVM or LUKS inside a
        // partition is found here too
        return disks
            .iter()
            .find(|d| d.children.iter().any(|p| p.holds(boot)))
            .and_then(|d| d.esps().next())
            .map(|p| vec![p.name.clone()])
            .ok_or_else(|| format!("could not find ESP on boot disk containing {boot}"));
    }
    disks
        .iter()
        .find_map(|d| d.esps().next())
        .map(|p| vec![p.name.clone()])
        .ok_or_else(|| "no EFI System Partition found".to_string())
}

/// `findmnt -o SOURCE`'s answer as lsblk names the device: trimmed, without a `[/subvolume]`
/// suffix. (mount(8) hands the kernel the canonical device path, so a `/dev/disk/by-*` link
/// does not appear here.)
pub(super) fn boot_source(findmnt: &str) -> &str {
    let source = findmnt.trim();
    match source.find('[') {
        Some(i) if source.ends_with(']') => &source[..i],
        _ => source,
    }
}

/// Copies `image`'s EFI files onto the ESPs. The extraction container is removed whatever
/// happens (and a leftover of an interrupted run first, so `podman create` does not fail on
/// its name).
pub async fn copy(host: &BootloaderHost<'_>, image: &str) -> Result<(), String> {
    let commands = host.commands;
    // a leftover of an interrupted fallback; none is the usual case
    let _ = commands.run(&["podman", "rm", "-f", CONTAINER]).await;
    let cid = commands
        .stdout(&["podman", "create", "--name", CONTAINER, image])
        .await
        .map_err(|e| format!("creating container for EFI extraction: {e}"))?;
    let cid = cid.trim().lines().last().unwrap_or("").trim().to_string();
    let copied = if cid.is_empty() {
        Err("creating container for EFI extraction: podman printed no container id".to_string())
    } else {
        extract_and_copy(host, &cid).await
    };
    let name = if cid.is_empty() { CONTAINER } else { &cid };
    if let Err(e) = commands.stdout(&["podman", "rm", "-f", name]).await {
        tracing::warn!(container = name, error = %e, "bootupd fallback: removing the extraction container failed");
    }
    copied
}

/// The copy between `podman create` and `podman rm`: the temp directory is removed whatever
/// happens.
async fn extract_and_copy(host: &BootloaderHost<'_>, cid: &str) -> Result<(), String> {
    let commands = host.commands;
    let tmp = commands
        .stdout(&["mktemp", "-d", "--tmpdir", "bootupd-efi-XXXXXX"])
        .await
        .map_err(|e| format!("creating temp dir: {e}"))?;
    let tmp = tmp.trim();
    if !tmp.starts_with('/') {
        return Err(format!("creating temp dir: mktemp printed {tmp:?}"));
    }
    let copied = copy_from(host, cid, tmp).await;
    if let Err(e) = commands.stdout(&["rm", "-rf", tmp]).await {
        tracing::warn!(dir = tmp, error = %e, "bootupd fallback: removing the temp dir failed");
    }
    copied
}

async fn copy_from(host: &BootloaderHost<'_>, cid: &str, tmp: &str) -> Result<(), String> {
    let commands = host.commands;
    commands
        .stdout(&["podman", "cp", &format!("{cid}:{UPDATES}"), tmp])
        .await
        .map_err(|e| format!("extracting EFI files from container: {e}"))?;
    let lsblk = commands
        .stdout(&["lsblk", "--paths", "--json", "-o", "NAME,PARTTYPE,FSTYPE"])
        .await
        .map_err(|e| format!("lsblk: {e}"))?;
    let boot = host.root.host_path(Path::new("/boot"));
    let boot = boot.to_string_lossy();
    let source = commands
        .stdout(&["findmnt", "-n", "-o", "SOURCE", "--target", &boot])
        .await
        .map_err(|e| format!("findmnt /boot: {e}"))?;
    let esps = esp_devices(&lsblk, boot_source(&source))?;
    let mount_point = host.root.host_path(Path::new("/boot/efi"));
    let mount_point = mount_point.to_string_lossy();
    let efi = format!("{tmp}/EFI");
    for device in &esps {
        tracing::info!(device, "bootupd fallback: copying EFI files to {device}");
        copy_to_esp(commands, device, &efi, &mount_point)
            .await
            .map_err(|e| format!("copying EFI to {device}: {e}"))?;
    }
    commands
        .stdout(&["sync"])
        .await
        .map_err(|e| format!("sync: {e}"))?;
    Ok(())
}

/// Mounts `device` on `mount_point`, copies `efi` onto it and unmounts it, also when the copy
/// failed (an ESP left mounted on /boot/efi would hide the one the OS mounts there).
async fn copy_to_esp(
    commands: &dyn HostCommands,
    device: &str,
    efi: &str,
    mount_point: &str,
) -> Result<(), String> {
    commands
        .stdout(&["mount", device, mount_point])
        .await
        .map_err(|e| format!("mounting {device}: {e}"))?;
    let copied = copy_onto_mounted(commands, device, efi, mount_point).await;
    let unmounted = commands.stdout(&["umount", mount_point]).await;
    match (copied, unmounted) {
        (Err(e), Err(u)) => {
            tracing::warn!(mount_point, error = %u, "bootupd fallback: umount failed");
            Err(e)
        }
        (Err(e), Ok(_)) => Err(e),
        (Ok(()), Err(u)) => Err(format!("unmounting {mount_point}: {u}")),
        (Ok(()), Ok(_)) => Ok(()),
    }
}

async fn copy_onto_mounted(
    commands: &dyn HostCommands,
    device: &str,
    efi: &str,
    mount_point: &str,
) -> Result<(), String> {
    // bootupd writes a directory as .btmp.NAME and renames it into place: a failed update
    // leaves them behind. Best effort, as upstream: the copy works with them there.
    let esp_efi = format!("{mount_point}/EFI");
    let leftovers = [
        "find",
        &esp_efi,
        "-mindepth",
        "1",
        "-maxdepth",
        "1",
        "-type",
        "d",
        "-name",
        ".btmp.*",
        "-print",
        "-exec",
        "rm",
        "-rf",
        "{}",
        "+",
    ];
    match commands.stdout(&leftovers).await {
        Ok(removed) => {
            for dir in removed.lines().filter(|l| !l.is_empty()) {
                tracing::info!(dir, "bootupd fallback: removed leftover {dir}");
            }
        }
        Err(e) => tracing::warn!(error = %e, "bootupd fallback: removing leftover .btmp.* failed"),
    }
    let sums = [
        "find",
        mount_point,
        "-type",
        "f",
        "-exec",
        "sha256sum",
        "{}",
        "+",
    ];
    let before = commands
        .stdout(&sums)
        .await
        .unwrap_or_else(|e| e.to_string());
    tracing::info!("bootupd fallback [Before {device}]:\n{before}");
    commands
        .stdout(&["cp", "-rp", efi, &format!("{mount_point}/")])
        .await
        .map_err(|e| format!("copying EFI files: {e}"))?;
    let after = commands
        .stdout(&sums)
        .await
        .unwrap_or_else(|e| e.to_string());
    tracing::info!("bootupd fallback [After {device}]:\n{after}");
    Ok(())
}
