//! The service-CA rotation: when the operator rotates the API server's serving CA it copies the
//! new bundle into the ConfigMap `openshift-machine-config-operator/kubeconfig-data` and marks
//! the ControllerConfig `service-ca-rotate: "true"`; each node then puts the bundle into the
//! `certificate-authority-data` of its kubelet's kubeconfigs, and restarts the kubelet when a
//! certificate from a signer other than the localhost and load-balancer ones (which rotate on
//! their own during upgrades) was added.
//!
//! The MCD's rules: both bundles are split after each `-----END CERTIFICATE-----`; a piece of
//! the ConfigMap's bundle that the kubeconfig does not hold is *added*; a piece that
//! is not a certificate is dropped (logged `Malformed Cert, not syncing`); the kubeconfig
//! changes only when the bundles differ (whitespace around them aside) and something was
//! added, and then holds the ConfigMap's certificates, in its order.

use std::path::Path;

use k8s_openapi::ByteString;
use machine_config::mco::paths::{BOOTSTRAP_KUBECONFIG, KUBELET_KUBECONFIG};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;

use super::CertError;
use super::files::write_file;
use crate::rootfs::Root;

/// Certificates of these signers (by common name) rotate during upgrades by themselves: adding
/// one does not restart the kubelet.
const SELF_ROTATING_SIGNERS: [&str; 3] = [
    "kube-apiserver-localhost-signer",
    "openshift-kube-apiserver-operator_localhost-recovery-serving-signer",
    "kube-apiserver-lb-signer",
];

const END_CERTIFICATE: &str = "-----END CERTIFICATE-----";

/// What a rotation does to a kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCaPlan {
    /// The kubeconfig with the new CA data; `None` when it already holds the bundle.
    pub kubeconfig: Option<Vec<u8>>,
    /// The new CA data: the bundle's certificates, in its order.
    pub ca: Vec<u8>,
    /// Common names of the certificates the kubeconfig did not hold.
    pub added: Vec<String>,
    /// An added certificate is from a signer the kubelet must be restarted for.
    pub restart_kubelet: bool,
}

/// What [`rotate`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rotation {
    /// `/etc/kubernetes/kubeconfig` (and the kubelet's kubeconfig) took the new CA.
    pub changed: bool,
    /// The kubelet must be restarted to use it.
    pub restart_kubelet: bool,
    /// Common names of the certificates added.
    pub added: Vec<String>,
}

/// Puts `bundle` (the `kubeconfig-data` ConfigMap's `ca-bundle.crt`) into the bootstrap
/// kubeconfig of `root` and, when that changed, into the kubelet's kubeconfig, which the kubelet
/// reads when it starts (so a rotation whose kubelet restart is not needed now still reaches
/// the kubelet at its next start). Each file keeps its mode and owner.
pub fn rotate(root: &Root, bundle: &[u8]) -> Result<Rotation, CertError> {
    let read = |path: &str| -> Result<Vec<u8>, CertError> {
        root.read(Path::new(path))
            .map_err(|e| CertError::write(path, e))?
            .ok_or_else(|| CertError::Kubeconfig {
                path: path.into(),
                message: "does not exist".into(),
            })
    };
    let plan = plan(&read(BOOTSTRAP_KUBECONFIG)?, bundle, BOOTSTRAP_KUBECONFIG)?;
    let Some(kubeconfig) = plan.kubeconfig else {
        return Ok(Rotation::default());
    };
    for cn in &plan.added {
        tracing::info!(
            "Cert not found in kubeconfig. This means we need to write to disk. Subject is: {cn}"
        );
    }
    // The kubelet's first: the bootstrap kubeconfig is the record that the rotation is done.
    let kubelet = with_ca(&read(KUBELET_KUBECONFIG)?, &plan.ca, KUBELET_KUBECONFIG)?;
    write_file(root, KUBELET_KUBECONFIG, &kubelet, None, true)?;
    tracing::info!("Writing new Data to {BOOTSTRAP_KUBECONFIG}");
    write_file(root, BOOTSTRAP_KUBECONFIG, &kubeconfig, None, true)?;
    Ok(Rotation {
        changed: true,
        restart_kubelet: plan.restart_kubelet,
        added: plan.added,
    })
}

