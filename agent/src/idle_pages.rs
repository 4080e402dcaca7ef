//! Handing the kernel back the pages of the agent's own executable once the daemon is idle.
//!
//! An update runs through most of the binary (TLS, the API client, JSON, D-Bus, the apply), and
//! every code page it touched stays mapped into the process afterwards: in the idle daemon that is
//! most of its resident memory (docs/benchmarks.md "Idle memory"), for code that runs again only
//! at the next update. Once the daemon has been quiet for a while it asks the kernel to reclaim
//! them (`madvise(MADV_PAGEOUT)`, Linux 5.4) on the read-only mappings of its executable. They
//! are clean file pages, so nothing is written anywhere: the kernel drops the ones no other
//! process maps, and a page needed later is read back from the file on first touch (a page
//! fault, as when the daemon started). Pages of shared libraries and anonymous memory are left
//! alone. On a kernel without `MADV_PAGEOUT` the advice fails and nothing changes.

use std::io;
use std::path::Path;

/// A read-only mapping of the executable: where it starts and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mapping {
    start: usize,
    len: usize,
}

/// What one release did: how many mappings were advised and their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Released {
    pub mappings: usize,
    pub bytes: usize,
}

/// Advises the kernel to reclaim the resident pages of the running executable's read-only
/// mappings (code, constants). The error says what could not be read or advised.
// One of the agent's two `unsafe` places (the other: `input::mapped`): madvise takes a raw
// address range (see the SAFETY note).
#[allow(unsafe_code)]
pub fn release_executable_pages() -> io::Result<Released> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut released = Released::default();
    for mapping in read_only_mappings_of(&maps, &exe) {
        // SAFETY: the range is a whole mapping of this process as /proc/self/maps lists it, and
        // MADV_PAGEOUT only drops clean pages the kernel reads back on the next access: it
        // changes no memory contents, so no reference into the range is invalidated.
        unsafe {
            rustix::mm::madvise(
                mapping.start as *mut std::ffi::c_void,
                mapping.len,
                rustix::mm::Advice::LinuxPageOut,
            )
        }
        .map_err(io::Error::from)?;
        released.mappings += 1;
        released.bytes += mapping.len;
    }
    Ok(released)
}

/// The read-only (`r--p`, `r-xp`) mappings of `exe` in a `/proc/PID/maps` text. Writable ones
/// (`.data`, `.bss`) are the process's own memory and are not file pages to drop.
fn read_only_mappings_of(maps: &str, exe: &Path) -> Vec<Mapping> {
    maps.lines()
        .filter_map(|line| {
            // address perms offset dev inode pathname (the pathname may contain spaces)
            let mut fields = line.splitn(6, ' ');
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?.trim_start();
            if !perms.starts_with('r') || perms.as_bytes().get(1) != Some(&b'-') {
                return None;
            }
            if Path::new(path) != exe {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then(|| Mapping {
                start,
                len: end - start,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0a0000000-55d0a0100000 r--p 00000000 fd:01 1234 /usr/bin/mco-agent
55d0a0100000-55d0a0900000 r-xp 00100000 fd:01 1234 /usr/bin/mco-agent
55d0a0900000-55d0a0a00000 r--p 00900000 fd:01 1234 /usr/bin/mco-agent
55d0a0a00000-55d0a0a10000 rw-p 00a00000 fd:01 1234 /usr/bin/mco-agent
55d0a1000000-55d0a1100000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000100000 r-xp 00000000 fd:01 99   /usr/lib64/libc.so.6
7f0000200000-7f0000201000 r--p 00000000 fd:01 77   /usr/bin/mco-agent-other
7f0000300000-7f0000301000 r--p 00000000 fd:01 78   /opt/with space/mco-agent
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn only_the_executables_read_only_mappings_are_taken() {
        let got = read_only_mappings_of(MAPS, Path::new("/usr/bin/mco-agent"));
        assert_eq!(
            got,
            vec![
                Mapping {
                    start: 0x55d0a0000000,
                    len: 0x100000
                },
                Mapping {
                    start: 0x55d0a0100000,
                    len: 0x800000
                },
                Mapping {
                    start: 0x55d0a0900000,
                    len: 0x100000
                },
            ]
        );
    }

    #[test]
    fn a_path_with_spaces_is_matched_whole() {
        let got = read_only_mappings_of(MAPS, Path::new("/opt/with space/mco-agent"));
        assert_eq!(
            got,
            vec![Mapping {
                start: 0x7f0000300000,
                len: 0x1000
            }]
        );
    }

    /// Resident kB of `exe`'s mappings, from `/proc/self/smaps`.
    fn resident_kib_of(exe: &Path) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut ours = false;
        let mut kib = 0;
        for line in smaps.lines() {
            if let Some(rest) = line.strip_prefix("Rss:") {
                if ours {
                    kib += rest.trim().trim_end_matches(" kB").parse::<u64>().unwrap();
                }
            } else if line
                .split(' ')
                .next()
                .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
            {
                ours = line.splitn(6, ' ').nth(5).map(str::trim_start) == exe.to_str();
            }
        }
        kib
    }

    /// Set in the child [`releasing_drops_the_test_binarys_resident_pages_and_it_keeps_running`]
    /// starts: it measures instead of starting a child.
    const MEASURE_HERE: &str = "MCO_IDLE_PAGES_MEASURE_HERE";

    #[test]
    fn releasing_drops_the_test_binarys_resident_pages_and_it_keeps_running() {
        // The test binary is an executable like the agent: its code pages are dropped and read
        // back as the test goes on. Only pages no other process maps are dropped, and the test
        // runner runs other tests of this very binary beside this one: the measure runs in a
        // private copy of it (written and synced, so its pages are clean), alone.
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        if std::env::var_os(MEASURE_HERE).is_some() {
            let before = resident_kib_of(&exe);
            let released = release_executable_pages().expect("madvise(MADV_PAGEOUT)");
            let after = resident_kib_of(&exe);
            assert!(released.mappings >= 2, "{released:?}");
            assert!(
                after < before,
                "resident kB of {}: {before} before, {after} after",
                exe.display()
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("idle-pages-test");
        {
            let mut from = std::fs::File::open(&exe).unwrap();
            let mut to = std::fs::File::create(&copy).unwrap();
            std::io::copy(&mut from, &mut to).unwrap();
            to.sync_all().unwrap();
        }
        std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let out = std::process::Command::new(&copy)
            .args([
                "--exact",
                "idle_pages::tests::releasing_drops_the_test_binarys_resident_pages_and_it_keeps_running",
                "--test-threads=1",
            ])
            .env(MEASURE_HERE, "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "the measure did not run: {text}");
    }
}
