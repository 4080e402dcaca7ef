//! The services `start` runs beside the update loop, each for as long as the agent runs: the
//! pinned image sets' puller, the watch of the cluster's feature gates (whose change asks for a
//! restart) and the metrics served with TLS to the cluster's Prometheus. Apart from the daemon's
//! wiring in the module above, which decides whether each one runs.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use futures::FutureExt;
use machine_config::mco::node_image_conditions::Gates;
use machine_config::mco::pinned_images::KUBELET_AUTH_FILE;

use super::Args;
use crate::cluster::feature_gates::{self, AgentGates};
use crate::cluster::{NodeApi, pinned_watch};
use crate::host::cri::CriClient;
use crate::metrics;
use crate::pinned::{self, storage::Skopeo};
use crate::rootfs::Root;

/// The pinned image sets of the node's pools, pulled through the runtime at `--cri-socket`,
/// beside the daemon (a task of its own that lives as long as the agent).
pub(super) fn start_pinned_images(
    args: &Args,
    live: bool,
    api: Arc<dyn NodeApi>,
    client: kube::Client,
    gates: Gates,
    systemd: Option<Arc<dyn crate::host::systemd::Systemd>>,
) -> Result<()> {
    let node = api.node_name().to_string();
    let seams = pinned::Seams {
        api,
        gates,
        root: crate::host::selinux::label_files(Root::open(&args.root)?, live),
        cri: Arc::new(CriClient::new(&args.cri_socket)),
        inspector: Arc::new(Skopeo {
            program: "skopeo".into(),
            auth_file: args.root.join(KUBELET_AUTH_FILE.trim_start_matches('/')),
            test_root: (!live).then(|| args.root.clone()),
        }),
        systemd,
    };
    let manager = Arc::new(pinned::Manager::new(
        &node,
        seams,
        pinned::Timings::default(),
    ));
    tracing::info!(cri_socket = %args.cri_socket.display(), "pinned image sets followed");
    tokio::spawn(manager.run(pinned_watch::watch(client, &node)));
    Ok(())
}

/// Reads the cluster's feature gates (waiting up to a minute, as the MCD does) and returns the
/// gates the agent acts on, with a future that resolves once the enabled set changes.
pub(super) async fn follow_feature_gates(
    api: Arc<dyn NodeApi>,
) -> (AgentGates, futures::future::BoxFuture<'static, String>) {
    let mut readings = feature_gates::readings(api.feature_gate(), api.cluster_version());
    let started = feature_gates::initial(&mut readings, feature_gates::INITIAL_WAIT).await;
    let described = feature_gates::describe(&started);
    tracing::info!("feature gates: {described}");
    record_gates_event(
        api.as_ref(),
        feature_gates::FEATURE_GATES_INITIALIZED,
        &described,
    )
    .await;
    let gates = AgentGates::of(&started);
    let restart = async move {
        match feature_gates::changed(&mut readings, &started).await {
            Some(new) => {
                let described = feature_gates::describe(&new);
                record_gates_event(
                    api.as_ref(),
                    feature_gates::FEATURE_GATES_MODIFIED,
                    &described,
                )
                .await;
                format!("the cluster's feature gates changed: {described}")
            }
            None => std::future::pending().await,
        }
    }
    .boxed();
    (gates, restart)
}

/// Records the FeatureGates event `reason` as the MCD does when it reads the gates or sees them
/// change; a failed write is only logged (the gates are in force whether or not it lands).
async fn record_gates_event(api: &dyn NodeApi, reason: &str, described: &str) {
    let message = format!("FeatureGates updated to {described}");
    if let Err(e) = api.event(reason, &message).await {
        tracing::warn!(error = %e, "could not record the feature gates event");
    }
}

/// The metrics on `listen` with TLS and reviewed bearer tokens ([`metrics::secure`]).
pub(super) async fn serve_secure_metrics(
    args: &Args,
    listen: std::net::SocketAddr,
    node: &str,
    kubeconfig: Option<&Path>,
    metrics: &metrics::server::MetricsHandle,
) -> Result<tokio::task::JoinHandle<()>> {
    let Some(kubeconfig) = kubeconfig else {
        anyhow::bail!("--metrics-secure-listen needs a kubeconfig to review tokens with");
    };
    let (Some(cert), Some(key)) = (
        &args.metrics.metrics_tls_cert,
        &args.metrics.metrics_tls_key,
    ) else {
        anyhow::bail!("--metrics-secure-listen needs --metrics-tls-cert and --metrics-tls-key");
    };
    let client = mco_kube::client_from_kubeconfig(kubeconfig).await?;
    let options = metrics::secure::SecureOptions {
        listen,
        cert: cert.clone(),
        key: key.clone(),
        node: node.to_string(),
    };
    let reviews = Arc::new(metrics::secure::Reviews::new(client, node));
    let (_, task) = metrics::secure::start(&options, reviews, metrics.metrics().clone()).await?;
    Ok(task)
}
