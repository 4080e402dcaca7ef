//! The engine's observer seam: everything the [`Reporter`](super::Reporter) reports (states,
//! events, steps) and how each update run ended, handed to observers such as the metrics
//! ([`crate::metrics`]). Observers are called synchronously, in order, and must not block.

use std::time::Duration;

use machine_config::mco::NodeState;

use super::Outcome;

/// One fact the engine reported.
#[derive(Debug, Clone, Copy)]
pub enum Observation<'a> {
    /// The node's state was reported (also when it did not change). `Done` comes with the
    /// config the node is now in.
    State {
        state: NodeState,
        reason: &'a str,
        config: Option<&'a str>,
    },
    /// An event with one of the MCD's reasons (`ConfigDriftDetected`, `Reboot`, ...).
    Event { reason: &'a str, message: &'a str },
    /// The update step now running (a [`Step`](super::Step) name), recorded before it runs;
    /// `None` when no update is in progress any more.
    Step(Option<&'a str>),
    /// A run of the engine over an update ended (see [`Engine::update`](super::Engine::update)
    /// and [`Engine::resume`](super::Engine::resume)).
    Finished {
        from: &'a str,
        to: &'a str,
        outcome: &'a Outcome,
        /// From the start of the update (before a reboot, for a reboot update) to now, when
        /// the outcome ends the update: `Done`, `Degraded`, `Unreconcilable`.
        duration: Option<Duration>,
    },
}

/// Receives what the engine reports.
pub trait Observer: Send + Sync {
    fn observe(&self, what: &Observation<'_>);
}
