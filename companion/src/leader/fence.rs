//! The fence: whether this replica may write, and until when; and the layer under the
//! controllers' Kubernetes clients that holds every write to it.
//!
//! Reads (`GET`, watches) always pass: every replica keeps its caches warm. A write (any other
//! method) is refused unless the replica leads, and one that is still in flight
//! [`Timings::write_cutoff`](super::timings::Timings::write_cutoff) after the leadership's
//! deadline is abandoned (its connection dropped), so that no write of a replica that lost
//! the Lease reaches the API server after another replica may have taken it
//! ([`super::timings`] has the arithmetic).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why the fence stopped a write.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum FenceError {
    #[error("not the leader: this replica does not hold the leader Lease, so it writes nothing")]
    NotLeading,
    #[error("write abandoned: the leadership it was started under ended {0:?} ago")]
    Abandoned(Duration),
}

/// Whether this replica leads and until when; shared by the elector, the supervisor of the
/// controllers and the layer under their clients.
#[derive(Clone)]
pub struct Fence {
    inner: Arc<Inner>,
}

struct Inner {
    /// The end of the leadership (the renew deadline after the last renewal), if leading.
    until: watch::Sender<Option<Instant>>,
    write_cutoff: Duration,
    in_flight: AtomicUsize,
    idle: Notify,
}

impl Fence {
    /// A fence that lets nothing through until [`Fence::extend`]; writes in flight at the
    /// deadline are abandoned `write_cutoff` after it.
    pub fn new(write_cutoff: Duration) -> Self {
        Fence {
            inner: Arc::new(Inner {
                until: watch::channel(None).0,
                write_cutoff,
                in_flight: AtomicUsize::new(0),
                idle: Notify::new(),
            }),
        }
    }

    /// Leading until `until` (a renewal succeeded).
    pub fn extend(&self, until: Instant) {
        self.inner.until.send_replace(Some(until));
    }

    /// Not leading any more (the deadline passed, or the Lease is being released).
    pub fn revoke(&self) {
        self.inner
            .until
            .send_if_modified(|until| until.take().is_some());
    }

    /// The end of the leadership, while it lasts.
    pub fn leading_until(&self) -> Option<Instant> {
        self.inner
            .until
            .borrow()
            .filter(|until| Instant::now() < *until)
    }

    /// Whether this replica leads now.
    pub fn is_leading(&self) -> bool {
        self.leading_until().is_some()
    }

    /// Told about each acquisition and loss ([`Fence::extend`] after a loss, [`Fence::revoke`]).
    pub fn subscribe(&self) -> watch::Receiver<Option<Instant>> {
        self.inner.until.subscribe()
    }

    /// Writes started and not finished or abandoned yet.
    pub fn writes_in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// Waits until no write is in flight (each ends by its cutoff at the latest).
    pub async fn writes_done(&self) {
        loop {
            let idle = self.inner.idle.notified();
            if self.writes_in_flight() == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Admits a write: the instant past which it is abandoned, with a guard counting it.
    fn admit(&self) -> Result<(Instant, InFlight), FenceError> {
        let until = self.leading_until().ok_or(FenceError::NotLeading)?;
        self.inner.in_flight.fetch_add(1, Ordering::SeqCst);
        Ok((
            until + self.inner.write_cutoff,
            InFlight {
                fence: self.clone(),
            },
        ))
    }
}

struct InFlight {
    fence: Fence,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.fence.inner.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.fence.inner.idle.notify_waiters();
        }
    }
}

/// Whether a request changes something (everything but GET, HEAD and OPTIONS).
pub fn is_write(method: &http::Method) -> bool {
    !matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    )
}

/// The layer for `kube::client::ClientBuilder::with_layer`.
#[derive(Clone)]
pub struct FenceLayer {
    pub fence: Fence,
}

