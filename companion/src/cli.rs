//! The `mco-companion` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use machine_config::render::{self, RenderOptions};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cluster::SharedMachineConfigs;
use crate::cluster::drain::schedule::DrainTimings;
use crate::leader::{Election, LeaderArgs};
use crate::server::bootstrap::BootstrapTokens;
use crate::server::{self, ConfigSource, Limits};
use crate::standalone::Standalone;
use crate::status_page::StatusPage;

/// Renders MachineConfigs per pool, targets nodes within maxUnavailable, serves Ignition over TLS.
#[derive(Debug, Parser)]
#[command(name = "mco-companion", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
// parsed once at start: the size of the largest variant costs nothing
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a pool's (or one node's) rendered MachineConfig from a manifests directory.
    Render(RenderArgs),
    /// Serve `/config/<pool>` and `/healthz` (standalone from --manifests, or from a cluster).
    Serve(ServeArgs),
    /// Render pools and roll nodes out within maxUnavailable (cluster mode).
    Controller(ControllerArgs),
    /// Print a new first-boot bootstrap token that expires in `--hours` (the value of a node's
    /// key in the bootstrap-token Secret).
    BootstrapToken(BootstrapTokenArgs),
}

/// `mco-companion bootstrap-token`.
#[derive(Debug, Args)]
pub struct BootstrapTokenArgs {
    /// Hours until the token expires (at most the server's `--bootstrap-token-hours`).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u64).range(1..=8760))]
    pub hours: u64,
}

/// Base images, the MCO's ControllerConfig values.
#[derive(Debug, Clone, Args)]
pub struct BaseArgs {
    /// Base OS image, used unless a MachineConfig sets osImageURL.
    #[arg(long, default_value = "", env = "MCO_COMPANION_OS_IMAGE_URL")]
    pub os_image_url: String,
    /// Base extensions container image.
    #[arg(long, default_value = "")]
    pub extensions_image: String,
}

impl BaseArgs {
    fn options(&self) -> RenderOptions {
        RenderOptions {
            os_image_url: self.os_image_url.clone(),
            base_os_extensions_container_image: self.extensions_image.clone(),
        }
    }
}

/// The drain controller's timings (hidden: the MCO's values unless a test shrinks them).
#[derive(Debug, Args)]
pub struct DrainTimingArgs {
    /// Delay before a failed drain is tried again.
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "1m")]
    pub drain_requeue: Duration,
    /// After failing this long, drains are retried every --drain-failing-requeue.
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "10m")]
    pub drain_failing_threshold: Duration,
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "5m")]
    pub drain_failing_requeue: Duration,
    /// Past this long a drain gets a DrainFailed event on every try.
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "1h")]
    pub drain_timeout: Duration,
    /// One drain try.
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "90s")]
    pub drain_attempt: Duration,
}

impl DrainTimingArgs {
    fn timings(&self) -> DrainTimings {
        DrainTimings {
            requeue: self.drain_requeue,
            failing_threshold: self.drain_failing_threshold,
            failing_requeue: self.drain_failing_requeue,
            timeout: self.drain_timeout,
            attempt: self.drain_attempt,
            ..DrainTimings::default()
        }
    }
}

/// Output format.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    Yaml,
    Json,
}

/// `render` arguments.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Directory of MachineConfig and MachineConfigPool manifests.
    #[arg(long)]
    pub manifests: PathBuf,
    /// Pool to render.
    #[arg(long)]
    pub pool: String,
    /// Render this node's config (the pool's plus MachineConfigs labelled mco.io/node=NAME).
    #[arg(long)]
    pub node: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "yaml")]
    pub output: Output,
    #[command(flatten)]
    pub base: BaseArgs,
}

