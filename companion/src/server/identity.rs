//! Who a client is: a node proves its name with the kubelet's client certificate (mutual TLS),
//! issued by the cluster's client CA as `CN=system:node:<name>`, `O=system:nodes` (what the
//! Kubernetes API server's Node authorizer also requires). Any other certificate the CA signed
//! (an admin's, a service's) proves no node.

use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The Common Name prefix of a node's client certificate.
pub const NODE_CN_PREFIX: &str = "system:node:";
/// The Organization every node's client certificate carries.
pub const NODES_GROUP: &str = "system:nodes";

/// The node a verified client certificate names, or why it names none.
pub fn node_of_certificate(cert: &CertificateDer<'_>) -> Result<String, String> {
    let (_, parsed) = X509Certificate::from_der(cert.as_ref())
        .map_err(|e| format!("the client certificate cannot be read: {e}"))?;
    let subject = parsed.subject();
    // Kubernetes reads the last CN of a subject, other code the first: a certificate with two
    // could be one node here and another to the API server. Refuse it rather than choose.
    let cns: Vec<_> = subject.iter_common_name().collect();
    if cns.len() > 1 {
        return Err(format!(
            "the client certificate ({subject}) has {} Common Names: a node's has one",
            cns.len()
        ));
    }
    let cn = cns
        .first()
        .and_then(|a| a.as_str().ok())
        .ok_or_else(|| format!("the client certificate ({subject}) has no Common Name"))?;
    let name = cn
        .strip_prefix(NODE_CN_PREFIX)
        .ok_or_else(|| format!("the client certificate's CN {cn:?} is not {NODE_CN_PREFIX}NAME"))?;
    if !subject
        .iter_organization()
        .any(|o| o.as_str().ok() == Some(NODES_GROUP))
    {
        return Err(format!(
            "the client certificate of {cn:?} is not in O={NODES_GROUP}"
        ));
    }
    if !super::routes::is_dns_subdomain(name) {
        return Err(format!(
            "the client certificate's node name {name:?} is not a node name"
        ));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(cn: &str, org: Option<&str>) -> CertificateDer<'static> {
        cert_with_cns(&[cn], org)
    }

    /// A self-signed certificate whose subject has each of `cns` as a Common Name, in order.
    fn cert_with_cns(cns: &[&str], org: Option<&str>) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (i, cn) in cns.iter().enumerate() {
            // rcgen keeps one value per attribute type: further CNs go in under their OID
            let kind = match i {
                0 => rcgen::DnType::CommonName,
                _ => rcgen::DnType::CustomDnType(vec![2, 5, 4, 3]),
            };
            params.distinguished_name.push(kind, *cn);
        }
        if let Some(org) = org {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, org);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn a_node_certificate_names_its_node() {
        let der = cert("system:node:worker-0", Some(NODES_GROUP));
        assert_eq!(node_of_certificate(&der).unwrap(), "worker-0");
    }

    #[test]
    fn a_certificate_with_two_common_names_names_no_node() {
        for cns in [
            ["system:node:worker-0", "system:node:master-0"],
            ["system:node:worker-0", "system:node:worker-0"],
        ] {
            let der = cert_with_cns(&cns, Some(NODES_GROUP));
            let (_, parsed) = X509Certificate::from_der(der.as_ref()).unwrap();
            assert_eq!(parsed.subject().iter_common_name().count(), 2, "{cns:?}");
            let err = node_of_certificate(&der).unwrap_err();
            assert!(err.contains("has 2 Common Names"), "{cns:?}: {err}");
        }
    }

    #[test]
    fn other_certificates_name_no_node() {
        for (cn, org, why) in [
            (
                "system:admin",
                Some("system:masters"),
                "is not system:node:NAME",
            ),
            ("system:node:worker-0", None, "not in O=system:nodes"),
            (
                "system:node:worker-0",
                Some("system:masters"),
                "not in O=system:nodes",
            ),
            (
                "system:node:Bad_Name",
                Some(NODES_GROUP),
                "is not a node name",
            ),
        ] {
            let err = node_of_certificate(&cert(cn, org)).unwrap_err();
            assert!(err.contains(why), "{cn} {org:?}: {err}");
        }
    }
}
