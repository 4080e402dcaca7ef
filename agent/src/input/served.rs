//! Reading a config from a config server (the companion or the MCS): the HTTP(S) client (which
//! presents the node's client certificate when the server asks for one), the request as the
//! agent makes it (`Accept` of Ignition spec 3.5, the node's name in `X-MCO-Node`, the rendered
//! config it wants in `X-MCO-Config`), and the rendered MachineConfig inside the served Ignition
//! config (the served [`SERVED_CONTENT`]; the files the server appends for first boot are not
//! part of it). The protocol: docs/companion.md.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use machine_config::mco::paths::SERVED_CONTENT;
use machine_config::source::SourceFile;
use machine_config::{Config, IgnitionJson, MachineConfig, ParsedConfig};

/// The Accept header: the newest spec the agent reads.
pub const ACCEPT: &str = "application/vnd.coreos.ignition+json;version=3.5.0";
/// The header carrying the node's name.
pub const NODE_HEADER: &str = "X-MCO-Node";
/// The header naming the rendered config asked for (a machine-config-server ignores it).
pub const CONFIG_HEADER: &str = "X-MCO-Config";
/// The kubelet's client certificate and key (one PEM file), which proves the node's name.
pub const KUBELET_CLIENT_CERT: &str = "/var/lib/kubelet/pki/kubelet-client-current.pem";
/// A served config larger than this is refused.
const MAX_BODY: usize = 64 << 20;

/// Refuses a plain `http://` URL unless `insecure_http` (`--insecure-http`) accepts it, and then
/// warns: nothing authenticates the server or protects the config on the way, and the config is
/// what a root daemon writes to the node (files, units, SSH keys, password hashes).
pub fn check_scheme(url: &str, insecure_http: bool) -> Result<()> {
    refuse_plain_http(url, insecure_http)?;
    if !url.starts_with("http://") {
        return Ok(());
    }
    tracing::warn!(
        url,
        "--insecure-http: fetching configs over plain http://, which anyone on the way can read \
         or change"
    );
    Ok(())
}

/// [`check_scheme`]'s refusal alone, without its warning (`start`'s checks, which `config
/// show` runs too).
pub fn refuse_plain_http(url: &str, insecure_http: bool) -> Result<()> {
    if url.starts_with("http://") && !insecure_http {
        bail!(
            "{url}: a plain http:// config source is neither authenticated nor encrypted (anyone \
             on the way can read or change what this node applies); use https:// with --ca, or \
             pass --insecure-http to accept it"
        );
    }
    Ok(())
}