/// `serve` arguments.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Standalone mode: directory of manifests, re-rendered when it changes.
    #[arg(
        long,
        conflicts_with = "kubeconfig",
        required_unless_present = "kubeconfig"
    )]
    pub manifests: Option<PathBuf>,
    /// Cluster mode: serve the pools' rendered configs from this cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Cluster mode: also run the controller in this process.
    #[arg(long, requires = "kubeconfig")]
    pub controller: bool,
    /// HTTPS listen address.
    #[arg(long, default_value = "0.0.0.0:22623")]
    pub listen: SocketAddr,
    /// TLS certificate chain (PEM).
    #[arg(long)]
    pub cert: PathBuf,
    /// TLS private key (PEM).
    #[arg(long)]
    pub key: PathBuf,
    /// The cluster's client CA (PEM; on OpenShift the `client-ca-file` of the
    /// `extension-apiserver-authentication` ConfigMap in `kube-system`): nodes that present a
    /// kubelet client certificate it signed (`CN=system:node:NAME`, `O=system:nodes`) get their
    /// per-node configs. Without it no client can prove a node name and no per-node config is
    /// served. With it, FleetLock serves only proven nodes, on the TLS listener, each for
    /// itself.
    #[arg(long, env = "MCO_COMPANION_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// First-boot bootstrap tokens: a directory with one file per node, named after the node
    /// and holding its token (a Kubernetes Secret mounted as a volume has this layout). A node
    /// that sends `Authorization: Bearer TOKEN` and `X-MCO-Node: NAME` over TLS (Ignition's
    /// `httpHeaders` in its pointer config) gets its per-node config before it has a kubelet
    /// certificate.
    #[arg(long, env = "MCO_COMPANION_BOOTSTRAP_TOKENS")]
    pub bootstrap_tokens: Option<PathBuf>,
    /// The longest a bootstrap token may live: a token whose expiry (carried inside it) lies
    /// further ahead is refused. 0: tokens without an expiry are accepted and never expire.
    #[arg(long, default_value_t = 24, requires = "bootstrap_tokens")]
    pub bootstrap_token_hours: u64,
    /// Also serve plain HTTP here (the MCS's port 22624; never a per-node config).
    #[arg(long)]
    pub insecure_listen: Option<SocketAddr>,
    /// Cluster mode: serve the status page (`/`) and `/status.json` (what `kubectl mco status
    /// -o json` prints) over plain HTTP here, a listener of their own that serves nothing else
    /// (the shipped Deployment: 127.0.0.1:22625, reached with `kubectl port-forward`).
    #[arg(long, requires = "kubeconfig", value_name = "ADDR")]
    pub status_listen: Option<SocketAddr>,
    /// Standalone mode: seconds between directory checks when inotify misses a change.
    #[arg(long, default_value_t = 5)]
    pub poll_interval: u64,
    /// Connections served at once.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Connections served at once to one client: an IPv4 address, an IPv6 /64 (nodes behind a
    /// NAT share one).
    #[arg(long, default_value_t = 64)]
    pub max_connections_per_client: usize,
    /// Seconds a client gets to send a whole request, headers and body, from its first byte.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: u64,
    #[command(flatten)]
    pub base: BaseArgs,
    #[command(flatten)]
    pub drain: DrainTimingArgs,
    #[command(flatten)]
    pub leader: LeaderArgs,
    #[command(flatten)]
    pub fleet_lock: crate::fleet_lock::args::FleetLockArgs,
}

/// `controller` arguments.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Kubeconfig of the cluster to manage.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    #[command(flatten)]
    pub base: BaseArgs,
    #[command(flatten)]
    pub drain: DrainTimingArgs,
    #[command(flatten)]
    pub leader: LeaderArgs,
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Render(args) => render_command(&args),
        Command::Serve(args) => serve_command(args).await,
        Command::BootstrapToken(args) => {
            let expires = std::time::SystemTime::now() + Duration::from_secs(args.hours * 3600);
            println!("{}", crate::server::bootstrap::mint(expires));
            Ok(())
        }
        Command::Controller(args) => {
            let client = crate::cluster::client(&args.kubeconfig).await?;
            let (_stop, shutdown) = shutdown_on_signal();
            let configs = SharedMachineConfigs::watch(client.clone());
            let controllers = Controllers {
                kubeconfig: args.kubeconfig.clone(),
                options: args.base.options(),
                drain: args.drain.timings(),
                configs,
            };
            controllers.run(&args.leader, client, shutdown).await
        }
    }
}

fn render_command(args: &RenderArgs) -> Result<()> {
    let manifests = crate::manifests::load(&args.manifests)?;
    let pool = manifests.pool(&args.pool).with_context(|| {
        format!(
            "no MachineConfigPool {:?} in {}",
            args.pool,
            args.manifests.display()
        )
    })?;
    let options = args.base.options();
    let configs = &manifests.machine_configs;
    let base = render::render_pool(pool, configs, &options)?.config;
    let rendered = match &args.node {
        Some(node) => match render::render_node(pool, &base, node, configs)? {
            Some(r) => r.config,
            None => base,
        },
        None => base,
    };
    let text = match args.output {
        Output::Json => rendered.to_json_pretty() + "\n",
        Output::Yaml => serde_saphyr::to_string(&rendered).context("writing YAML")?,
    };
    print!("{text}");
    Ok(())
}

