//! D-Bus errors as rpm-ostreed sends them.
//!
//! rpm-ostreed returns most failures as GLib errors. Its own domain is registered with D-Bus
//! names under `org.projectatomic.rpmostreed.Error.`; GIO's `G_IO_ERROR` domain is not
//! registered, so GDBus encodes those as
//! `org.gtk.GDBus.UnmappedGError.Quark._g_2dio_2derror_2dquark.Code<N>` (the quark name with
//! non-alphanumerics hex-escaped, then the numeric code). "Transaction in progress" is
//! `G_IO_ERROR_BUSY` (26), most others `G_IO_ERROR_FAILED` (0).

use std::collections::HashMap;

use zbus::message::{Header, Message};
use zbus::names::ErrorName;
use zbus::zvariant::{OwnedValue, Value};

/// `G_IO_ERROR_FAILED` as GDBus names it on the wire.
pub const GIO_FAILED: &str = "org.gtk.GDBus.UnmappedGError.Quark._g_2dio_2derror_2dquark.Code0";
/// `G_IO_ERROR_INVALID_ARGUMENT`.
pub const GIO_INVALID_ARGUMENT: &str =
    "org.gtk.GDBus.UnmappedGError.Quark._g_2dio_2derror_2dquark.Code13";
/// `G_IO_ERROR_BUSY`: what a second transaction gets while one is active.
pub const GIO_BUSY: &str = "org.gtk.GDBus.UnmappedGError.Quark._g_2dio_2derror_2dquark.Code26";
/// rpm-ostreed's own generic failure.
pub const RPMOSTREED_FAILED: &str = "org.projectatomic.rpmostreed.Error.Failed";
/// What a caller that is not allowed gets (rpm-ostreed sends `G_DBUS_ERROR_ACCESS_DENIED`).
pub const ACCESS_DENIED: &str = "org.freedesktop.DBus.Error.AccessDenied";
/// Wrong option types and the like (`G_DBUS_ERROR_INVALID_ARGS`).
pub const INVALID_ARGS: &str = "org.freedesktop.DBus.Error.InvalidArgs";

/// An error returned to a D-Bus caller: a name from the constants above and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonError {
    pub name: &'static str,
    pub message: String,
}

impl DaemonError {
    pub fn new(name: &'static str, message: impl Into<String>) -> Self {
        Self {
            name,
            message: message.into(),
        }
    }

    /// `G_IO_ERROR_FAILED`, the common case.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(GIO_FAILED, message)
    }

    /// rpm-ostreed's "Transaction in progress" refusal, word for word.
    pub fn transaction_in_progress(title: &str) -> Self {
        Self::new(
            GIO_BUSY,
            format!(
                "Transaction in progress: {title}\n You can cancel the current transaction with `rpm-ostree cancel`"
            ),
        )
    }

    pub fn invalid_args(message: impl Into<String>) -> Self {
        Self::new(INVALID_ARGS, message)
    }
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.message)
    }
}

impl std::error::Error for DaemonError {}

impl From<zbus::Error> for DaemonError {
    fn from(e: zbus::Error) -> Self {
        Self::failed(e.to_string())
    }
}

impl zbus::DBusError for DaemonError {
    fn create_reply(&self, call: &Header<'_>) -> zbus::Result<Message> {
        Message::error(call, self.name)?.build(&(self.message.as_str(),))
    }

    fn name(&self) -> ErrorName<'_> {
        ErrorName::from_static_str_unchecked(self.name)
    }

    fn description(&self) -> Option<&str> {
        Some(&self.message)
    }
}

/// An `a{sv}` options or modifiers dictionary as received.
pub type VarDict = HashMap<String, OwnedValue>;

/// A boolean option; `default` when absent, an error naming the key when of another type.
pub fn opt_bool(dict: &VarDict, key: &str, default: bool) -> Result<bool, DaemonError> {
    match dict.get(key) {
        None => Ok(default),
        Some(v) => match &**v {
            Value::Bool(b) => Ok(*b),
            other => Err(wrong_type(key, "b", other)),
        },
    }
}

/// A string option.
pub fn opt_str(dict: &VarDict, key: &str) -> Result<Option<String>, DaemonError> {
    match dict.get(key) {
        None => Ok(None),
        Some(v) => match &**v {
            Value::Str(s) => Ok(Some(s.to_string())),
            other => Err(wrong_type(key, "s", other)),
        },
    }
}

/// A string-array option; empty when absent.
pub fn opt_strv(dict: &VarDict, key: &str) -> Result<Vec<String>, DaemonError> {
    match dict.get(key) {
        None => Ok(Vec::new()),
        Some(v) => {
            let value: &Value<'_> = v;
            if let Value::Array(a) = value
                && a.element_signature() == "s"
            {
                return a
                    .iter()
                    .map(|e| match e {
                        Value::Str(s) => Ok(s.to_string()),
                        other => Err(wrong_type(key, "as", other)),
                    })
                    .collect();
            }
            Err(wrong_type(key, "as", value))
        }
    }
}

/// A `(ss)` option.
pub fn opt_str_pair(dict: &VarDict, key: &str) -> Result<Option<(String, String)>, DaemonError> {
    match dict.get(key) {
        None => Ok(None),
        Some(v) => {
            let value: &Value<'_> = v;
            if let Value::Structure(s) = value
                && let [Value::Str(a), Value::Str(b)] = s.fields()
            {
                return Ok(Some((a.to_string(), b.to_string())));
            }
            Err(wrong_type(key, "(ss)", value))
        }
    }
}

fn wrong_type(key: &str, want: &str, got: &Value<'_>) -> DaemonError {
    DaemonError::invalid_args(format!(
        "option \"{key}\" must be of type '{want}', got '{}'",
        got.value_signature()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(entries: Vec<(&str, Value<'static>)>) -> VarDict {
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn options_are_read_by_type() {
        let d = dict(vec![
            ("reboot", Value::Bool(true)),
            ("initiating-command-line", Value::from("mco-agent")),
            ("append-if-missing", Value::from(vec!["a=1", "b"])),
            ("custom-origin", Value::from(("pivot://x", "desc"))),
        ]);
        assert!(opt_bool(&d, "reboot", false).unwrap());
        assert!(!opt_bool(&d, "lock-finalization", false).unwrap());
        assert_eq!(
            opt_str(&d, "initiating-command-line").unwrap().as_deref(),
            Some("mco-agent")
        );
        assert_eq!(opt_strv(&d, "append-if-missing").unwrap(), ["a=1", "b"]);
        assert!(opt_strv(&d, "delete-if-present").unwrap().is_empty());
        assert_eq!(
            opt_str_pair(&d, "custom-origin").unwrap(),
            Some(("pivot://x".into(), "desc".into()))
        );
    }

    #[test]
    fn wrong_types_name_the_key() {
        let d = dict(vec![("reboot", Value::from("yes"))]);
        let e = opt_bool(&d, "reboot", false).unwrap_err();
        assert_eq!(e.name, INVALID_ARGS);
        assert!(e.message.contains("\"reboot\""), "{}", e.message);
        let e = opt_strv(&d, "reboot").unwrap_err();
        assert!(e.message.contains("'as'"), "{}", e.message);
    }

    #[test]
    fn busy_error_has_rpm_ostree_wording() {
        let e = DaemonError::transaction_in_progress("kargs");
        assert_eq!(e.name, GIO_BUSY);
        assert_eq!(
            e.message,
            "Transaction in progress: kargs\n You can cancel the current transaction with `rpm-ostree cancel`"
        );
    }
}
