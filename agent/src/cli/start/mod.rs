//! `mco-agent start`: the daemon (what `mco-agent.service` runs).

mod check;
mod services;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use machine_config::mco::node_conditions::NOT_YET_SET;
use machine_config::mco::pinned_images::CRI_SOCKET;

use super::strategy::{StrategyArgs, StrategyContext};
use super::{Classify, Exit, exit};
use crate::cluster::feature_gates::AgentGates;
use crate::cluster::policy_watch::{PolicyWait, PolicyWatch};
use crate::cluster::{
    ClusterOptions, DrainMode, DrainOptions, KUBELET_KUBECONFIG, KubeNodeApi, NodeApi, pool,
};
use crate::daemon::certificates::CertificateWriter;
use crate::daemon::cluster::{ApiSource, NodeReport};
use crate::daemon::config_server::ConfigServer;
use crate::daemon::join;
use crate::daemon::policy::ClusterPolicySource;
use crate::daemon::source::{ConfigSource, FileSource};
use crate::daemon::{DEFAULT_POLL_INTERVAL, Daemon, DesiredFeed};
use crate::engine::live::{self, SeamOptions};
use crate::engine::{
    ActivePolicy, ClusterReport, Engine, EngineOptions, FixedPolicy, HealthOptions, KubeletProbe,
    NoCluster, PolicySource,
};
use crate::input::policy::read_policy_file;
use crate::input::served::KUBELET_CLIENT_CERT;
use crate::metrics::kubelet::KubeletHealth;
use crate::metrics::{self, MetricsArgs};
use crate::stop::{StopSignals, until_stopped};