/// The rotation of `kubeconfig` (the file at `path`) to `bundle`.
pub fn plan(kubeconfig: &[u8], bundle: &[u8], path: &str) -> Result<ServerCaPlan, CertError> {
    let on_disk = ca_data(&parse(kubeconfig, path)?, path)?;
    let wanted = String::from_utf8_lossy(bundle);
    let held = String::from_utf8_lossy(&on_disk);
    // Compared without the whitespace around each (the MCD compares the pieces verbatim, so a
    // certificate that only moved in the bundle counted as added and restarted the kubelet).
    let held: Vec<&str> = split_certificates(held.trim())
        .into_iter()
        .map(str::trim)
        .collect();
    let mut ca = String::new();
    let mut added = Vec::new();
    let mut new_pieces = false;
    let mut restart_kubelet = false;
    for piece in split_certificates(wanted.trim()) {
        let new = !held.contains(&piece.trim());
        new_pieces |= new;
        let Some(cn) = certificate_name(piece) else {
            if piece.contains("-----BEGIN") {
                tracing::warn!("Malformed Cert, not syncing: {}", piece.trim());
            }
            continue;
        };
        if new {
            restart_kubelet |= !SELF_ROTATING_SIGNERS.iter().any(|s| cn.contains(s));
            added.push(cn);
        }
        ca.push_str(piece);
    }
    let differs = on_disk.trim_ascii() != bundle.trim_ascii();
    if !differs || !new_pieces {
        return Ok(ServerCaPlan {
            kubeconfig: None,
            ca: on_disk,
            added: Vec::new(),
            restart_kubelet: false,
        });
    }
    if ca.is_empty() {
        return Err(CertError::Kubeconfig {
            path: path.into(),
            message: "the kubeconfig-data CA bundle holds no valid certificate: not written".into(),
        });
    }
    Ok(ServerCaPlan {
        kubeconfig: Some(with_ca(kubeconfig, ca.as_bytes(), path)?),
        ca: ca.into_bytes(),
        added,
        restart_kubelet,
    })
}

/// `kubeconfig` with `ca` as the first cluster's `certificate-authority-data`, everything else
/// kept (as YAML).
pub fn with_ca(kubeconfig: &[u8], ca: &[u8], path: &str) -> Result<Vec<u8>, CertError> {
    let mut doc = parse(kubeconfig, path)?;
    let cluster = first_cluster(&mut doc, path)?;
    cluster.insert(
        "certificate-authority-data".into(),
        serde_json::to_value(ByteString(ca.to_vec())).expect("bytes serialize"),
    );
    serde_saphyr::to_string(&doc)
        .map(String::into_bytes)
        .map_err(|e| CertError::Kubeconfig {
            path: path.into(),
            message: format!("could not write it back: {e}"),
        })
}

fn parse(kubeconfig: &[u8], path: &str) -> Result<Value, CertError> {
    let text = std::str::from_utf8(kubeconfig).map_err(|_| CertError::Kubeconfig {
        path: path.into(),
        message: "not UTF-8 text".into(),
    })?;
    serde_saphyr::from_str(text).map_err(|e| CertError::Kubeconfig {
        path: path.into(),
        message: format!("not a kubeconfig: {e}"),
    })
}

/// `clusters[0].cluster` (the MCD rotates the first cluster only).
fn first_cluster<'v>(
    doc: &'v mut Value,
    path: &str,
) -> Result<&'v mut serde_json::Map<String, Value>, CertError> {
    doc.pointer_mut("/clusters/0/cluster")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| CertError::Kubeconfig {
            path: path.into(),
            message: "has no clusters[0].cluster".into(),
        })
}

/// The first cluster's CA data (empty when it has none).
fn ca_data(doc: &Value, path: &str) -> Result<Vec<u8>, CertError> {
    let mut doc = doc.clone();
    let cluster = first_cluster(&mut doc, path)?;
    match cluster.get("certificate-authority-data") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value::<ByteString>(v.clone())
            .map(|b| b.0)
            .map_err(|e| CertError::Kubeconfig {
                path: path.into(),
                message: format!("clusters[0].cluster.certificate-authority-data: {e}"),
            }),
    }
}

/// `bundle` split after each `-----END CERTIFICATE-----` (Go's `strings.SplitAfter`: the
/// text between two certificates starts the next piece; a trailing empty piece is dropped).
fn split_certificates(bundle: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = bundle;
    while let Some(at) = rest.find(END_CERTIFICATE) {
        let end = at + END_CERTIFICATE.len();
        out.push(&rest[..end]);
        rest = &rest[end..];
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// The subject common name of the certificate in the PEM `piece`; `None` when it holds no
/// certificate that parses. (rustls parses it, as a trust anchor: the agent links it already
/// for its API client, where an X.509 crate would add a third of a megabyte for one field.)
pub fn certificate_name(piece: &str) -> Option<String> {
    let der = CertificateDer::from_pem_slice(piece.as_bytes()).ok()?;
    let mut store = RootCertStore::empty();
    store.add(der).ok()?;
    let anchor = store.roots.first()?;
    Some(common_name(anchor.subject.as_ref()).unwrap_or_default())
}

/// The last common name (OID 2.5.4.3) in the contents of an X.509 `Name` (a sequence of
/// relative distinguished names, each a set of `{type, value}` sequences), as Go's `pkix.Name`
/// takes it.
fn common_name(name: &[u8]) -> Option<String> {
    const CN: &[u8] = &[0x55, 0x04, 0x03];
    let mut found = None;
    let mut rdns = name;
    while let Some((0x31, set, rest)) = der_next(rdns) {
        rdns = rest;
        let mut attrs = set;
        while let Some((0x30, attr, rest)) = der_next(attrs) {
            attrs = rest;
            if let Some((0x06, oid, value)) = der_next(attr)
                && oid == CN
                && let Some((_, text, _)) = der_next(value)
            {
                found = Some(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
    found
}

/// One DER element of `input`: its tag, its contents and what follows it.
fn der_next(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |l, b| (l << 8) | usize::from(*b));
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}
