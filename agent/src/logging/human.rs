//! The log lines of one-shot commands (`diff`, `validate`, `once-from`, `pivot`, …) on stderr,
//! for people: `warning: MESSAGE: ERROR (key=value, …)`, no timestamp, no module path, the
//! label coloured only on a terminal. Events of other crates (`kube_client`, `rustls`) are
//! left out unless `-v` asks for them, and then name their crate.

use std::fmt::{self, Write as _};
use std::io::IsTerminal;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Whether to colour what goes to a stream that is (`is_terminal`) or is not a terminal:
/// `NO_COLOR` (any value but empty) and `TERM=dumb` turn colour off.
pub fn colour_for(is_terminal: bool) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    is_terminal && !no_color && !dumb
}

/// Whether stderr gets colour.
pub fn stderr_colour() -> bool {
    colour_for(std::io::stderr().is_terminal())
}

/// Whether stdout gets colour.
pub fn stdout_colour() -> bool {
    colour_for(std::io::stdout().is_terminal())
}

/// The kinds of line, and their colour (SGR parameters) on a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Error,
    Warning,
    Hint,
    Info,
    Debug,
}

impl Label {
    fn word(self) -> &'static str {
        match self {
            Label::Error => "error",
            Label::Warning => "warning",
            Label::Hint => "hint",
            Label::Info => "info",
            Label::Debug => "debug",
        }
    }

    fn sgr(self) -> &'static str {
        match self {
            Label::Error => "1;31",
            Label::Warning => "1;33",
            Label::Hint => "1;36",
            Label::Info => "1",
            Label::Debug => "2",
        }
    }

    /// `error:` (bold red on a terminal).
    pub fn prefix(self, colour: bool) -> String {
        if colour {
            format!("\x1b[{}m{}:\x1b[0m", self.sgr(), self.word())
        } else {
            format!("{}:", self.word())
        }
    }
}

/// The crates whose events are the command's own.
pub const OWN_CRATES: [&str; 2] = ["mco_agent", "machine_config"];

/// The filter of a one-shot command with `-v` given `verbose` times: its own warnings and
/// errors only; `-v` its progress and other crates' warnings; `-vv` debug; `-vvv` everything.
pub fn filter_for(verbose: u8) -> String {
    let own = |level: &str| {
        OWN_CRATES
            .iter()
            .map(|c| format!("{c}={level}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    match verbose {
        0 => format!("off,{}", own("warn")),
        1 => format!("warn,{}", own("info")),
        2 => format!("info,{}", own("debug")),
        _ => "trace".to_string(),
    }
}

/// Formats events as `label: message: error (fields)`.
#[derive(Debug, Clone, Copy)]
pub struct Human {
    pub colour: bool,
}

impl<S, N> FormatEvent<S, N> for Human
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let label = match *meta.level() {
            Level::ERROR => Label::Error,
            Level::WARN => Label::Warning,
            Level::INFO => Label::Info,
            _ => Label::Debug,
        };
        let mut fields = Fields::default();
        event.record(&mut fields);
        write!(writer, "{} ", label.prefix(self.colour))?;
        let krate = meta.target().split("::").next().unwrap_or_default();
        if !OWN_CRATES.contains(&krate) {
            write!(writer, "{krate}: ")?;
        }
        writer.write_str(&fields.line())?;
        writeln!(writer)
    }
}

/// An event's message, its `error` field and the others.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    error: Option<String>,
    others: Vec<(String, String)>,
}

impl Fields {
    fn line(&self) -> String {
        let mut line = self.message.clone();
        if let Some(e) = &self.error {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(e);
        }
        if !self.others.is_empty() {
            let pairs: Vec<String> = self
                .others
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let _ = write!(line, " ({})", pairs.join(", "));
        }
        line
    }

    fn put(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = value,
            "error" => self.error = Some(value),
            name if name.starts_with("log.") => {}
            name => self.others.push((name.to_string(), value)),
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_string());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    /// What the events logged by `log` print.
    fn printed(colour: bool, log: impl FnOnce()) -> String {
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = out.clone();
        let layer = tracing_subscriber::fmt::layer()
            .event_format(Human { colour })
            .with_writer(move || Writer(sink.clone()));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, log);
        let bytes = out.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    struct Writer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Writer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_read_as_a_person_writes_them() {
        let text = printed(false, || {
            tracing::warn!(error = "port in use", "metrics are not served");
            tracing::warn!(unit = "crio.service", "left alone");
            tracing::error!(target: "kube_client::client", "connection refused");
            tracing::info!(pool = "worker", "the pool");
        });
        assert_eq!(
            text,
            "warning: metrics are not served: port in use\n\
             warning: left alone (unit=crio.service)\n\
             error: kube_client: connection refused\n\
             info: the pool (pool=worker)\n"
        );
        let text = printed(true, || tracing::warn!("x"));
        assert_eq!(text, "\x1b[1;33mwarning:\x1b[0m x\n");
    }

    #[test]
    fn other_crates_are_quiet_unless_asked() {
        assert_eq!(filter_for(0), "off,mco_agent=warn,machine_config=warn");
        assert_eq!(filter_for(1), "warn,mco_agent=info,machine_config=info");
        for v in 0..4 {
            tracing_subscriber::EnvFilter::try_new(filter_for(v)).expect("a valid filter");
        }
    }
}
