//! Defences of the listener against clients that hold connections: a cap on connections per
//! client (an IPv4 address, an IPv6 /64: one host gets a whole /64 as easily as one address), so
//! one client cannot take every slot of the global cap; a write timeout, so a client that stops
//! reading a response (a full TCP window) is dropped instead of holding its connection and the
//! response buffer forever; and a clock of when each request started, so that a request's body
//! gets no more than what is left of the whole request's deadline.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A connection the caps let in: its stream, its client, and the global slot and the client's
/// slot it holds (given back when the connection is dropped with them).
pub(crate) struct Admitted {
    pub stream: tokio::net::TcpStream,
    pub remote: std::net::SocketAddr,
    pub permits: (tokio::sync::OwnedSemaphorePermit, ClientSlot),
}

/// The next connection `listener` accepts within the caps: a free slot of `slots` first (no
/// accept while every slot is taken), then a client holding fewer than `per_client`; an
/// accept error (EMFILE) backs off instead of spinning, a client over its cap is closed. `None`
/// once `shutdown` turns true or `slots` is closed. `what` starts the log lines ("" for the
/// config server).
pub(crate) async fn next_admitted(
    listener: &tokio::net::TcpListener,
    slots: &Arc<tokio::sync::Semaphore>,
    clients: &Arc<PerClient>,
    per_client: usize,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    what: &str,
) -> Option<Admitted> {
    loop {
        if *shutdown.borrow() {
            return None;
        }
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit.ok()?,
            _ = shutdown.changed() => return None,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    tracing::warn!("{what}accepting a connection failed: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return None,
        };
        let Some(client_slot) = clients.admit(remote.ip(), per_client) else {
            tracing::warn!(%remote, cap = per_client, "{what}closing a connection: the client has too many open");
            continue;
        };
        return Some(Admitted {
            stream,
            remote,
            permits: (permit, client_slot),
        });
    }
}

/// Open connections per client ([`client_of`]).
#[derive(Debug, Default)]
pub struct PerClient {
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection counted against its client's cap; uncounted when dropped.
#[derive(Debug)]
pub struct ClientSlot {
    clients: Arc<PerClient>,
    ip: IpAddr,
}

impl PerClient {
    /// A slot for a new connection from `ip`, or `None` when its client ([`client_of`])
    /// already has `cap` open.
    pub fn admit(self: &Arc<Self>, ip: IpAddr, cap: usize) -> Option<ClientSlot> {
        let ip = client_of(ip);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(ip).or_insert(0);
        if *count >= cap.max(1) {
            return None;
        }
        *count += 1;
        Some(ClientSlot {
            clients: self.clone(),
            ip,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.clients.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The client a connection from `ip` is counted against: an IPv4 address (also when it comes
/// as an IPv4-mapped IPv6 address on a dual-stack socket), or an IPv6 address's /64 network,
/// the smallest block a host is routed (SLAAC gives every host a whole /64).
pub fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

/// When the request being read on a connection started: the time of the first byte read since
/// the last request was [taken](RequestClock::take). Shared by a connection's stream
/// ([`Clocked`]) and its service.
#[derive(Debug, Clone, Default)]
pub struct RequestClock(Arc<Mutex<Option<Instant>>>);

impl RequestClock {
    fn mark(&self) {
        let mut started = self.0.lock().unwrap_or_else(|e| e.into_inner());
        started.get_or_insert_with(Instant::now);
    }

    /// When the request whose head was just read started (now when no byte was seen, which
    /// only errs on the lenient side); the next byte read starts the next request.
    pub fn take(&self) -> Instant {
        let mut started = self.0.lock().unwrap_or_else(|e| e.into_inner());
        started.take().unwrap_or_else(Instant::now)
    }

    /// Forgets the bytes read so far (a request body that was read to its end).
    pub fn reset(&self) {
        self.take();
    }
}

/// A stream that marks its [`RequestClock`] whenever it reads bytes.
pub struct Clocked<S> {
    inner: S,
    clock: RequestClock,
}

impl<S> Clocked<S> {
    pub fn new(inner: S, clock: RequestClock) -> Self {
        Clocked { inner, clock }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Clocked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.mark();
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Clocked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A stream whose writes fail with `TimedOut` when one makes no progress for `timeout`.
pub struct WriteTimeout<S> {
    inner: S,
    timeout: Duration,
    /// Armed while a write waits; reset by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteTimeout<S> {
    pub fn new(inner: S, timeout: Duration) -> Self {
        WriteTimeout {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// Turns a pending write into an error once the stall has lasted `timeout`.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.stalled = None;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the client read nothing for {timeout:?}"),
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(
        &mut self,
        done: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match done {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.pending(cx),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteTimeout<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let done = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progressed(done, cx)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let done = Pin::new(&mut self.inner).poll_flush(cx);
        self.progressed(done, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let done = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.progressed(done, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let done = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progressed(done, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn a_client_gets_at_most_its_cap_and_slots_come_back() {
        let clients = Arc::new(PerClient::default());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = clients.admit(a, 2).unwrap();
        let _second = clients.admit(a, 2).unwrap();
        assert!(clients.admit(a, 2).is_none());
        // another client is not affected
        assert!(clients.admit(b, 2).is_some());
        drop(first);
        assert!(clients.admit(a, 2).is_some());
    }

    #[test]
    fn an_ipv6_client_is_its_64_network() {
        let clients = Arc::new(PerClient::default());
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let _first = clients.admit(ip("2001:db8:1:2::1"), 2).unwrap();
        let _second = clients
            .admit(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), 2)
            .unwrap();
        assert!(
            clients.admit(ip("2001:db8:1:2:1234::9"), 2).is_none(),
            "another address of the same /64 is the same client"
        );
        assert!(clients.admit(ip("2001:db8:1:3::1"), 2).is_some());
        // an IPv4 client on a dual-stack socket is its IPv4 address
        let _v4 = clients.admit(ip("10.0.0.1"), 1).unwrap();
        assert!(clients.admit(ip("::ffff:10.0.0.1"), 1).is_none());
    }

    #[tokio::test]
    async fn the_clock_starts_at_a_requests_first_byte() {
        use tokio::io::AsyncReadExt;
        let (mut client, server) = tokio::io::duplex(64);
        let clock = RequestClock::default();
        let mut clocked = Clocked::new(server, clock.clone());
        client.write_all(b"GET").await.unwrap();
        let mut buf = [0u8; 3];
        clocked.read_exact(&mut buf).await.unwrap();
        let first = Instant::now();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            clock.take() <= first,
            "the request started at its first byte"
        );
        // nothing read since: the next request has not started
        let now = Instant::now();
        assert!(clock.take() >= now);
    }

    #[tokio::test]
    async fn a_reader_that_stops_reading_fails_the_write() {
        // a 64-byte pipe nobody reads: the second write can never finish
        let (writer, _reader) = tokio::io::duplex(64);
        let mut timed = WriteTimeout::new(writer, Duration::from_millis(100));
        let err = timed.write_all(&[0u8; 4096]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(err.to_string(), "the client read nothing for 100ms");
    }
}
