//! Following an rpm-ostree transaction over its peer-to-peer socket.
//!
//! A mutating method returns the transaction's address. We connect to it directly (no bus),
//! subscribe to the transaction's signals *before* calling `Start()` so nothing is missed, log
//! the progress, and finish on `Finished(success, error_message)`. `Start()` returning false
//! means the transaction was already started by someone else (we attached to it).

use std::time::{Duration, Instant};

use futures::StreamExt;
use zbus::match_rule::MatchRule;
use zbus::message::Type;
use zbus::names::BusName;
use zbus::{Connection, MessageStream};

use crate::os::error::OsError;
use crate::os::types::TransactionOutcome;
use crate::system_bus::CALL_TIMEOUT;

/// The transaction interface.
pub const TRANSACTION_IFACE: &str = "org.projectatomic.rpmostree1.Transaction";

/// Connects to a transaction address, retrying briefly: the socket of a transaction that was
/// just announced may not accept yet, and one that is closing goes away. The handshake and
/// every method call on the connection give up after [`CALL_TIMEOUT`].
pub async fn connect(method: &str, address: &str) -> Result<Connection, OsError> {
    let mut last = None;
    for attempt in 0..5u32 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200) * attempt).await;
        }
        let built = match zbus::connection::Builder::address(address) {
            Ok(b) => {
                let handshake = b.p2p().method_timeout(CALL_TIMEOUT).build();
                match tokio::time::timeout(CALL_TIMEOUT, handshake).await {
                    Ok(built) => built,
                    // a peer that accepted and went silent is hung, not starting up
                    Err(_) => {
                        return Err(OsError::TransactionConnection {
                            method: method.to_string(),
                            address: address.to_string(),
                            message: format!(
                                "no D-Bus handshake within {CALL_TIMEOUT:?} (is rpm-ostreed hung?)"
                            ),
                        });
                    }
                }
            }
            Err(e) => Err(e),
        };
        match built {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(OsError::TransactionConnection {
        method: method.to_string(),
        address: address.to_string(),
        message: last.map(|e| e.to_string()).unwrap_or_default(),
    })
}

/// Starts (or attaches to) the transaction on `conn` and waits for `Finished`.
pub async fn run(
    method: &str,
    address: &str,
    conn: &Connection,
    timeout: Duration,
) -> Result<TransactionOutcome, OsError> {
    let conn_err = |e: zbus::Error| OsError::TransactionConnection {
        method: method.to_string(),
        address: address.to_string(),
        message: e.to_string(),
    };
    let rule = MatchRule::builder()
        .msg_type(Type::Signal)
        .interface(TRANSACTION_IFACE)
        .map_err(conn_err)?
        .build();
    let mut signals = MessageStream::for_match_rule(rule, conn, None)
        .await
        .map_err(conn_err)?;

    let title = title(conn).await.unwrap_or_default();
    let reply = conn
        .call_method(
            None::<BusName<'_>>,
            "/",
            Some(TRANSACTION_IFACE),
            "Start",
            &(),
        )
        .await
        .map_err(|e| OsError::call(&format!("{method} (Start)"), e))?;
    let started_here: bool = reply.body().deserialize().map_err(|e| OsError::Protocol {
        what: format!("{method} (Start)"),
        message: e.to_string(),
    })?;
    if started_here {
        tracing::info!(method, title = %title, "rpm-ostree transaction started");
    } else {
        tracing::info!(method, title = %title, "attached to a running rpm-ostree transaction");
    }

    let mut progress = ProgressLog::new(method);
    let finished = tokio::time::timeout(timeout, async {
        while let Some(msg) = signals.next().await {
            let msg = msg.map_err(conn_err)?;
            let header = msg.header();
            let Some(member) = header.member() else {
                continue;
            };
            let body = msg.body();
            let proto = |e: zbus::Error| OsError::Protocol {
                what: format!("{method} transaction signal {member}"),
                message: e.to_string(),
            };
            match member.as_str() {
                "Finished" => {
                    let (success, error): (bool, String) = body.deserialize().map_err(proto)?;
                    return Ok((success, error));
                }
                "Message" => {
                    let (text,): (String,) = body.deserialize().map_err(proto)?;
                    progress.message(text);
                }
                "TaskBegin" => {
                    let (text,): (String,) = body.deserialize().map_err(proto)?;
                    tracing::info!(method, task = %text, "rpm-ostree task started");
                }
                "TaskEnd" => {
                    let (text,): (String,) = body.deserialize().map_err(proto)?;
                    tracing::debug!(method, result = %text, "rpm-ostree task ended");
                }
                "PercentProgress" => {
                    let (text, pct): (String, u32) = body.deserialize().map_err(proto)?;
                    progress.percent(&text, pct);
                }
                "DownloadProgress" => progress.download(),
                "ProgressEnd" => tracing::debug!(method, "rpm-ostree progress ended"),
                _ => {}
            }
        }
        Err(OsError::TransactionConnection {
            method: method.to_string(),
            address: address.to_string(),
            message: "the connection closed before the transaction finished \
                      (did rpm-ostreed exit?)"
                .into(),
        })
    })
    .await
    .map_err(|_| OsError::Timeout {
        method: method.to_string(),
        timeout,
    })??;

    match finished {
        (true, _) => Ok(TransactionOutcome {
            method: method.to_string(),
            title,
            messages: progress.messages,
            started_here,
        }),
        (false, message) => Err(OsError::Transaction {
            method: method.to_string(),
            message,
        }),
    }
}

async fn title(conn: &Connection) -> Option<String> {
    let reply = conn
        .call_method(
            None::<BusName<'_>>,
            "/",
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(TRANSACTION_IFACE, "Title"),
        )
        .await
        .ok()?;
    let v: zbus::zvariant::OwnedValue = reply.body().deserialize().ok()?;
    String::try_from(v).ok()
}

/// Logs progress without flooding the journal: messages and new phases at info, percentages
/// at debug in 10-point steps, download progress at most every few seconds.
struct ProgressLog<'a> {
    method: &'a str,
    messages: Vec<String>,
    phase: String,
    last_pct: Option<u32>,
    last_download: Option<Instant>,
}

impl<'a> ProgressLog<'a> {
    fn new(method: &'a str) -> Self {
        Self {
            method,
            messages: Vec::new(),
            phase: String::new(),
            last_pct: None,
            last_download: None,
        }
    }

    fn message(&mut self, text: String) {
        tracing::info!(method = self.method, "rpm-ostree: {text}");
        self.messages.push(text);
    }

    fn percent(&mut self, text: &str, pct: u32) {
        if text != self.phase {
            tracing::info!(method = self.method, phase = %text, percent = pct, "rpm-ostree progress");
            self.phase = text.to_string();
            self.last_pct = Some(pct);
        } else if self
            .last_pct
            .is_none_or(|l| pct >= l + 10 || (pct == 100 && l != 100))
        {
            tracing::debug!(method = self.method, phase = %text, percent = pct, "rpm-ostree progress");
            self.last_pct = Some(pct);
        }
    }

    fn download(&mut self) {
        if self
            .last_download
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(5))
        {
            tracing::debug!(method = self.method, "rpm-ostree is downloading");
            self.last_download = Some(Instant::now());
        }
    }
}