/// Arguments of `start`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Root directory of the node.
    #[arg(long, env = "MCO_AGENT_ROOT", default_value = "/")]
    pub root: PathBuf,
    /// The node's name (default: the hostname); its Node object with a cluster, and sent to
    /// the config server.
    #[arg(long, env = "MCO_AGENT_NODE_NAME")]
    pub node_name: Option<String>,
    /// Kubeconfig with the node's credentials: follow the Node's `desiredConfig` and report
    /// through its annotations. Default on a node: the kubelet's, when it exists. Without one
    /// the agent runs standalone, following what the config server serves for the pool.
    #[arg(long, env = "MCO_AGENT_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The config server (`https://HOST:22623`) serving the node's pool.
    #[arg(long, env = "MCO_AGENT_CONFIG_SERVER", conflicts_with = "config_file")]
    pub config_server: Option<String>,
    /// The CA bundle (PEM) that signs the config server's certificate (needed for https).
    #[arg(long, env = "MCO_AGENT_CA")]
    pub ca: Option<PathBuf>,
    /// Accept a plain `http://` config server (with a warning): nothing authenticates it or
    /// protects the configs on the way. Without it such a URL is refused.
    #[arg(long, env = "MCO_AGENT_INSECURE_HTTP")]
    pub insecure_http: bool,
    /// The node's client certificate and key (one PEM file), presented when the config server
    /// asks for one: it proves the node's name and so gets its per-node configs. Default on a
    /// node: the kubelet's (/var/lib/kubelet/pki/kubelet-client-current.pem), when it exists.
    #[arg(long, env = "MCO_AGENT_CLIENT_CERT")]
    pub client_cert: Option<PathBuf>,
    /// The node's pool on the config server. Default: with a cluster, the MachineConfigPool
    /// selecting the Node (the MCO's rules; its role labels when pools cannot be listed);
    /// without one, `worker`.
    #[arg(long, env = "MCO_AGENT_POOL")]
    pub pool: Option<String>,
    /// Take the desired config from this file (MachineConfig or Ignition) instead of a server
    /// (or, with a cluster, instead of the API server).
    #[arg(long, env = "MCO_AGENT_CONFIG_FILE")]
    pub config_file: Option<PathBuf>,
    /// How often to ask for the desired config without a cluster (e.g. `30s`, `500ms`).
    #[arg(long, env = "MCO_AGENT_POLL_INTERVAL", value_parser = humantime::parse_duration, default_value = "30s")]
    pub poll_interval: Duration,
    /// Do not reboot even if an update needs it (the update then waits for a reboot).
    #[arg(long, env = "MCO_AGENT_SKIP_REBOOT")]
    pub skip_reboot: bool,
    /// The `--root` directory is this host's root mounted elsewhere (as in a container that
    /// sees the host at `/rootfs`): reboot the host through logind when an update needs it.
    /// Without it an alternate root never reboots the host (its updates wait for a reboot).
    #[arg(long, env = "MCO_AGENT_ROOT_IS_HOST")]
    pub root_is_host: bool,
    /// Stage OS changes without rpm-ostree's lock-finalization, so that any reboot finalizes
    /// them (by default they are locked until the agent releases them with
    /// FinalizeDeployment, and a reboot the agent did not ask for drops them).
    #[arg(long, env = "MCO_AGENT_NO_LOCK_FINALIZATION")]
    pub no_lock_finalization: bool,
    /// Without a cluster: a MachineConfiguration (YAML or JSON) whose
    /// `spec.nodeDisruptionPolicy` is merged over the default node disruption policies (as
    /// the MCO merges the cluster's). With a cluster the policies are
    /// `MachineConfiguration/cluster`'s status, followed as it changes.
    #[arg(long, env = "MCO_AGENT_POLICY")]
    pub policy: Option<PathBuf>,
    /// Who drains the node before a disruptive update: `agent` (the agent cordons and evicts
    /// through the Eviction API) or `controller` (the agent asks a drain controller, the MCO's
    /// or `mco-companion`'s, through `desiredDrain` and waits for `lastAppliedDrain`).
    #[arg(
        long,
        env = "MCO_AGENT_DRAIN_MODE",
        value_enum,
        default_value = "agent"
    )]
    pub drain_mode: DrainModeArg,
    /// The container runtime's CRI socket, through which the images of the node's pinned image
    /// sets are pulled (containerd's CRI plugin serves the same image service as CRI-O).
    #[arg(long, env = "MCO_AGENT_CRI_SOCKET", default_value = CRI_SOCKET)]
    pub cri_socket: PathBuf,
    /// A second kubeconfig used only to list and evict the node's pods in agent drains (e.g. a
    /// service account allowed to evict where the node's own credentials are not); the node's
    /// own writes (cordon, annotations, events) keep the node's credentials.
    #[arg(long, env = "MCO_AGENT_EVICTION_KUBECONFIG")]
    pub eviction_kubeconfig: Option<PathBuf>,
    /// Agent drains: how long one attempt (cordon, evict, wait) may take (the MCD's 90 s).
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "90s")]
    pub drain_attempt_timeout: Duration,
    /// Agent drains: how long before the drain fails and the node is Degraded (the MCD's hour).
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "1h")]
    pub drain_timeout: Duration,
    /// Agent drains: the pause before an eviction a PodDisruptionBudget refused, and between
    /// attempts, is tried again (kubectl's 5 s).
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "5s")]
    pub drain_retry: Duration,
    /// Controller drains: how long the drain may go on before the node's reason names the pods
    /// left and what holds them (two of the drain controller's 90 s tries).
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "3m")]
    pub drain_report_after: Duration,
    /// Controller drains: how often that reason is renewed (the drain controller's requeue).
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "1m")]
    pub drain_report_every: Duration,
    /// After the reboot into an update: how long the health checks (the units the config
    /// enables, the kubelet, the executables in /etc/mco-agent/health.d/) may take to pass
    /// before the boot is rolled back to the previous deployment and config.
    #[arg(long, env = "MCO_AGENT_HEALTH_DEADLINE", value_parser = humantime::parse_duration, default_value = "5m")]
    pub health_deadline: Duration,
    /// How long one executable of /etc/mco-agent/health.d/ may run before it counts as failed.
    #[arg(long, env = "MCO_AGENT_HEALTH_CHECK_TIMEOUT", value_parser = humantime::parse_duration, default_value = "60s")]
    pub health_check_timeout: Duration,
    /// The pause between two rounds of health checks that did not all pass.
    #[arg(long, hide = true, value_parser = humantime::parse_duration, default_value = "5s")]
    pub health_retry: Duration,
    /// Read the boot id from this file instead of the kernel's (tests simulate reboots).
    #[arg(long, hide = true)]
    pub boot_id_file: Option<PathBuf>,
    /// Metrics and the kubelet health check.
    #[command(flatten)]
    pub metrics: MetricsArgs,
    /// The administrator's hooks.
    #[command(flatten)]
    pub hooks: super::hook_args::HookArgs,
    /// Where the config's hooks run when `--root` is not this machine's root: `skip` (none
    /// runs), `chroot` (inside the root) or `host` (on this machine, for a root that is its
    /// own mounted elsewhere; `--root-is-host` implies it).
    #[arg(
        long,
        value_enum,
        env = "MCO_AGENT_ALTERNATE_ROOT_HOOKS",
        default_value = "skip"
    )]
    pub alternate_root_hooks: super::hook_args::AlternateRootHooks,
    /// When updates may drain and reboot.
    #[command(flatten)]
    pub strategy: StrategyArgs,
}