impl<S> tower_layer::Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Fenced<S> {
        Fenced {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// A service whose writes pass only while the fence allows.
#[derive(Clone)]
pub struct Fenced<S> {
    inner: S,
    fence: Fence,
}

impl<S, B> tower_service::Service<http::Request<B>> for Fenced<S>
where
    S: tower_service::Service<http::Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if !is_write(request.method()) {
            let call = self.inner.call(request);
            return Box::pin(async move { call.await.map_err(Into::into) });
        }
        let (cutoff, guard) = match self.fence.admit() {
            Ok(admitted) => admitted,
            Err(refused) => {
                tracing::debug!(
                    method = %request.method(),
                    uri = %request.uri(),
                    "write refused: {refused}"
                );
                return Box::pin(std::future::ready(Err(refused.into())));
            }
        };
        let call = self.inner.call(request);
        Box::pin(async move {
            let _guard = guard;
            match tokio::time::timeout_at(cutoff, call).await {
                Ok(answer) => answer.map_err(Into::into),
                Err(_) => Err(FenceError::Abandoned(
                    Instant::now().saturating_duration_since(cutoff),
                )
                .into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower_service::Service;

    use super::*;

    /// A service that answers after `delay`, counting the calls that reached it.
    #[derive(Clone)]
    struct Slow {
        delay: Duration,
        reached: Arc<AtomicUsize>,
    }

    impl Service<http::Request<()>> for Slow {
        type Response = &'static str;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<&'static str, Infallible>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            self.reached.fetch_add(1, Ordering::SeqCst);
            let delay = self.delay;
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok("answered")
            })
        }
    }

    fn fenced(fence: &Fence, delay: Duration) -> (Fenced<Slow>, Arc<AtomicUsize>) {
        let reached = Arc::new(AtomicUsize::new(0));
        let inner = Slow {
            delay,
            reached: reached.clone(),
        };
        let layer = FenceLayer {
            fence: fence.clone(),
        };
        (tower_layer::Layer::layer(&layer, inner), reached)
    }

    fn request(method: http::Method) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri("/api/v1/nodes/worker-0")
            .body(())
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn reads_always_pass_and_writes_only_while_leading() {
        let fence = Fence::new(Duration::from_secs(1));
        let (mut svc, reached) = fenced(&fence, Duration::from_millis(10));
        // (leading?, method, passes?)
        let table = [
            (false, http::Method::GET, true),
            (false, http::Method::HEAD, true),
            (false, http::Method::PATCH, false),
            (false, http::Method::POST, false),
            (false, http::Method::PUT, false),
            (false, http::Method::DELETE, false),
            (true, http::Method::GET, true),
            (true, http::Method::PATCH, true),
            (true, http::Method::POST, true),
            (true, http::Method::DELETE, true),
        ];
        for (leading, method, passes) in table {
            if leading {
                fence.extend(Instant::now() + Duration::from_secs(5));
            } else {
                fence.revoke();
            }
            let before = reached.load(Ordering::SeqCst);
            let answer = svc.call(request(method.clone())).await;
            assert_eq!(answer.is_ok(), passes, "{method} leading={leading}");
            let got_through = reached.load(Ordering::SeqCst) > before;
            assert_eq!(got_through, passes, "{method} leading={leading}");
            if !passes {
                let err = answer.unwrap_err();
                assert_eq!(
                    err.downcast_ref::<FenceError>(),
                    Some(&FenceError::NotLeading)
                );
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_refused_from_the_deadline_on_without_anyone_revoking() {
        let fence = Fence::new(Duration::from_secs(1));
        let (mut svc, reached) = fenced(&fence, Duration::from_millis(10));
        fence.extend(Instant::now() + Duration::from_secs(2));
        tokio::time::advance(Duration::from_millis(1999)).await;
        assert!(svc.call(request(http::Method::PATCH)).await.is_ok());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!fence.is_leading());
        assert!(svc.call(request(http::Method::PATCH)).await.is_err());
        assert_eq!(reached.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_in_flight_is_abandoned_at_the_cutoff_after_the_deadline() {
        let fence = Fence::new(Duration::from_secs(1));
        // the API server takes 10 s to answer
        let (mut svc, _) = fenced(&fence, Duration::from_secs(10));
        let start = Instant::now();
        fence.extend(start + Duration::from_secs(2));
        let write = tokio::spawn(svc.call(request(http::Method::PATCH)));
        tokio::task::yield_now().await;
        assert_eq!(fence.writes_in_flight(), 1);
        let err = write.await.unwrap().unwrap_err();
        // deadline (2 s) + cutoff (1 s), not the server's 10 s
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        assert!(matches!(
            err.downcast_ref::<FenceError>(),
            Some(FenceError::Abandoned(_))
        ));
        assert_eq!(fence.writes_in_flight(), 0);
        fence.writes_done().await;
    }

    #[tokio::test(start_paused = true)]
    async fn writes_done_waits_for_the_last_write() {
        let fence = Fence::new(Duration::from_secs(30));
        let (mut svc, _) = fenced(&fence, Duration::from_secs(4));
        fence.extend(Instant::now() + Duration::from_secs(60));
        let start = Instant::now();
        let writes: Vec<_> = (0..3)
            .map(|_| tokio::spawn(svc.call(request(http::Method::POST))))
            .collect();
        tokio::task::yield_now().await;
        fence.revoke();
        fence.writes_done().await;
        assert_eq!(start.elapsed(), Duration::from_secs(4));
        for write in writes {
            assert!(write.await.unwrap().is_ok());
        }
    }
}
