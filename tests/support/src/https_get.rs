//! One HTTPS GET on a fresh connection, as a booting machine's Ignition makes one: a new TCP
//! connection, a full TLS handshake, `Connection: close`, the whole body read. For benchmarks
//! that time many such first fetches at once (no client library's connection pool in the way).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// What one fetch got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub status: u16,
    /// The body's length (the bytes after the header, as sent: no transfer decoding).
    pub body_bytes: usize,
    /// From the connection's start to the body's last byte.
    pub took: Duration,
}

/// GETs `path` from `host:port` (`server_name` checked against the certificate) with `headers`,
/// from the local address `source` if given (many machines on one host: 127.0.0.0/8).
pub async fn get(
    config: Arc<rustls::ClientConfig>,
    source: Option<std::net::Ipv4Addr>,
    host: &str,
    port: u16,
    server_name: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Fetched> {
    let start = Instant::now();
    let tcp = match source {
        None => TcpStream::connect((host, port)).await,
        Some(ip) => {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind((ip, 0).into())?;
            let addr = tokio::net::lookup_host((host, port))
                .await?
                .find(std::net::SocketAddr::is_ipv4)
                .with_context(|| format!("{host} has no IPv4 address"))?;
            socket.connect(addr).await
        }
    }
    .with_context(|| format!("connecting to {host}:{port}"))?;
    let name = ServerName::try_from(server_name.to_string())
        .with_context(|| format!("{server_name:?} is not a server name"))?;
    let mut tls = TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .context("TLS handshake")?;
    let mut request =
        format!("GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    tls.write_all(request.as_bytes()).await?;
    // The header is kept; the body is counted and dropped as it comes (a thousand machines'
    // bodies held at once on the benchmark's own host would cost it more than the server).
    let mut header = Vec::new();
    let mut header_end = None;
    let mut total = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match tls.read(&mut buf).await {
            Ok(n) => n,
            // A server that closes without close_notify still sent the whole answer it framed.
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => 0,
            Err(err) => return Err(err).context("reading the answer"),
        };
        if n == 0 {
            break;
        }
        total += n;
        if header_end.is_none() {
            header.extend_from_slice(&buf[..n]);
            header_end = header.windows(4).position(|w| w == b"\r\n\r\n");
        }
    }
    let took = start.elapsed();
    let Some(end) = header_end else {
        bail!("the answer has no complete header ({total} bytes)");
    };
    let answer = &header;
    let status_line = String::from_utf8_lossy(&answer[..end]);
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status in {:?}", status_line.lines().next()))?;
    Ok(Fetched {
        status,
        body_bytes: total - end - 4,
        took,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{TestCa, client_config_trusting, install_ring_provider};
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn fetches_the_body_over_a_fresh_tls_connection() -> Result<()> {
        install_ring_provider();
        let ca = TestCa::new("https_get test CA")?;
        let server = ca.issue_server_cert(&["127.0.0.1".to_string()])?;
        let server_config = server.server_config(&[])?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let serve = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await?;
            let mut tls = tokio_rustls::TlsAcceptor::from(server_config)
                .accept(tcp)
                .await?;
            let mut request = vec![0u8; 4096];
            let n = tls.read(&mut request).await?;
            let request = String::from_utf8_lossy(&request[..n]).to_string();
            tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                .await?;
            tls.shutdown().await?;
            anyhow::Ok(request)
        });
        let config = client_config_trusting(ca.cert_pem())?;
        // from another loopback address, as one of many machines on this host
        let source = Some(std::net::Ipv4Addr::new(127, 0, 0, 2));
        let got = get(
            config,
            source,
            "127.0.0.1",
            port,
            "127.0.0.1",
            "/x",
            &[("Accept", "a/b")],
        )
        .await?;
        assert_eq!((got.status, got.body_bytes), (200, 5));
        let request = serve.await??;
        assert!(request.starts_with("GET /x HTTP/1.1\r\n"), "{request}");
        assert!(request.contains("\r\nAccept: a/b\r\n"), "{request}");
        Ok(())
    }
}