async fn serve_command(args: ServeArgs) -> Result<()> {
    let tls = server::tls::server_config(&args.cert, &args.key, args.client_ca.as_deref())?;
    let bootstrap = match &args.bootstrap_tokens {
        Some(dir) => {
            let lifetime = (args.bootstrap_token_hours > 0)
                .then(|| Duration::from_secs(args.bootstrap_token_hours * 3600));
            Some(Arc::new(BootstrapTokens::open(dir, lifetime)?))
        }
        None => None,
    };
    let (stop, shutdown) = shutdown_on_signal();
    let mut tasks = tokio::task::JoinSet::new();
    let controller_failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fleet_lock;
    let mut status_page = None;
    let source: Arc<dyn ConfigSource> = match (&args.manifests, &args.kubeconfig) {
        (Some(dir), _) => {
            let standalone = Arc::new(Standalone::open(dir, args.base.options())?);
            fleet_lock = args
                .fleet_lock
                .standalone(standalone.clone(), args.client_ca.is_some())?;
            let poll = Duration::from_secs(args.poll_interval.max(1));
            tasks.spawn(standalone.clone().watch(poll, shutdown.clone()));
            standalone
        }
        (None, Some(kubeconfig)) => {
            let client = crate::cluster::client(kubeconfig).await?;
            if let Some(addr) = args.status_listen {
                let page = StatusPage::new(client.clone(), args.leader.identity());
                status_page = Some((bind(addr)?, Arc::new(page)));
            }
            fleet_lock = args
                .fleet_lock
                .cluster(client.clone(), args.client_ca.is_some())?;
            // With the controller, the config server reads the controller's MachineConfigs.
            let mut shared_configs = None;
            if args.controller {
                let configs = SharedMachineConfigs::watch(client.clone());
                shared_configs = Some(configs.reader.clone());
                let controllers = Controllers {
                    kubeconfig: kubeconfig.clone(),
                    options: args.base.options(),
                    drain: args.drain.timings(),
                    configs,
                };
                // checked now: bad leader election settings fail the start, not a task
                let election = controllers.election(&args.leader, client.clone())?;
                let shutdown = shutdown.clone();
                let (stop, failed) = (stop.clone(), controller_failed.clone());
                tasks.spawn(async move {
                    if let Err(err) = controllers.run_elected(election, shutdown).await {
                        // The config server would go on serving from a store nothing fills:
                        // stop it too, and fail, so the service is restarted whole.
                        tracing::error!("controller stopped: {err:#}; stopping the server");
                        failed.store(true, std::sync::atomic::Ordering::SeqCst);
                        let _ = stop.send(true);
                    }
                });
            }
            Arc::new(
                crate::cluster::source::ClusterSource::start(
                    client,
                    shared_configs,
                    shutdown.clone(),
                )
                .await?,
            )
        }
        (None, None) => bail!("serve needs --manifests DIR or --kubeconfig FILE"),
    };
    let limits = Limits {
        max_connections: args.max_connections,
        max_connections_per_client: args.max_connections_per_client,
        request_timeout: Duration::from_secs(args.request_timeout),
        ..Limits::default()
    };
    let listener = bind(args.listen)?;
    tracing::info!("Launching server on {}", listener.local_addr()?);
    tasks.spawn(server::serve_with_fleet_lock(
        listener,
        Some(tls),
        bootstrap.clone(),
        source.clone(),
        fleet_lock.clone(),
        limits.clone(),
        shutdown.clone(),
    ));
    if let Some((listener, page)) = status_page {
        tracing::info!("Launching the status page on {}", listener.local_addr()?);
        tasks.spawn(crate::status_page::serve(
            listener,
            page,
            limits.clone(),
            shutdown.clone(),
        ));
    }
    if let Some(addr) = args.insecure_listen {
        let listener = bind(addr)?;
        tracing::info!("Launching insecure server on {}", listener.local_addr()?);
        tasks.spawn(server::serve_with_fleet_lock(
            listener,
            None,
            bootstrap,
            source,
            fleet_lock,
            limits,
            shutdown.clone(),
        ));
    }
    while tasks.join_next().await.is_some() {}
    drop(stop);
    if controller_failed.load(std::sync::atomic::Ordering::SeqCst) {
        bail!("the controller stopped (see the error above)");
    }
    Ok(())
}

