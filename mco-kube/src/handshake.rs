//! Drain through a drain controller (the MCO's, in clusters that run it): write
//! `desiredDrain=drain-<config>` or `uncordon-<config>` and wait until the controller copies it
//! into `lastAppliedDrain`, with the MCD's timeouts (1 hour, 10 minutes) and messages.

use std::time::Duration;

use machine_config::mco::annotations::{DESIRED_DRAIN, DRAIN_VERB};
use machine_config::mco::events::reason;
use tokio::time::Instant;
use tracing::info;

use super::NodeApi;
use super::annotations::drain_request;
use super::error::ClusterError;
use super::events::note;

/// Pacing and patience of the handshake.
#[derive(Debug, Clone, PartialEq)]
pub struct HandshakeOptions {
    /// How often to read the node (the MCD polls every 10 s).
    pub poll_interval: Duration,
    /// How long to wait for a drain.
    pub drain_timeout: Duration,
    /// How long to wait for an uncordon.
    pub uncordon_timeout: Duration,
    /// A drain going on for longer than this gets what holds it written into the node's
    /// `reason` (see `kube_node::report_drain_holders`)...
    pub report_after: Duration,
    /// ...and again every this long while it goes on.
    pub report_every: Duration,
}

impl Default for HandshakeOptions {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(3600),
            uncordon_timeout: Duration::from_secs(600),
            // Two of the drain controller's 90 s tries: a drain that ends within its first try
            // (most do) is never reported, and the companion's drain controller, which writes
            // its failed first try's message itself, has done so by then.
            report_after: Duration::from_secs(180),
            // The drain controller's requeue of a failed try (1 minute).
            report_every: Duration::from_secs(60),
        }
    }
}

/// "1 hour", "10 minutes", else humantime's form.
fn spoken(d: Duration) -> String {
    match d.as_secs() {
        3600 => "1 hour".into(),
        s if s % 60 == 0 && s > 0 && s < 3600 => format!("{} minutes", s / 60),
        _ => humantime::format_duration(d).to_string(),
    }
}

/// Requests `verb` for `config` and waits for the controller.
pub(super) async fn request(
    api: &dyn NodeApi,
    opts: &HandshakeOptions,
    verb: &str,
    config: &str,
) -> Result<(), ClusterError> {
    let want = drain_request(verb, config);
    let node = api.node_name().to_string();
    let draining = verb == DRAIN_VERB;
    if draining && api.annotations().await?.last_applied_drain() == Some(want.as_str()) {
        info!(node, config, "drain is already completed on this node");
        return Ok(());
    }
    if draining {
        note(api, reason::CORDON, "Cordoned node to apply update").await;
        note(api, reason::DRAIN, "Draining node to update config.").await;
        info!(
            node,
            config, "Update prepared; requesting cordon and drain via annotation to controller"
        );
    }
    api.set_annotations(&[(DESIRED_DRAIN, Some(&want))]).await?;
    let timeout = if draining {
        opts.drain_timeout
    } else {
        opts.uncordon_timeout
    };
    let started = Instant::now();
    let deadline = started + timeout;
    let wait = async {
        loop {
            if api.annotations().await?.last_applied_drain() == Some(want.as_str()) {
                return Ok::<(), ClusterError>(());
            }
            tokio::time::sleep(opts.poll_interval).await;
        }
    };
    match tokio::time::timeout_at(deadline, wait).await {
        Ok(result) => result?,
        Err(_) => {
            let (event, what) = if draining {
                (reason::FAILED_TO_DRAIN, "drain")
            } else {
                (reason::FAILED_TO_UNCORDON, "uncordon")
            };
            let message = format!(
                "failed to {what} node: {node} after {}. Please see machine-config-controller logs for more information",
                spoken(timeout)
            );
            note(api, event, &message).await;
            return Err(ClusterError::Handshake(message));
        }
    }
    if draining {
        info!(
            node,
            config,
            seconds = started.elapsed().as_secs_f64(),
            "drain complete"
        );
    } else {
        note(
            api,
            reason::UNCORDON,
            &format!("Update completed for config {config} and node has been uncordoned"),
        )
        .await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_the_mcd_says_them() {
        assert_eq!(spoken(Duration::from_secs(3600)), "1 hour");
        assert_eq!(spoken(Duration::from_secs(600)), "10 minutes");
        assert_eq!(spoken(Duration::from_millis(1500)), "1s 500ms");
    }
}
