//! Kubeconfig files pointing at the test server (CA data inline; a bearer token or a client
//! certificate and key inline).

use std::path::Path;

use anyhow::{Context, Result};
use base64::Engine;

/// Quotes a YAML scalar (JSON strings are valid YAML double-quoted scalars).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// How a kubeconfig's user authenticates.
pub enum UserCredential<'a> {
    Token(&'a str),
    ClientCertificate { cert_pem: &'a str, key_pem: &'a str },
}

pub fn render(url: &str, ca_pem: Option<&str>, user: &str, credential: &UserCredential) -> String {
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let ca = ca_pem
        .map(|pem| format!("\n    certificate-authority-data: {}", b64(pem)))
        .unwrap_or_default();
    let credential = match credential {
        UserCredential::Token(token) => format!("token: {}", quote(token)),
        UserCredential::ClientCertificate { cert_pem, key_pem } => format!(
            "client-certificate-data: {}\n    client-key-data: {}",
            b64(cert_pem),
            b64(key_pem)
        ),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mco-test\n  cluster:\n    server: {url}{ca}\n\
         users:\n- name: {user}\n  user:\n    {credential}\n\
         contexts:\n- name: mco-test\n  context:\n    cluster: mco-test\n    user: {user}\n\
         current-context: mco-test\npreferences: {{}}\n",
        url = quote(url),
        user = quote(user),
    )
}

/// Writes the kubeconfig with mode 0600 (it holds a credential).
pub fn write(
    path: &Path,
    url: &str,
    ca_pem: Option<&str>,
    user: &str,
    credential: &UserCredential,
) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {parent:?}"))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {path:?}"))?;
    file.write_all(render(url, ca_pem, user, credential).as_bytes())
        .with_context(|| format!("writing {path:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_parseable_yaml() {
        let text = render(
            "https://127.0.0.1:1",
            Some("PEM"),
            "system:node:n1",
            &UserCredential::Token("tok"),
        );
        let doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(
            doc["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:1"
        );
        assert_eq!(
            doc["clusters"][0]["cluster"]["certificate-authority-data"],
            "UEVN"
        );
        assert_eq!(doc["users"][0]["name"], "system:node:n1");
        assert_eq!(doc["users"][0]["user"]["token"], "tok");
        assert_eq!(doc["current-context"], "mco-test");
        let cert = UserCredential::ClientCertificate {
            cert_pem: "CERT",
            key_pem: "KEY",
        };
        let doc: serde_json::Value =
            serde_saphyr::from_str(&render("https://h:1", None, "u", &cert)).unwrap();
        assert_eq!(
            doc["users"][0]["user"]["client-certificate-data"],
            "Q0VSVA=="
        );
        assert_eq!(doc["users"][0]["user"]["client-key-data"], "S0VZ");
    }
}