/// The HTTP(S) client configs are fetched with, for `url` (`https://` or `http://`). With `ca`
/// (a PEM bundle) only that CA is trusted; without, the system's trust store. With `identity`
/// (a PEM file holding a client certificate and its key, as the kubelet's), the client presents
/// it when the server asks for a client certificate.
pub fn http_client(
    url: &str,
    ca: Option<&Path>,
    identity: Option<&Path>,
) -> Result<reqwest::Client> {
    // reqwest's rustls needs the provider even for plain http.
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        // An agent fetches a config or two per update, then nothing for hours: a connection
        // kept idle (reqwest's default: 90 s) holds one of the config server's connection
        // slots that machines booting at that moment need. A few seconds still cover the
        // fetches of one update.
        .pool_idle_timeout(Duration::from_secs(5))
        .user_agent(concat!("mco-agent/", env!("CARGO_PKG_VERSION")));
    if url.starts_with("https://") {
        if let Some(ca) = ca {
            let pem =
                std::fs::read(ca).with_context(|| format!("reading the CA {}", ca.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("{}: not a PEM certificate bundle", ca.display()))?;
            if certs.is_empty() {
                bail!("{}: no certificate in the CA file", ca.display());
            }
            builder = builder.tls_certs_only(certs);
        }
        if let Some(identity) = identity {
            let pem = std::fs::read(identity).with_context(|| {
                format!("reading the client certificate {}", identity.display())
            })?;
            let identity = reqwest::Identity::from_pem(&pem).with_context(|| {
                format!(
                    "{}: not a PEM client certificate with its private key",
                    identity.display()
                )
            })?;
            builder = builder.identity(identity);
        }
    } else if !url.starts_with("http://") {
        bail!("{url:?}: expected an https:// or http:// URL");
    }
    builder.build().context("building the HTTPS client")
}

/// `GET url` as the agent asks a config server (the Ignition Accept header, the node's name and
/// the rendered config wanted when given); the body of a 2xx answer. Errors say whether the
/// server could not be reached, the TLS handshake failed (naming rustls' reason), or what the
/// server answered (with the reason it gave).
pub async fn fetch(
    client: &reqwest::Client,
    url: &str,
    node: Option<&str>,
    config: Option<&str>,
) -> Result<Vec<u8>> {
    let mut request = client.get(url).header("Accept", ACCEPT);
    if let Some(node) = node {
        request = request.header(NODE_HEADER, node);
    }
    if let Some(config) = config {
        request = request.header(CONFIG_HEADER, config);
    }
    let response = request
        .send()
        .await
        .map_err(|e| FetchError(describe_send_error(url, &e)))?;
    let status = response.status();
    if !status.is_success() {
        // Only the start of an error answer is shown; the rest is not read.
        let body = read_capped(response, ERROR_EXCERPT, url).await;
        let text = match &body {
            Ok(b) | Err(BodyError::TooLarge(b)) => String::from_utf8_lossy(b).trim().to_string(),
            Err(BodyError::Read(e)) => format!("(its body could not be read: {e:#})"),
        };
        return Err(FetchError(format!("{url} answered {status}: {text}")).into());
    }
    if let Some(length) = response.content_length().filter(|&l| l > MAX_BODY as u64) {
        bail!("{url}: the config is {length} bytes, more than {MAX_BODY}");
    }
    match read_capped(response, MAX_BODY, url).await {
        Ok(body) => Ok(body),
        Err(BodyError::TooLarge(_)) => bail!("{url}: the config is more than {MAX_BODY} bytes"),
        Err(BodyError::Read(e)) => Err(e),
    }
}

/// A config that could not be fetched: the server could not be reached, the TLS handshake
/// failed, or the server answered with an error (the command line tells these from a config
/// that is wrong).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FetchError(pub String);

/// How much of an error answer's body is shown.
const ERROR_EXCERPT: usize = 500;

enum BodyError {
    /// The body goes on past the cap: the first `cap` bytes.
    TooLarge(Vec<u8>),
    Read(anyhow::Error),
}

/// The body of `response`, read chunk by chunk and refused as soon as it passes `cap` bytes (a
/// server that lies about, or omits, its length cannot make the agent buffer more).
async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    url: &str,
) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    loop {
        let chunk = response
            .chunk()
            .await
            .with_context(|| format!("reading the answer of {url}"))
            .map_err(BodyError::Read)?;
        let Some(chunk) = chunk else {
            return Ok(body);
        };
        if body.len() + chunk.len() > cap {
            let room = cap - body.len();
            body.extend_from_slice(&chunk[..room]);
            return Err(BodyError::TooLarge(body));
        }
        body.extend_from_slice(&chunk);
    }
}

/// The rustls error in `err`, which may sit inside (nested) `io::Error`s, whose `source()`
/// skips it.
fn rustls_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut current = err;
    loop {
        if let Some(e) = current.downcast_ref::<rustls::Error>() {
            return Some(e);
        }
        current = current.downcast_ref::<std::io::Error>()?.get_ref()?;
    }
}

/// The host of `url` (what its certificate must name).
fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| url.to_string())
}

/// A request that got no answer, said plainly: TLS, connection or timeout, with the causes.
fn describe_send_error(url: &str, e: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut tls = None;
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = source {
        causes.push(err.to_string());
        if tls.is_none() {
            tls = rustls_error(err).map(|e| super::tls_cause::describe(e, &host_of(url)));
        }
        source = err.source();
    }
    causes.dedup();
    let causes = causes.join(": ");
    if let Some(reason) = tls {
        format!("TLS handshake with {url} failed: {reason}")
    } else if e.is_timeout() {
        format!("{url}: no answer in time: {causes}")
    } else if e.is_connect() {
        format!("cannot reach {url}: {causes}")
    } else {
        format!("fetching {url}: {e}: {causes}")
    }
}

/// The MachineConfig inside a served Ignition config (`body`, the server's answer). The answer
/// carries the config twice (its files, and the MachineConfig encoded in [`SERVED_CONTENT`]):
/// it is read in place and let go once that file is decoded, and the MachineConfig is read in
/// place too, so at most the answer and the decoded MachineConfig are held at once. With
/// `spill` (the agent's state directory), a large MachineConfig is decoded into a private file
/// there and its sources are read from it when used ([`super::spill`]): then only the answer is
/// held, and only until the MachineConfig is read.
pub fn served_machine_config(body: Vec<u8>, spill: Option<&Path>) -> Result<MachineConfig> {
    let served = {
        let (value, sources) = super::read_document(body).context("not a valid Ignition config")?;
        let parsed = IgnitionJson::from_parts(value, sources)
            .parse()
            .context("not a valid Ignition config")?;
        served_content(&parsed.config, spill)?
    };
    let (mc, _) = machine_config_document(served)?;
    Ok(mc)
}

