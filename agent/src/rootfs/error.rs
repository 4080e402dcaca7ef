//! Errors of the root-confined file system layer.

use std::io;
use std::path::{Path, PathBuf};

pub use machine_config::error::go_error_text;

/// A failed operation on a path inside the root. `path` is the path as seen from inside the root
/// (absolute, e.g. `/etc/foo`), which is what configs and messages talk about.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// A system call failed. Rendered like Go's `*PathError` (`lstat /etc/foo: no such file or
    /// directory`) because the MCD's validation messages embed that text.
    /// It prints the OS error's text and does not return it as its `source()`, so that a chain
    /// of causes says it once.
    #[error("{op} {}: {}", path.display(), go_error_text(error))]
    Io {
        /// The operation, named like the system call (`lstat`, `open`, `mkdir`...).
        op: &'static str,
        /// Path inside the root.
        path: PathBuf,
        /// The underlying error (its text is this error's last part).
        error: io::Error,
    },
    /// Resolving `path` met a symlink where someone other than root could have put it (see
    /// `resolve::follow_allowed`): it is not followed.
    #[error("refusing to follow the symlink {} on the way to {}: {why}", link.display(), path.display())]
    UntrustedSymlink {
        /// The symlink, as a path inside the root.
        link: PathBuf,
        /// The path being resolved.
        path: PathBuf,
        /// Why it is not followed.
        why: String,
    },
    /// The path is not one this layer accepts (relative, empty, or ending in `..`).
    #[error("invalid path {}: {reason}", path.display())]
    InvalidPath {
        /// The offending path.
        path: PathBuf,
        /// Why it is refused.
        reason: &'static str,
    },
}

impl RootError {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
        source: impl Into<io::Error>,
    ) -> Self {
        RootError::Io {
            op,
            path: path.into(),
            error: source.into(),
        }
    }

    /// The same error attributed to another operation (for messages that name the call the user
    /// knows, e.g. `lstat` for a failure while resolving a path's parents).
    pub fn with_op(self, op: &'static str) -> Self {
        match self {
            RootError::Io { path, error, .. } => RootError::Io { op, path, error },
            other => other,
        }
    }

    /// The same error with its paths as host paths under `root` (`/mnt/root/etc/x`): what a
    /// command run with `--root` says about the agent's own files. The file layer names paths
    /// inside the root, as the MCD's messages name a config's files.
    pub fn under(self, root: &Path) -> Self {
        let host = |path: PathBuf| root.join(path.strip_prefix("/").unwrap_or(&path));
        match self {
            RootError::Io { op, path, error } => RootError::Io {
                op,
                path: host(path),
                error,
            },
            RootError::UntrustedSymlink { link, path, why } => RootError::UntrustedSymlink {
                link: host(link),
                path: host(path),
                why,
            },
            RootError::InvalidPath { path, reason } => RootError::InvalidPath { path, reason },
        }
    }

    /// The OS error kind, if this is an I/O error.
    pub fn kind(&self) -> Option<io::ErrorKind> {
        match self {
            RootError::Io { error, .. } => Some(error.kind()),
            RootError::InvalidPath { .. } | RootError::UntrustedSymlink { .. } => None,
        }
    }

    /// Whether the error means "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        self.kind() == Some(io::ErrorKind::NotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_error_renders_like_go_path_error() {
        let e = RootError::io("lstat", "/etc/foo", libc_enoent());
        assert_eq!(e.to_string(), "lstat /etc/foo: no such file or directory");
        assert!(e.is_not_found());
    }

    fn libc_enoent() -> io::Error {
        io::Error::from_raw_os_error(2)
    }
}