/// `--drain-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DrainModeArg {
    Agent,
    Controller,
}

impl From<DrainModeArg> for DrainMode {
    fn from(arg: DrainModeArg) -> Self {
        match arg {
            DrainModeArg::Agent => DrainMode::Agent,
            DrainModeArg::Controller => DrainMode::Controller,
        }
    }
}

/// Why the daemon never reboots, or `None` when it may: `--skip-reboot`, or an alternate root
/// that `--root-is-host` does not say is the host (rebooting the machine the agent runs on for
/// a directory that is not its root would be a surprise, and would not boot that directory).
fn no_reboot_reason(args: &Args, live: bool) -> Option<String> {
    if args.skip_reboot {
        Some("--skip-reboot".to_string())
    } else if !live && !args.root_is_host {
        Some(format!(
            "not rebooting the host for the alternate root {} (--root-is-host says it is the \
             host's)",
            args.root.display()
        ))
    } else {
        None
    }
}

/// The pool to ask the config server for: `--pool` (or `MCO_AGENT_POOL`); else, with a
/// cluster, the node's ([`pool::node_pool`]); else `worker`.
async fn choose_pool(explicit: Option<&str>, api: Option<&dyn NodeApi>) -> Result<String> {
    if let Some(pool) = explicit {
        tracing::info!(pool, "pool given");
        return Ok(pool.to_string());
    }
    let Some(api) = api else {
        tracing::info!(
            pool = pool::DEFAULT_POOL,
            "no cluster and no --pool: the default pool"
        );
        return Ok(pool::DEFAULT_POOL.to_string());
    };
    let found = pool::node_pool(api)
        .await
        .context("working out the node's pool")?;
    tracing::info!(pool = found.name, from = found.how, "the node's pool");
    Ok(found.name)
}

/// The health checks after a reboot: `--health-*`; the kubelet is checked on a node (its
/// endpoint is the host's) when `--kubelet-healthz-enabled`.
/// (Their durations are checked by [`Args::check`].)
fn health_options(args: &Args, live: bool) -> Result<HealthOptions> {
    let kubelet: Option<Arc<dyn KubeletProbe>> = if live && args.metrics.kubelet_healthz_enabled {
        Some(Arc::new(KubeletHealth::new(
            &args.metrics.kubelet_healthz_endpoint,
            args.health_check_timeout,
        )?))
    } else {
        None
    };
    Ok(HealthOptions {
        deadline: args.health_deadline,
        check_timeout: args.health_check_timeout,
        retry_interval: args.health_retry,
        kubelet,
    })
}

/// The client certificate to present: `--client-cert`, else on a node the kubelet's when it
/// exists.
fn client_cert(args: &Args) -> Option<PathBuf> {
    if let Some(path) = &args.client_cert {
        return Some(path.clone());
    }
    let kubelet = Path::new(KUBELET_CLIENT_CERT);
    (live::is_host_root(&args.root) && kubelet.exists()).then(|| {
        tracing::info!(
            cert = KUBELET_CLIENT_CERT,
            "presenting the kubelet's client certificate"
        );
        kubelet.to_path_buf()
    })
}