/// The decoded [`SERVED_CONTENT`] of a served config.
pub(super) enum Served {
    Memory(Vec<u8>),
    File(Arc<SourceFile>),
}

/// The decoded [`SERVED_CONTENT`] of a served config: in a private file in `spill` when it is
/// large and the file can be made there, else in memory.
pub(super) fn served_content(config: &Config, spill: Option<&Path>) -> Result<Served> {
    let file = config
        .storage
        .files
        .iter()
        .find(|f| f.path == SERVED_CONTENT)
        .with_context(|| format!("no {SERVED_CONTENT} in it (not a machine-config server?)"))?;
    let large = file
        .contents
        .source
        .as_ref()
        .is_some_and(|s| s.len() > super::spill::KEEP_IN_MEMORY);
    if let Some(dir) = spill.filter(|_| large) {
        match super::spill::spill(dir, file) {
            Ok(spilled) => return Ok(Served::File(spilled)),
            Err(e) => tracing::debug!(
                dir = %dir.display(),
                error = %e,
                "the served MachineConfig is kept in memory"
            ),
        }
    }
    file.decoded_contents()
        .map(Served::Memory)
        .with_context(|| format!("decoding {SERVED_CONTENT}"))
}

/// The MachineConfig in the decoded [`SERVED_CONTENT`], read in place, and its Ignition config.
pub(super) fn machine_config_document(served: Served) -> Result<(MachineConfig, ParsedConfig)> {
    let (value, sources) = match served {
        Served::Memory(bytes) => super::read_document(bytes).context(SERVED_CONTENT)?,
        Served::File(file) => match super::read_json_file(&file) {
            Some(document) => document,
            None => {
                let mut bytes = vec![0; file.len() as usize];
                file.read_exact_at(&mut bytes, 0).context(SERVED_CONTENT)?;
                super::read_document(bytes).context(SERVED_CONTENT)?
            }
        },
    };
    let (mc, parsed) = MachineConfig::from_document(value, sources).context(SERVED_CONTENT)?;
    if mc.name().is_empty() {
        bail!("{SERVED_CONTENT}: the MachineConfig has no name");
    }
    Ok((mc, parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(body: &'static [u8]) -> reqwest::Response {
        reqwest::Response::from(http::Response::new(body))
    }

    fn answer(mc: &str) -> Vec<u8> {
        let file = serde_json::json!({"path": SERVED_CONTENT, "mode": 420,
            "contents": {"source": machine_config::dataurl::encode_base64(mc.as_bytes())}});
        let config = serde_json::json!({"ignition": {"version": "3.5.0"},
            "storage": {"files": [file, {"path": "/etc/first-boot-only", "contents": {"source": "data:,x"}}]}});
        serde_json::to_vec(&config).unwrap()
    }

    #[test]
    fn the_served_machine_config_is_read_from_the_answer() {
        let mc = r#"{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig",
            "metadata":{"name":"rendered-worker-1"},"spec":{"config":{"ignition":{"version":"3.4.0"},
            "storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,hello"}}]}}}}"#;
        let read = served_machine_config(answer(mc), None).unwrap();
        assert_eq!(read.name(), "rendered-worker-1");
        let files = read.ignition().unwrap().storage.files;
        assert_eq!(
            files.len(),
            1,
            "the answer's own files are not the MachineConfig's"
        );
        assert_eq!(files[0].decoded_contents().unwrap(), b"hello");

        let unnamed = mc.replace("rendered-worker-1", "");
        let e = served_machine_config(answer(&unnamed), None).unwrap_err();
        assert!(
            format!("{e:#}").contains("the MachineConfig has no name"),
            "{e:#}"
        );
        let e = served_machine_config(br#"{"ignition":{"version":"3.5.0"}}"#.to_vec(), None)
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("not a machine-config server"),
            "{e:#}"
        );
        let e = served_machine_config(b"<html>".to_vec(), None).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("not a valid Ignition config"),
            "{e:#}"
        );
    }

    #[tokio::test]
    async fn a_body_is_refused_once_it_passes_the_cap() {
        let url = "http://server/config";
        let body = read_capped(response(b"0123456789"), 10, url).await;
        assert!(matches!(body, Ok(b) if b == b"0123456789"));
        match read_capped(response(b"0123456789"), 4, url).await {
            Err(BodyError::TooLarge(start)) => assert_eq!(start, b"0123"),
            Err(BodyError::Read(e)) => panic!("read error: {e:#}"),
            Ok(b) => panic!("a body past the cap was read whole: {} bytes", b.len()),
        }
    }
}
