//! Boot Loader Specification entries (`/boot/loader/entries/*.conf`), as ostree writes them:
//! the harness plays the boot loader and boots the entry with the highest `version`.

use std::cmp::Ordering;

/// One parsed BLS entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootEntry {
    /// File name, e.g. `ostree-1-debian.conf`.
    pub file: String,
    pub title: Option<String>,
    pub version: String,
    /// The kernel command line.
    pub options: String,
    /// Kernel path, relative to the boot partition.
    pub linux: String,
    /// Initramfs path, relative to the boot partition.
    pub initrd: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BlsError {
    #[error("boot entry {file}: no '{key}' line")]
    Missing { file: String, key: &'static str },
    #[error("boot entry {file}: more than one initrd ({first}, {second}); qemu takes one")]
    ManyInitrds {
        file: String,
        first: String,
        second: String,
    },
    #[error("no boot entries (.conf files) in /boot/loader/entries")]
    NoEntries,
}

impl BootEntry {
    /// Parses the text of entry `file`: `key value` lines, `#` comments, blank lines.
    pub fn parse(file: &str, text: &str) -> Result<Self, BlsError> {
        let (mut title, mut version, mut options, mut linux, mut initrd) =
            (None, None, None, None, None::<String>);
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let value = value.trim().to_string();
            match key {
                "title" => title = Some(value),
                "version" => version = Some(value),
                "options" => options = Some(value),
                "linux" => linux = Some(value),
                "initrd" => {
                    if let Some(first) = initrd.take() {
                        return Err(BlsError::ManyInitrds {
                            file: file.to_string(),
                            first,
                            second: value,
                        });
                    }
                    initrd = Some(value);
                }
                _ => {}
            }
        }
        let missing = |key| BlsError::Missing {
            file: file.to_string(),
            key,
        };
        Ok(BootEntry {
            file: file.to_string(),
            title,
            version: version.ok_or_else(|| missing("version"))?,
            options: options.ok_or_else(|| missing("options"))?,
            linux: linux.ok_or_else(|| missing("linux"))?,
            initrd,
        })
    }
}

/// Orders versions numerically when both are numbers (ostree writes 1, 2, ...), else as text.
fn compare_versions(a: &str, b: &str) -> Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        _ => a.cmp(b),
    }
}

/// The entry a boot loader would boot by default: the highest version.
pub fn default_entry(entries: &[BootEntry]) -> Result<&BootEntry, BlsError> {
    entries
        .iter()
        .max_by(|a, b| compare_versions(&a.version, &b.version))
        .ok_or(BlsError::NoEntries)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OSTREE_ENTRY: &str = "title Debian GNU/Linux 12 (bookworm) (ostree:0)
version 2
options root=/dev/vda rw console=ttyS0 ostree=/ostree/boot.1/debian/fb2a/0
linux /ostree/debian-fb2a/vmlinuz-6.1.0-56-amd64
initrd /ostree/debian-fb2a/initramfs-6.1.0-56-amd64.img
";

    #[test]
    fn parses_an_ostree_entry() {
        let e = BootEntry::parse("ostree-2-debian.conf", OSTREE_ENTRY).unwrap();
        assert_eq!(e.version, "2");
        assert_eq!(
            e.options,
            "root=/dev/vda rw console=ttyS0 ostree=/ostree/boot.1/debian/fb2a/0"
        );
        assert_eq!(e.linux, "/ostree/debian-fb2a/vmlinuz-6.1.0-56-amd64");
        assert_eq!(
            e.initrd.as_deref(),
            Some("/ostree/debian-fb2a/initramfs-6.1.0-56-amd64.img")
        );
        assert_eq!(
            e.title.as_deref(),
            Some("Debian GNU/Linux 12 (bookworm) (ostree:0)")
        );
    }

    #[test]
    fn comments_blank_lines_and_tabs_are_accepted() {
        let e = BootEntry::parse("x.conf", "# c\n\nversion\t3\noptions  a b\nlinux /k\n").unwrap();
        assert_eq!((e.version.as_str(), e.options.as_str()), ("3", "a b"));
        assert_eq!(e.initrd, None);
    }

    #[test]
    fn missing_keys_and_two_initrds_are_errors() {
        let cases = [
            ("options a\nlinux /k\n", "no 'version' line"),
            ("version 1\nlinux /k\n", "no 'options' line"),
            ("version 1\noptions a\n", "no 'linux' line"),
            (
                "version 1\noptions a\nlinux /k\ninitrd /i1\ninitrd /i2\n",
                "more than one initrd",
            ),
        ];
        for (text, want) in cases {
            let err = BootEntry::parse("e.conf", text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(err.starts_with("boot entry e.conf"), "{err}");
        }
    }

    #[test]
    fn default_entry_is_the_highest_version() {
        let entry =
            |v: &str| BootEntry::parse(v, &format!("version {v}\noptions o{v}\nlinux /k\n"));
        let entries: Vec<_> = ["2", "10", "1"].iter().map(|v| entry(v).unwrap()).collect();
        assert_eq!(default_entry(&entries).unwrap().version, "10");
        assert_eq!(default_entry(&[]), Err(BlsError::NoEntries));
    }
}
