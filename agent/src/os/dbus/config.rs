//! How the D-Bus client behaves: client id, OS, finalization locking, retries, timeouts.

use std::time::Duration;

/// How long to keep retrying while another transaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub give_up_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            give_up_after: Duration::from_secs(30 * 60),
        }
    }
}

impl Backoff {
    /// The waits between attempts, doubling up to `max`, until `give_up_after` is spent.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + '_ {
        let mut next = self.initial;
        let mut total = Duration::ZERO;
        std::iter::from_fn(move || {
            if total + next > self.give_up_after {
                return None;
            }
            let d = next;
            total += d;
            next = (next * 2).min(self.max);
            Some(d)
        })
    }
}

/// How the client behaves.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The id given to `RegisterClient`; also prefixes transaction titles.
    pub client_id: String,
    /// The OS (stateroot) to act on; by default the booted one, or on a sysroot that is not
    /// booted the OS of the first deployment.
    pub osname: Option<String>,
    /// Stage with `lock-finalization` (`KernelArgs`, `UpdateDeployment`; a rebase then goes
    /// through `UpdateDeployment`'s `set-refspec`, since `Rebase` has no such option). A locked
    /// staged deployment is *not* finalized at shutdown: it must be released with
    /// [`OsUpdater::finalize_deployment`](crate::os::OsUpdater::finalize_deployment), which
    /// also reboots. Off by default here, so a client that reboots through logind alone never
    /// loses its deployment; the agent's engine turns it on when it reboots
    /// (`crate::engine::live::SeamOptions`).
    pub lock_finalization: bool,
    /// Retrying "Transaction in progress".
    pub busy_retry: Backoff,
    /// How long one transaction may run (image pulls can be slow).
    pub transaction_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            client_id: "mco-agent".into(),
            osname: None,
            lock_finalization: false,
            busy_retry: Backoff::default(),
            transaction_timeout: Duration::from_secs(2 * 60 * 60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_gives_up() {
        let b = Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(4),
            give_up_after: Duration::from_secs(20),
        };
        let d: Vec<u64> = b.delays().map(|d| d.as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 4, 4, 4]);
        assert!(d.iter().sum::<u64>() <= 20);
        let none = Backoff {
            give_up_after: Duration::ZERO,
            ..b
        };
        assert_eq!(none.delays().count(), 0);
    }
}
