//! The rendered configs the power-cut scenarios move the node between, and what each one puts
//! on the disk.
//!
//! A config is a [`Version`]: a *side* (`a` or `b`: the OS commit, a kernel argument, a systemd
//! unit, a 128 KiB file under `/etc`, and one file only that side manages) and a generation `n`
//! (the kubelet's pull secret, core's SSH key and password hash). Going to the other side is a
//! reboot update (OS rebase, kernel arguments, files and a unit under `/etc`); a new generation
//! on the same side is rebootless (the MCD's disruption policy for those three is None).
//! Side `b` manages [`VENDOR_FILE`], which exists before any config (an OS default): its
//! original is backed up when `b` first writes it and put back when `a` drops it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::agent::{OS_IMAGE_A, OS_IMAGE_B};

/// Managed by both sides, content by side (128 KiB: a torn or short write cannot go unseen).
pub const COMMON_FILE: &str = "/etc/mco-powercut/common.conf";
/// Exists before any config; managed by side `b` only.
pub const VENDOR_FILE: &str = "/etc/mco-powercut/vendor.conf";
/// Managed by side `a` only; absent otherwise.
pub const A_ONLY_FILE: &str = "/etc/mco-powercut/a-only.conf";
/// The kubelet's pull secret, content by generation (its disruption policy is None).
pub const PULL_SECRET: &str = "/var/lib/kubelet/config.json";
/// A unit both sides enable, content by side.
pub const UNIT: &str = "mco-powercut.service";
/// Where the agent writes it.
pub const UNIT_FILE: &str = "/etc/systemd/system/mco-powercut.service";
/// The enablement link of [`UNIT`].
pub const UNIT_LINK: &str = "/etc/systemd/system/multi-user.target.wants/mco-powercut.service";
/// core's home, as on Fedora CoreOS (`/home` of an ostree deployment is not carried over an OS
/// update; `/var` is).
pub const CORE_HOME: &str = "/var/home/core";
/// core's keys file, as the agent writes it.
pub const KEYS_FILE: &str = "/var/home/core/.ssh/authorized_keys.d/ignition";
/// The kernel argument whose value is the side.
pub const KARG: &str = "mco.powercut";

/// The vendor file's original contents.
pub fn vendor_original() -> Vec<u8> {
    b"# shipped by the OS; the power-cut configs of side b replace it\nvendor=1\n".to_vec()
}

/// The OS side of a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn letter(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }

    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    /// The `osImageURL` (the stand-in maps it to commit `debian/mco/<side>`).
    pub fn os_image(self) -> &'static str {
        match self {
            Side::A => OS_IMAGE_A,
            Side::B => OS_IMAGE_B,
        }
    }
}

/// One rendered config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Version {
    pub side: Side,
    pub n: u32,
}

impl Version {
    pub fn name(self) -> String {
        format!("rendered-worker-{}-{}", self.side.letter(), self.n)
    }

    /// The next config: the other side (a reboot update), or the same side's next generation
    /// (rebootless).
    pub fn next(self, reboot: bool) -> Version {
        Version {
            side: if reboot { self.side.other() } else { self.side },
            n: self.n + 1,
        }
    }

    /// The kernel argument this config asks for.
    pub fn karg(self) -> String {
        format!("{KARG}={}", self.side.letter())
    }

    pub fn ssh_key(self) -> String {
        format!(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPowerCut{:08} powercut-{}",
            self.n, self.n
        )
    }

    /// The keys file the agent writes for this config.
    pub fn keys_file(self) -> Vec<u8> {
        format!("{}\n", self.ssh_key()).into_bytes()
    }

    pub fn password_hash(self) -> String {
        format!(
            "$6$powercut{}$PowerCutHashOfGeneration{:08}",
            self.n, self.n
        )
    }

    /// What this config puts at `path` (`None`: the path does not exist), for the paths the
    /// scenarios check.
    pub fn file(self, path: &str) -> Option<Vec<u8>> {
        match path {
            COMMON_FILE => Some(lines(&format!("common side {}", self.side.letter()), 2048)),
            PULL_SECRET => Some(pull_secret(self.n)),
            VENDOR_FILE => Some(match self.side {
                Side::B => lines("vendor replaced by side b", 64),
                Side::A => vendor_original(),
            }),
            A_ONLY_FILE => (self.side == Side::A).then(|| lines("only side a", 64)),
            UNIT_FILE => Some(unit(self.side).into_bytes()),
            KEYS_FILE => Some(self.keys_file()),
            _ => None,
        }
    }