/// How long an idle blocking-pool thread (file reads, `tokio::fs`) lingers before it exits.
/// The daemon idles nearly all the time and its blocking work is rare and short: a thread
/// started anew for it costs tens of microseconds, one kept costs its stack and a thread of
/// the idle process (tokio's default keeps it 10 s).
const BLOCKING_THREAD_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(1);

/// How long the runtime's shutdown waits for blocking-pool work still under way after a stop
/// (a file read, a name lookup): such work is dropped with the process beyond this, so it never
/// holds the stop ([`crate::stop`]).
const BLOCKING_SHUTDOWN: Duration = Duration::from_millis(500);

/// Runs the daemon until SIGTERM or SIGINT, which stop it within seconds wherever it is
/// ([`crate::stop`]).
pub fn run(args: &Args) -> Result<ExitCode> {
    args.check()?;
    super::check_writable(&args.root)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_keep_alive(BLOCKING_THREAD_KEEP_ALIVE)
        .build()?;
    let ran: Result<Option<String>> = runtime.block_on(async {
        let mut signals = StopSignals::install().context("installing the SIGTERM handler")?;
        match until_stopped(&mut signals, run_daemon(args)).await {
            Ok(ended) => ended,
            Err(signal) => {
                tracing::info!(
                    signal,
                    "stopping: an update in progress resumes from its record at the next start"
                );
                Ok(None)
            }
        }
    });
    runtime.shutdown_timeout(BLOCKING_SHUTDOWN);
    match ran? {
        Some(_) => Ok(ExitCode::from(RESTART_EXIT_STATUS)),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// The exit status of a stop for a restart (the cluster's feature gates changed): the unit
/// restarts the agent on it (`RestartForceExitStatus=`) and does not count it a failure.
pub const RESTART_EXIT_STATUS: u8 = super::exit::Exit::Restart.code();

/// Runs the daemon; `Some(why)` when it stopped to be restarted.
async fn run_daemon(args: &Args) -> Result<Option<String>> {
    let node = match &args.node_name {
        Some(n) => n.clone(),
        None => nix::unistd::gethostname()
            .context("reading the hostname for the node name")?
            .to_string_lossy()
            .into_owned(),
    };
    let kubeconfig = match &args.kubeconfig {
        Some(k) => Some(k.clone()),
        // On a node (not a test root), the kubelet's credentials, as the MCD uses them.
        None if live::is_host_root(&args.root) && Path::new(KUBELET_KUBECONFIG).exists() => {
            tracing::info!(
                kubeconfig = KUBELET_KUBECONFIG,
                "using the kubelet's kubeconfig"
            );
            Some(PathBuf::from(KUBELET_KUBECONFIG))
        }
        None => None,
    };
    let mut kube_client = None;
    let api: Option<Arc<dyn NodeApi>> = match &kubeconfig {
        Some(kubeconfig) => {
            let mut options = ClusterOptions::new(&node);
            options.kubeconfig = kubeconfig.clone();
            options.drain_mode = args.drain_mode.into();
            options.eviction_kubeconfig = args.eviction_kubeconfig.clone();
            options.drain = DrainOptions {
                attempt_timeout: args.drain_attempt_timeout,
                overall_timeout: args.drain_timeout,
                eviction_retry: args.drain_retry,
                attempt_pause: args.drain_retry,
                ..DrainOptions::default()
            };
            options.handshake.report_after = args.drain_report_after;
            options.handshake.report_every = args.drain_report_every;
            tracing::info!(
                drain_mode = ?options.drain_mode,
                eviction_kubeconfig = ?options.eviction_kubeconfig,
                "drains"
            );
            // a kubeconfig that is missing or malformed is invalid input, as for `drain`
            let api = KubeNodeApi::connect(&options).await.map_err(|e| {
                let exit = match e {
                    crate::cluster::ClusterError::Kubeconfig { .. } => Exit::InvalidInput,
                    _ => Exit::Failed,
                };
                exit::classified(exit, None, e.into())
            })?;
            kube_client = Some(api.client().clone());
            Some(Arc::new(api))
        }
        None => None,
    };
    // The cluster's feature gates, read once: a change of the enabled set restarts the agent.
    let (gates, restart) = match &api {
        Some(api) => {
            let (gates, restart) = services::follow_feature_gates(api.clone()).await;
            (gates, Some(restart))
        }
        None => (AgentGates::default(), None),
    };
    let policy: Arc<dyn PolicySource> = match (&api, &args.policy) {
        (Some(_), Some(path)) => {
            return Err(exit::error(
                Exit::Usage,
                format!(
                    "--policy {} is for nodes without a cluster: with a cluster the node \
                     disruption policies are MachineConfiguration/cluster's (edit its \
                     spec.nodeDisruptionPolicy)",
                    path.display()
                ),
            ));
        }
        (Some(api), None) => Arc::new(ClusterPolicySource {
            watch: PolicyWatch::spawn(api.machine_configuration()),
            wait: PolicyWait::default(),
            irreconcilable_overrides: gates.irreconcilable_machine_config,
        }),
        (None, Some(path)) => Arc::new(FixedPolicy(ActivePolicy::from_file(
            &read_policy_file(path).invalid_input()?,
        ))),
        (None, None) => Arc::new(FixedPolicy(ActivePolicy::defaults())),
    };
    if api.is_none()
        && (args.drain_mode != DrainModeArg::Agent || args.eviction_kubeconfig.is_some())
    {
        return Err(exit::error(
            Exit::Usage,
            "--drain-mode controller and --eviction-kubeconfig need a cluster (--kubeconfig)",
        ));
    }
    // The pool names the config server's config, the MachineConfigNode's spec.pool and the
    // default FleetLock group; only the config server needs it to start. Following the API, a
    // node no pool selects names `not-yet-set` in its MCN, as the MCD's does; a pool that cannot
    // be worked out otherwise (two custom pools) says `worker`, as the role labels would.
    let mut mcn_pool = None;
    let known_pool = match (&args.config_server, &api) {
        (Some(_), _) => Some(choose_pool(args.pool.as_deref(), api.as_deref()).await?),
        (None, Some(_)) => match choose_pool(args.pool.as_deref(), api.as_deref()).await {
            Ok(pool) => Some(pool),
            Err(e) if e.downcast_ref::<pool::InNoPool>().is_some() => {
                tracing::info!(node, "No primary pool is associated with node: {node}");
                mcn_pool = Some(NOT_YET_SET.to_string());
                None
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), pool = pool::DEFAULT_POOL, "the MachineConfigNode names the default pool");
                None
            }
        },
        (None, None) => args.pool.clone(),
    };
    let pool = mcn_pool
        .or_else(|| known_pool.clone())
        .unwrap_or_else(|| pool::DEFAULT_POOL.to_string());
    let client_cert = client_cert(args);
    let strategy = args.strategy.build(&StrategyContext {
        config_server: args.config_server.as_deref(),
        ca: args.ca.as_deref(),
        client_cert: client_cert.as_deref(),
        insecure_http: args.insecure_http,
        node: &node,
        pool: known_pool.as_deref(),
    })?;
    let source: Arc<dyn ConfigSource> = match (&args.config_server, &args.config_file, &api) {
        (Some(url), _, _) => Arc::new(
            ConfigServer::new(
                url,
                args.ca.as_deref(),
                client_cert.as_deref(),
                &pool,
                Some(&node),
                args.insecure_http,
            )?
            .spilling_to(crate::input::spill::state_dir(&args.root)),
        ),
        (None, Some(path), _) => Arc::new(FileSource { path: path.clone() }),
        (None, None, Some(api)) => Arc::new(ApiSource { api: api.clone() }),
        (None, None, None) => {
            return Err(exit::error(
                Exit::Usage,
                format!(
                    "nothing to follow: no kubelet kubeconfig ({KUBELET_KUBECONFIG}); give \
                     --kubeconfig FILE, --config-server URL --ca FILE (MCO_AGENT_CONFIG_SERVER, \
                     MCO_AGENT_CA), or --config-file FILE"
                ),
            ));
        }
    };
    let live = live::is_host_root(&args.root);
    let root = crate::host::selinux::label_files(super::open_root(&args.root)?, live);
    let seams = live::connect(
        &args.root,
        &SeamOptions {
            live,
            skip_os: false,
            no_reboot: no_reboot_reason(args, live),
            lock_finalization: !args.no_lock_finalization,
        },
    )
    .await?;
    if seams.os.is_none() {
        tracing::warn!(why = %seams.os_unavailable, "OS changes cannot be made");
    }
    let live_systemd = seams.systemd.clone();
    let mut opts = EngineOptions {
        hooks: args
            .hooks
            .options_for(&args.root, args.root_is_host, args.alternate_root_hooks),
        ..EngineOptions::default()
    };
    if let Some(f) = &args.boot_id_file {
        opts.boot_id_file = f.clone();
    }
    opts.health = health_options(args, live)?;
    // With a cluster the certificate writer keeps the kubelet's CA, as the MCD's does.
    opts.skip_certificate_write = api.is_some();
    let cluster: Arc<dyn ClusterReport> = match &api {
        Some(api) => Arc::new(
            NodeReport::with_gates(api.clone(), &pool, gates.node_conditions())
                .with_irreconcilable_report(gates.irreconcilable_machine_config),
        ),
        None => Arc::new(NoCluster),
    };
    let engine = Engine::new(root, seams, opts, cluster)?
        .with_policy_source(policy)
        .with_strategy(Arc::new(strategy));
    // Metrics are informational: a port someone else holds does not stop the agent.
    let metrics_args = MetricsArgs {
        standalone: api.is_none(),
        ..args.metrics.clone()
    };
    let metrics = match metrics::start(&metrics_args, engine.root()).await {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "metrics are not served");
            let without = MetricsArgs {
                no_metrics: true,
                ..metrics_args
            };
            metrics::start(&without, engine.root()).await?
        }
    };
    metrics.metrics().set_node(&node);
    let mut metrics = metrics;
    if let Some(listen) = args.metrics.metrics_secure_listen {
        // Informational too: a bad certificate or a busy port is logged, the agent goes on.
        match services::serve_secure_metrics(args, listen, &node, kubeconfig.as_deref(), &metrics)
            .await
        {
            Ok(task) => metrics.keep(task),
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "metrics are not served on {listen}")
            }
        }
    }
    engine.reporter().add_observer(metrics.observer());
    tracing::info!(node, source = source.describe(), cluster = api.is_some(), root = %args.root.display(), "starting");
    if let (Some(api), Some(client)) = (&api, kube_client) {
        services::start_pinned_images(
            args,
            live,
            api.clone(),
            client,
            gates.node_conditions(),
            live_systemd,
        )?;
    }
    let mut daemon = match &api {
        Some(api) => {
            let joined = join::join(engine.root(), api.as_ref()).await?;
            let (notes, notes_rx) = tokio::sync::mpsc::unbounded_channel();
            let writer = CertificateWriter {
                api: api.clone(),
                root: engine.root().try_clone()?,
                systemd: engine.seams().systemd.clone(),
                link_pull_secret: engine.checks_os(),
                notes,
                stop: crate::stop::StopFlag::process(),
            };
            tokio::spawn(writer.run());
            let mut daemon = Daemon::new(engine, source, DesiredFeed::Cluster(api.desired()))
                .with_annotated_current(joined.current)
                .with_finalize_failure_annotated(joined.finalize_failure_annotated)
                .with_certificate_notes(notes_rx);
            if let Some(restart) = restart {
                daemon = daemon.with_restart_on(restart);
            }
            daemon
        }
        None => {
            let every = if args.poll_interval.is_zero() {
                DEFAULT_POLL_INTERVAL
            } else {
                args.poll_interval
            };
            Daemon::new(engine, source, DesiredFeed::Poll(every))
        }
    };
    daemon.start().await?;
    daemon.run().await?;
    Ok(daemon.restart_requested().map(str::to_string))
}
