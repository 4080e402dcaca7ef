//! Exit codes: one per outcome, the same for every command (the table is in docs/agent.md,
//! "Exit codes", and each row has a test in `agent/tests/exit_codes.rs`).
//!
//! 0, 1 and 2 are the contract of `validate` and `diff` (the node matches, does not, the change
//! cannot be made); the errors that say nothing about the node use the codes BSD's
//! `sysexits.h` names (usage 64, invalid input 65, permission 77), as many system tools do, so
//! that a script tells "the node is Degraded" from "I mistyped the command".
//!
//! An error is given its class where it is made or first seen ([`Classify`]); an error nobody
//! classified is [`Exit::Failed`], except an I/O error that means permission was refused
//! ([`Exit::NeedsRoot`]).

use std::fmt;
use std::process::ExitCode;

/// What a command's exit code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It did what was asked (`validate`: the disk matches; `diff`: the change is reconcilable).
    Success,
    /// The node is not as wanted: `validate`'s mismatches, an update that failed and left the
    /// node Degraded, a drain that pods block, `recover` not Done by `--wait`, a playbook
    /// check that failed.
    NotAsWanted,
    /// The change cannot be made on a running node (`diff`, `once-from`).
    Unreconcilable,
    /// The command could not do its work: an I/O error, a server, the API or rpm-ostree that
    /// cannot be reached or refuses, a TLS failure.
    Failed,
    /// Not confirmed (answered no, or no terminal to ask on and no `--yes`): nothing changed.
    NotConfirmed,
    /// The command line is wrong: an unknown option, a missing argument, options that
    /// exclude each other.
    Usage,
    /// What the command was given is wrong: a config, policy, configuration fragment or
    /// environment value that is malformed or refused, or a file or directory that does not
    /// exist.
    InvalidInput,
    /// `start` stopped to be restarted (the cluster's enabled feature gates changed): the unit
    /// starts it again (`RestartForceExitStatus=75`) and does not count it a failure.
    Restart,
    /// Not allowed: the command needs root (or write access it lacks). Nothing changed.
    NeedsRoot,
}

impl Exit {
    /// Every outcome, in the table's order.
    pub const ALL: [Exit; 9] = [
        Exit::Success,
        Exit::NotAsWanted,
        Exit::Unreconcilable,
        Exit::Failed,
        Exit::NotConfirmed,
        Exit::Usage,
        Exit::InvalidInput,
        Exit::Restart,
        Exit::NeedsRoot,
    ];

    /// The number.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::NotAsWanted => 1,
            Exit::Unreconcilable => 2,
            Exit::Failed => 3,
            Exit::NotConfirmed => 4,
            Exit::Usage => 64,
            Exit::InvalidInput => 65,
            Exit::Restart => 75,
            Exit::NeedsRoot => 77,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

/// An error with its class and, when there is one, the next step for the person who ran the
/// command (printed as `hint: …` under the error). Its text is the wrapped error's whole chain,
/// so wrapping changes no message.
#[derive(Debug)]
pub struct Classified {
    pub exit: Exit,
    pub hint: Option<String>,
    inner: anyhow::Error,
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", super::report::chain(&self.inner))
    }
}

impl std::error::Error for Classified {}

/// Gives errors a class (and a hint).
pub trait Classify<T> {
    /// The error is of class `exit`.
    fn exit(self, exit: Exit) -> anyhow::Result<T>;
    /// [`Exit::InvalidInput`].
    fn invalid_input(self) -> anyhow::Result<T>
    where
        Self: Sized,
    {
        self.exit(Exit::InvalidInput)
    }
    /// The error is of class `exit`, with `hint` as the next step.
    fn hint(self, exit: Exit, hint: impl Into<String>) -> anyhow::Result<T>;
}

impl<T, E: Into<anyhow::Error>> Classify<T> for Result<T, E> {
    fn exit(self, exit: Exit) -> anyhow::Result<T> {
        self.map_err(|e| classified(exit, None, e.into()))
    }
    fn hint(self, exit: Exit, hint: impl Into<String>) -> anyhow::Result<T> {
        self.map_err(|e| classified(exit, Some(hint.into()), e.into()))
    }
}

/// `error` as of class `exit`; an error already classified keeps its class unless `exit` is
/// given a hint it lacked.
pub fn classified(exit: Exit, hint: Option<String>, error: anyhow::Error) -> anyhow::Error {
    if let Some(c) = error.downcast_ref::<Classified>()
        && (hint.is_none() || c.hint.is_some())
    {
        return error;
    }
    anyhow::Error::new(Classified {
        exit,
        hint,
        inner: error,
    })
}

/// An error of class `exit` saying `message`.
pub fn error(exit: Exit, message: impl fmt::Display) -> anyhow::Error {
    classified(exit, None, anyhow::anyhow!("{message}"))
}

/// The class of `error`: the innermost classification in its chain (the one made nearest the
/// cause), else [`Exit::NeedsRoot`] for a permission error, else [`Exit::Failed`].
pub fn exit_of(error: &anyhow::Error) -> Exit {
    if let Some(c) = error
        .chain()
        .filter_map(|e| e.downcast_ref::<Classified>())
        .last()
    {
        return c.exit;
    }
    if permission_refused(error) {
        return Exit::NeedsRoot;
    }
    Exit::Failed
}

/// The hint of `error`, the outermost one given.
pub fn hint_of(error: &anyhow::Error) -> Option<&str> {
    error
        .chain()
        .filter_map(|e| e.downcast_ref::<Classified>())
        .find_map(|c| c.hint.as_deref())
}

/// Whether an I/O error in `error`'s chain refused permission (EACCES, EPERM, EROFS).
pub fn permission_refused(error: &anyhow::Error) -> bool {
    error.chain().any(|e| {
        let io = e.downcast_ref::<std::io::Error>().or_else(|| {
            e.downcast_ref::<crate::rootfs::RootError>()
                .and_then(|r| match r {
                    crate::rootfs::RootError::Io { error, .. } => Some(error),
                    _ => None,
                })
        });
        io.is_some_and(|io| {
            io.kind() == std::io::ErrorKind::PermissionDenied
                || io.raw_os_error() == Some(libc_erofs())
        })
    })
}

fn libc_erofs() -> i32 {
    rustix::io::Errno::ROFS.raw_os_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_has_its_own_code() {
        let mut codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Exit::ALL.len());
    }

    #[test]
    fn the_class_nearest_the_cause_wins_and_the_text_is_unchanged() {
        let inner: anyhow::Result<()> = Err(anyhow::anyhow!("bad yaml"));
        let e = inner
            .invalid_input()
            .map_err(|e| e.context("reading mc.yaml"))
            .exit(Exit::Failed)
            .unwrap_err();
        assert_eq!(exit_of(&e), Exit::InvalidInput);
        assert_eq!(super::super::report::chain(&e), "reading mc.yaml: bad yaml");
        let denied = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
            .context("writing /etc/x");
        assert_eq!(exit_of(&denied), Exit::NeedsRoot);
        assert_eq!(exit_of(&anyhow::anyhow!("x")), Exit::Failed);
        let hinted: anyhow::Result<()> = Err(anyhow::anyhow!("drift"));
        let e = hinted
            .hint(Exit::NotAsWanted, "mco-agent recover")
            .unwrap_err();
        assert_eq!(hint_of(&e), Some("mco-agent recover"));
    }
}