    /// The rendered MachineConfig's spec.
    pub fn spec(self) -> Value {
        let mut files = vec![
            file_entry(COMMON_FILE, 0o644, &self.file(COMMON_FILE)),
            file_entry(PULL_SECRET, 0o600, &self.file(PULL_SECRET)),
        ];
        match self.side {
            Side::A => files.push(file_entry(A_ONLY_FILE, 0o644, &self.file(A_ONLY_FILE))),
            Side::B => files.push(file_entry(VENDOR_FILE, 0o644, &self.file(VENDOR_FILE))),
        }
        json!({
            "osImageURL": self.side.os_image(),
            "kernelArguments": [self.karg()],
            "config": {
                "ignition": {"version": "3.2.0"},
                "passwd": {"users": [{
                    "name": "core",
                    "sshAuthorizedKeys": [self.ssh_key()],
                    "passwordHash": self.password_hash(),
                }]},
                "storage": {"files": files},
                "systemd": {"units": [{"name": UNIT, "enabled": true, "contents": unit(self.side)}]},
            },
        })
    }
}

/// The paths whose contents the scenarios compare with a config's ([`Version::file`]).
pub const CHECKED_FILES: &[&str] = &[
    COMMON_FILE,
    VENDOR_FILE,
    A_ONLY_FILE,
    PULL_SECRET,
    UNIT_FILE,
    KEYS_FILE,
];

fn file_entry(path: &str, mode: u32, contents: &Option<Vec<u8>>) -> Value {
    let data = contents.as_deref().unwrap_or_default();
    json!({
        "path": path, "mode": mode, "overwrite": true,
        "contents": {"source": format!("data:;base64,{}", B64.encode(data))},
    })
}

/// `count` numbered 64-byte lines starting with `label`.
fn lines(label: &str, count: usize) -> Vec<u8> {
    let mut out = String::with_capacity(count * 64);
    for i in 0..count {
        let line = format!("{label} line {i:06} ");
        out.push_str(&format!("{line:.<63}\n"));
    }
    out.into_bytes()
}

/// A 16 KiB JSON pull secret of generation `n`.
fn pull_secret(n: u32) -> Vec<u8> {
    let padding = "x".repeat(16 * 1024 - 80);
    format!("{{\"auths\":{{\"registry.example/{n:08}\":{{\"auth\":\"{padding}\"}}}}}}\n")
        .into_bytes()
}

fn unit(side: Side) -> String {
    format!(
        "[Unit]\nDescription=power-cut scenario unit, side {}\n[Service]\nType=oneshot\n\
         ExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
        side.letter()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use machine_config::Config;

    #[test]
    fn both_sides_parse_and_carry_the_checked_contents() {
        for side in [Side::A, Side::B] {
            let v = Version { side, n: 7 };
            let ign = Config::from_value(v.spec()["config"].clone()).unwrap();
            for f in &ign.storage.files {
                assert_eq!(
                    f.decoded_contents().unwrap(),
                    v.file(&f.path).unwrap(),
                    "{}",
                    f.path
                );
            }
            let paths: Vec<&str> = ign.storage.files.iter().map(|f| f.path.as_str()).collect();
            assert_eq!(paths.contains(&VENDOR_FILE), side == Side::B);
            assert_eq!(paths.contains(&A_ONLY_FILE), side == Side::A);
        }
        assert_eq!(lines("x", 2048).len(), 128 * 1024);
        assert!(pull_secret(3).len() > 16 * 1000);
        let v = Version {
            side: Side::A,
            n: 1,
        };
        assert_eq!(
            v.next(true),
            Version {
                side: Side::B,
                n: 2
            }
        );
        assert_eq!(
            v.next(false),
            Version {
                side: Side::A,
                n: 2
            }
        );
        assert_eq!(v.name(), "rendered-worker-a-1");
    }
}
