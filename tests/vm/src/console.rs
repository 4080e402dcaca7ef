//! The guest's serial console: a thread reads qemu's stdout, strips ANSI colour codes,
//! writes timestamped lines to the boot's log file and remembers how the boot ended.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result};
use regex::Regex;

static ANSI: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]").expect("valid regex"));

/// The line without terminal escape sequences and trailing whitespace.
pub fn strip_ansi(line: &str) -> String {
    ANSI.replace_all(line, "").trim_end().to_string()
}

/// How a boot ended, from the kernel's last words on the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootEnd {
    /// `reboot: Restarting system`: with `-no-reboot`, qemu exits and the harness boots again.
    Reboot,
    /// `reboot: Power down`.
    PowerOff,
    /// `Kernel panic`.
    Panic,
    /// qemu exited without any of those (killed, crashed, or the initramfs gave up).
    Unknown,
}

#[derive(Default)]
struct Seen {
    reboot: bool,
    poweroff: bool,
    panic: bool,
}

/// Reader of one boot's console; the log file stays after the VM is gone.
pub struct Console {
    path: PathBuf,
    seen: Arc<Mutex<Seen>>,
    reader: Option<JoinHandle<()>>,
}

impl Console {
    /// Starts reading `stream` (qemu's stdout) into the log file `path`.
    pub fn start(stream: impl Read + Send + 'static, path: &Path, t0: Instant) -> Result<Self> {
        let mut log = File::create(path)
            .with_context(|| format!("creating console log {}", path.display()))?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let seen_by_reader = Arc::clone(&seen);
        let reader = std::thread::Builder::new()
            .name("vm-console".into())
            .spawn(move || {
                let mut stream = BufReader::new(stream);
                let mut raw = Vec::new();
                loop {
                    raw.clear();
                    match stream.read_until(b'\n', &mut raw) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    let line = strip_ansi(&String::from_utf8_lossy(&raw));
                    // a log write error must not stop the reader (qemu would block on a full pipe)
                    let _ = writeln!(log, "[{:7.2}] {line}", t0.elapsed().as_secs_f64());
                    let mut seen = seen_by_reader.lock().unwrap_or_else(|e| e.into_inner());
                    seen.reboot |= line.contains("reboot: Restarting system");
                    seen.poweroff |= line.contains("reboot: Power down");
                    seen.panic |= line.contains("Kernel panic");
                }
                let _ = log.flush();
            })
            .context("spawning the console reader")?;
        Ok(Console {
            path: path.to_path_buf(),
            seen,
            reader: Some(reader),
        })
    }

    /// Waits for qemu's stdout to close (call after qemu exited) and says how the boot ended.
    pub fn finish(&mut self) -> BootEnd {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match (seen.panic, seen.reboot, seen.poweroff) {
            (true, _, _) => BootEnd::Panic,
            (_, true, _) => BootEnd::Reboot,
            (_, _, true) => BootEnd::PowerOff,
            _ => BootEnd::Unknown,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The last `n` lines of a console log, for failure messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_systemd_status_colours() {
        assert_eq!(
            strip_ansi(
                "[\x1b[0;32m  OK  \x1b[0m] Reached target \x1b[0;1;39mmulti-user.target\x1b[0m.\r\n"
            ),
            "[  OK  ] Reached target multi-user.target."
        );
        assert_eq!(strip_ansi("\x1b[?25lplain\x1b[?25h"), "plain");
    }

    #[test]
    fn tells_reboot_from_poweroff_and_panic() {
        let cases: [(&[u8], BootEnd); 4] = [
            (b"a\n[ 9.1] reboot: Restarting system\n", BootEnd::Reboot),
            (b"[ 9.1] reboot: Power down\n", BootEnd::PowerOff),
            (
                b"Kernel panic - not syncing: VFS\nreboot: Restarting system\n",
                BootEnd::Panic,
            ),
            (b"initrd: cannot mount /dev/vda", BootEnd::Unknown),
        ];
        let tmp = tempfile::tempdir().unwrap();
        for (i, (input, want)) in cases.into_iter().enumerate() {
            let path = tmp.path().join(format!("boot{i}.log"));
            let mut console = Console::start(input, &path, Instant::now()).unwrap();
            assert_eq!(console.finish(), want, "{}", String::from_utf8_lossy(input));
            let log = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                log.lines().count(),
                input
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                    .count()
            );
        }
        assert!(tail(&tmp.path().join("boot0.log"), 1).ends_with("reboot: Restarting system"));
    }
}
