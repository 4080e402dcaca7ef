//! Kubernetes clients from kubeconfig files, and the node's name.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use machine_config::error::go_error_text;

use super::error::ClusterError;

/// The kubelet's kubeconfig: node writes go out with the node's own identity, as the MCD's do.
pub const KUBELET_KUBECONFIG: &str = "/var/lib/kubelet/kubeconfig";

/// A client for the cluster and credentials of `path` (relative certificate paths in it are
/// resolved against its directory). kube's own retries are off: this module retries
/// itself and must see a PodDisruptionBudget's 429.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client, ClusterError> {
    let fail = |message: String| ClusterError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| match e {
        // kube's text names the path again, quoted twice, with Rust's OS error text
        KubeconfigError::ReadConfig(io, _) => fail(go_error_text(&io)),
        e => fail(e.to_string()),
    })?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| fail(e.to_string()))?;
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| fail(e.to_string()))
}

/// The node's name: the given one, else the host name in lower case (as the kubelet
/// registers it without `--hostname-override`).
pub fn node_name(explicit: Option<&str>) -> Result<String, ClusterError> {
    if let Some(name) = explicit {
        return validate_node_name(name);
    }
    let host = nix::unistd::gethostname()
        .map_err(|e| ClusterError::NodeName(format!("reading the host name: {e}")))?;
    let host = host
        .into_string()
        .map_err(|raw| ClusterError::NodeName(format!("the host name {raw:?} is not UTF-8")))?;
    validate_node_name(&host.to_lowercase())
}

fn validate_node_name(name: &str) -> Result<String, ClusterError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if ok {
        Ok(name.to_string())
    } else {
        Err(ClusterError::NodeName(format!(
            "{name:?} is not a valid node name (lowercase letters, digits, '-' and '.')"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names() {
        assert_eq!(
            node_name(Some("worker-0.example.com")).unwrap(),
            "worker-0.example.com"
        );
        assert!(node_name(Some("Worker_0")).is_err());
        assert!(node_name(Some("")).is_err());
        let host = node_name(None).unwrap();
        assert_eq!(host, host.to_lowercase());
    }

    #[tokio::test]
    async fn bad_kubeconfigs_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let Err(err) = client_from_kubeconfig(&missing).await else {
            panic!("a missing kubeconfig must be refused");
        };
        assert_eq!(
            err.to_string(),
            format!(
                "kubeconfig {}: no such file or directory",
                missing.display()
            )
        );
        let garbage = dir.path().join("garbage");
        std::fs::write(&garbage, "clusters: [ {").unwrap();
        assert!(client_from_kubeconfig(&garbage).await.is_err());
    }
}
