//! The checks of `start`'s settings that need nothing but the settings (no cluster, no file,
//! no connection), run first by `start` and by `config show`: one function, so that the two
//! never disagree on what is a valid configuration (a bad `time_zone` refused by one and shown
//! by the other). A value alone is checked where it is given (its option's parser: the command
//! line, the environment, a fragment's `file:line`); these are the settings taken together.

use anyhow::Result;

use super::Args;
use crate::cli::{Classify, Exit, exit};
use crate::daemon::config_server::ConfigServer;

impl Args {
    /// Refuses settings `start` would refuse before it connects to anything, naming the
    /// options.
    pub fn check(&self) -> Result<()> {
        if self.health_deadline.is_zero() || self.health_check_timeout.is_zero() {
            return Err(exit::error(
                Exit::InvalidInput,
                "--health-deadline and --health-check-timeout must be longer than 0",
            ));
        }
        if let Some(url) = &self.config_server {
            ConfigServer::check_args(url, self.ca.as_deref(), self.insecure_http)
                .map_err(|e| e.context(format!("--config-server {url}")))
                .invalid_input()?;
        }
        self.strategy.check(self.config_server.as_deref())
    }
}
