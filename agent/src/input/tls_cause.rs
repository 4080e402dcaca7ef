//! A failed TLS handshake with a config server, said as its cause and its fix rather than
//! rustls' debug values (`DnsName("foo.example")`, `Other(OtherError(CaUsedAsEndEntity))`).

use std::time::{Duration, SystemTime};

use rustls::{AlertDescription, CertificateError, Error};

/// `"<cause>: <fix>"` for the handshake with `host` that failed with `e`.
pub fn describe(e: &Error, host: &str) -> String {
    match e {
        Error::InvalidCertificate(cert) => certificate(cert, host),
        Error::AlertReceived(AlertDescription::CertificateRequired)
        | Error::AlertReceived(AlertDescription::HandshakeFailure) => format!(
            "{host} refused the handshake ({}): it asks for a client certificate; give --client-cert (the kubelet's on a node)",
            alert_name(e)
        ),
        Error::AlertReceived(AlertDescription::UnknownCA)
        | Error::AlertReceived(AlertDescription::BadCertificate) => format!(
            "{host} refused this node's client certificate ({}): it is not signed by the CA the server trusts (--client-cert)",
            alert_name(e)
        ),
        other => format!("{other}"),
    }
}

fn alert_name(e: &Error) -> String {
    match e {
        Error::AlertReceived(a) => format!("{a:?}"),
        _ => String::new(),
    }
}

fn date(secs: u64) -> String {
    humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .to_string()
}

/// `DnsName("a.example")` / `IpAddress(10.0.0.1)` as rustls lists a certificate's names: the
/// name itself.
fn bare_name(presented: &str) -> String {
    let inner = presented
        .split_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or(presented);
    inner.trim_matches('"').to_string()
}

fn certificate(cert: &CertificateError, host: &str) -> String {
    match cert {
        CertificateError::NotValidForName => format!(
            "the server's certificate is not valid for the name {host}: connect with a name the certificate has, or give the server a certificate for {host}"
        ),
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => {
            let names: Vec<String> = presented.iter().map(|p| bare_name(p)).collect();
            let has = if names.is_empty() {
                "it names none".to_string()
            } else {
                format!("it names {}", names.join(", "))
            };
            format!(
                "the server's certificate is not valid for {} ({has}): use one of its names in the URL, or give the server a certificate for {}",
                expected.to_str(),
                expected.to_str()
            )
        }
        CertificateError::Expired => {
            "the server's certificate has expired: renew it on the server, and check this node's clock".to_string()
        }
        CertificateError::ExpiredContext { time, not_after } => format!(
            "the server's certificate expired on {} (this node's clock says {}): renew it on the server, or correct this node's clock",
            date(not_after.as_secs()),
            date(time.as_secs())
        ),
        CertificateError::NotValidYet => {
            "the server's certificate is not valid yet: check this node's clock".to_string()
        }
        CertificateError::NotValidYetContext { time, not_before } => format!(
            "the server's certificate is valid from {} only (this node's clock says {}): check this node's clock",
            date(not_before.as_secs()),
            date(time.as_secs())
        ),
        CertificateError::UnknownIssuer => {
            "the server's certificate is not signed by a CA this node trusts (self-signed, or a private CA): give that CA with --ca (or, with --ca given, the CA that signed the server's certificate)".to_string()
        }
        CertificateError::BadSignature => {
            "the server's certificate has a signature its issuer did not make: the CA file (--ca) holds another CA of the same name, or the certificate is corrupt".to_string()
        }
        CertificateError::Revoked => "the server's certificate is revoked: the server needs a new one".to_string(),
        CertificateError::Other(other) if other.to_string().contains("CaUsedAsEndEntity") => {
            "the server presents a CA certificate as its own (a self-signed CA used as the server's certificate): give the server a certificate signed by that CA".to_string()
        }
        other => format!("the server's certificate is refused: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::OtherError;
    use rustls::pki_types::{ServerName, UnixTime};

    use super::*;

    fn at(secs: u64) -> UnixTime {
        UnixTime::since_unix_epoch(Duration::from_secs(secs))
    }

    #[derive(Debug)]
    struct WebpkiLike;
    impl std::fmt::Display for WebpkiLike {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("CaUsedAsEndEntity")
        }
    }
    impl std::error::Error for WebpkiLike {}

    /// Each cause in plain words with its fix, never a debug value.
    #[test]
    fn causes_and_fixes() {
        let rows: Vec<(Error, &str)> = vec![
            (
                Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                    expected: ServerName::try_from("foo.example").unwrap().to_owned(),
                    presented: vec![
                        "DnsName(\"bar.example\")".into(),
                        "IpAddress(10.0.0.1)".into(),
                    ],
                }),
                "the server's certificate is not valid for foo.example (it names bar.example, 10.0.0.1): use one of its names in the URL",
            ),
            (
                Error::InvalidCertificate(CertificateError::ExpiredContext {
                    time: at(1_800_000_000),
                    not_after: at(1_700_000_000),
                }),
                "the server's certificate expired on 2023-11-14T22:13:20Z (this node's clock says 2027-01-15T08:00:00Z)",
            ),
            (
                Error::InvalidCertificate(CertificateError::NotValidYetContext {
                    time: at(1_700_000_000),
                    not_before: at(1_800_000_000),
                }),
                "valid from 2027-01-15T08:00:00Z only",
            ),
            (
                Error::InvalidCertificate(CertificateError::UnknownIssuer),
                "not signed by a CA this node trusts (self-signed, or a private CA): give that CA with --ca",
            ),
            (
                Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                    WebpkiLike,
                )))),
                "the server presents a CA certificate as its own",
            ),
            (
                Error::AlertReceived(AlertDescription::CertificateRequired),
                "it asks for a client certificate; give --client-cert",
            ),
        ];
        for (error, want) in rows {
            let got = describe(&error, "foo.example");
            assert!(got.contains(want), "{error:?}: {got}");
            for debug in ["DnsName(", "Other(", "OtherError", "Context {"] {
                assert!(!got.contains(debug), "{error:?}: {got}");
            }
        }
    }
}
