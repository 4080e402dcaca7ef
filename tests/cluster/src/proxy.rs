//! TCP forwarders the scenarios of several companion replicas need:
//!
//! - [`Proxy`]: one replica's connection to the API server, which a scenario can cut (every
//!   open connection reset, new ones closed at once: a partitioned pod) and restore;
//! - the front of the replicas ([`Proxy::front`]): what a Service with its endpoints does for
//!   agents and Ignition, each new connection to the next replica that accepts it (a stopped
//!   replica refuses connections, as an endpoint that is not ready is left out).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running forwarder; stops when dropped.
pub struct Proxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    /// Bumped on each cut: every open connection ends.
    generation: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Forwards connections to `127.0.0.1:<port>` to `target`.
    pub fn to(target: SocketAddr) -> Result<Proxy> {
        Self::start(vec![target])
    }

    /// Forwards each connection to the first of `targets`, round-robin, that accepts it.
    pub fn front(targets: Vec<SocketAddr>) -> Result<Proxy> {
        Self::start(targets)
    }

    fn start(targets: Vec<SocketAddr>) -> Result<Proxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let listener = TcpListener::from_std(listener).context("a forwarder needs a runtime")?;
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let (is_cut, generations) = (cut.clone(), generation.subscribe());
        let next = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if is_cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let (targets, next) = (targets.clone(), next.clone());
                let mut ended = generations.clone();
                ended.mark_unchanged();
                tokio::spawn(async move {
                    let Some(mut server) = connect(&targets, &next).await else {
                        return;
                    };
                    let mut client = client;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = ended.changed() => {}
                    }
                });
            }
        });
        Ok(Proxy {
            port,
            cut,
            generation,
            task,
        })
    }

    /// Resets every open connection and closes new ones until [`Proxy::restore`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Forwards again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The first target, from the next in turn, that accepts a connection.
async fn connect(targets: &[SocketAddr], next: &AtomicUsize) -> Option<TcpStream> {
    let first = next.fetch_add(1, Ordering::SeqCst);
    for i in 0..targets.len() {
        let target = targets[(first + i) % targets.len()];
        let attempt = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(target));
        if let Ok(Ok(stream)) = attempt.await {
            return Some(stream);
        }
    }
    None
}