/// The controllers (render, node, drain) and what they need to start, each time this replica
/// leads.
struct Controllers {
    kubeconfig: PathBuf,
    options: RenderOptions,
    drain: DrainTimings,
    configs: SharedMachineConfigs,
}

impl Controllers {
    /// The election, unless `--no-leader-elect`.
    fn election(&self, args: &LeaderArgs, client: kube::Client) -> Result<Option<Election>> {
        if args.no_leader_elect {
            return Ok(None);
        }
        Election::new(args, client).map(Some)
    }

    async fn run(
        self,
        args: &LeaderArgs,
        client: kube::Client,
        shutdown: watch::Receiver<bool>,
    ) -> Result<()> {
        let election = self.election(args, client)?;
        self.run_elected(election, shutdown).await
    }

    /// Runs the controllers while this replica leads (always, without an election) until
    /// `shutdown`; then releases the Lease.
    async fn run_elected(
        self,
        election: Option<Election>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<()> {
        let Some(Election {
            fence,
            elector,
            timings,
        }) = election
        else {
            tracing::warn!("leader election is off: run one replica only");
            let client = crate::cluster::client(&self.kubeconfig).await?;
            let drains = crate::cluster::drain_client(&self.kubeconfig).await?;
            let configs = self.configs.subscribe();
            let drains = Some((drains, self.drain));
            return crate::cluster::controller::run_with(
                client,
                self.options,
                configs,
                drains,
                shutdown,
            )
            .await;
        };
        let client = crate::cluster::fenced_client(&self.kubeconfig, &fence, true).await?;
        let drains = crate::cluster::fenced_client(&self.kubeconfig, &fence, false).await?;
        // The elector stops at shutdown, at once (it fences the controllers off, waits for
        // their writes in flight, releases the Lease), or when the controllers failed.
        let (stop_electing, electing) = watch::channel(false);
        let stop_electing = Arc::new(stop_electing);
        let (stop, mut stopping) = (stop_electing.clone(), shutdown.clone());
        tokio::spawn(async move {
            let _ = stopping.wait_for(|stop| *stop).await;
            let _ = stop.send(true);
        });
        let elector = tokio::spawn(elector.run(electing));
        let Controllers {
            options,
            drain,
            configs,
            ..
        } = self;
        let result =
            crate::leader::while_leading(fence, shutdown, timings.write_cutoff(), move |stopped| {
                crate::cluster::controller::run_with(
                    client.clone(),
                    options.clone(),
                    configs.subscribe(),
                    Some((drains.clone(), drain.clone())),
                    stopped,
                )
            })
            .await;
        let _ = stop_electing.send(true);
        if let Err(err) = elector.await {
            tracing::warn!("leader election task: {err}");
        }
        result
    }
}

/// A shutdown flag that turns true on SIGTERM or SIGINT.
fn shutdown_on_signal() -> (Arc<watch::Sender<bool>>, watch::Receiver<bool>) {
    let (tx, rx) = watch::channel(false);
    let tx = Arc::new(tx);
    let sender = tx.clone();
    tokio::spawn(async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(err) => {
                    tracing::warn!("cannot watch SIGTERM: {err}");
                    return;
                }
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        tracing::info!("shutting down");
        let _ = sender.send(true);
    });
    (tx, rx)
}

/// Connections the kernel queues for the accept loop. Machines booting at once open their
/// connections within milliseconds of each other: with tokio's default of 1,024 a burst of
/// 1,000 first boots overflowed the queue while the two cores were busy with handshakes, and
/// each dropped SYN cost its machine one to three seconds of retransmission. The kernel caps
/// it at `net.core.somaxconn` (4,096 on current kernels).
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `addr` with [`LISTEN_BACKLOG`].
fn bind(addr: SocketAddr) -> Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .and_then(|socket| {
        // as TcpListener::bind does: a restarted server binds while old connections linger
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        Ok(socket)
    })
    .with_context(|| format!("binding {addr}"))?;
    socket
        .listen(LISTEN_BACKLOG)
        .with_context(|| format!("listening on {addr}"))
}
