//! A real OCI distribution registry for tests: Debian's `docker-registry` on loopback, with TLS
//! (a certificate from a test CA) and htpasswd authentication (`htpasswd -B`, apache2-utils),
//! storing under a temporary directory; and images the test builds itself ([`TestImage`]: an
//! OCI layout written here, each layer a tar of the given files) pushed to it with `skopeo
//! copy`. Each is a process killed when its handle drops.
//!
//! A missing tool fails the test and says what to install ([`crate::component::missing`]).

use std::fs;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::component::missing;
use crate::tls::TestCa;

/// The registry's user and password.
pub const USER: &str = "pinner";
pub const PASSWORD: &str = "pin-secret";

pub struct TestRegistry {
    dir: tempfile::TempDir,
    child: Child,
    /// `127.0.0.1:PORT`, as image references name it.
    pub host: String,
    ca_pem: String,
}

impl TestRegistry {
    /// Starts a registry on a free loopback port and waits until it answers.
    pub fn start() -> Result<Self> {
        for tool in ["docker-registry", "htpasswd", "skopeo"] {
            if which(tool).is_none() {
                missing(
                    tool,
                    "it is not on PATH (Debian: docker-registry, apache2-utils, skopeo)",
                );
            }
        }
        let mut dir = tempfile::tempdir()?;
        let ca = TestCa::new("mco test registry CA")?;
        let names = vec!["127.0.0.1".to_string()];
        let (cert, key) = ca
            .issue_server_cert(&names)?
            .write_to(dir.path(), "registry")?;
        let htpasswd = Command::new("htpasswd")
            .args(["-nbB", USER, PASSWORD])
            .output()
            .context("running htpasswd")?;
        if !htpasswd.status.success() {
            bail!("htpasswd: {}", String::from_utf8_lossy(&htpasswd.stderr));
        }
        fs::write(dir.path().join("htpasswd"), &htpasswd.stdout)?;
        // A free port: taken from the kernel, released, then given to the registry (which
        // cannot say which port it bound); a race lost to another process is retried.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let config = dir.path().join("config.yml");
            fs::write(
                &config,
                format!(
                    "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {data}}}\n  delete: {{enabled: true}}\nhttp:\n  addr: 127.0.0.1:{port}\n  tls: {{certificate: {cert}, key: {key}}}\nauth:\n  htpasswd: {{realm: mco-test, path: {htpasswd}}}\n",
                    data = dir.path().join("data").display(),
                    cert = cert.display(),
                    key = key.display(),
                    htpasswd = dir.path().join("htpasswd").display(),
                ),
            )?;
            let log = fs::File::create(dir.path().join("registry.log"))?;
            let child = Command::new("docker-registry")
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .context("starting docker-registry")?;
            let mut registry = TestRegistry {
                dir,
                child,
                host: format!("127.0.0.1:{port}"),
                ca_pem: ca.cert_pem().to_string(),
            };
            match registry.wait_ready() {
                Ok(()) => return Ok(registry),
                Err(e) if registry.child.try_wait()?.is_some() => {
                    tracing::warn!("the registry did not start on port {port}: {e:#}");
                    dir = std::mem::replace(&mut registry.dir, tempfile::tempdir()?);
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        bail!("the registry did not start on any of 5 ports")
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("docker-registry exited ({status}): {}", self.log());
            }
            if std::net::TcpStream::connect(&self.host).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "docker-registry did not listen on {} within 30 s: {}",
                    self.host,
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The registry's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The CA that signed the registry's certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Writes the CA where containers/image looks for a registry's CA under `certs_d`
    /// (`<certs_d>/<host>/ca.crt`, as `/etc/docker/certs.d` or `~/.config/containers/certs.d`).
    pub fn write_ca_to(&self, certs_d: &Path) -> Result<PathBuf> {
        let dir = certs_d.join(&self.host);
        fs::create_dir_all(&dir)?;
        let path = dir.join("ca.crt");
        fs::write(&path, &self.ca_pem)?;
        Ok(path)
    }

    /// A pull secret (`config.json`) with `user:password` for this registry.
    pub fn pull_secret(&self, user: &str, password: &str) -> String {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        serde_json::json!({"auths": {&self.host: {"auth": auth}}}).to_string()
    }

    /// Pushes `image` as `<host>/<repository>:<tag>`; returns its reference by digest.
    pub fn push(&self, image: &TestImage, repository: &str, tag: &str) -> Result<String> {
        // no `:` in the path: skopeo's `oci:PATH:TAG` splits on it
        let hex = image.digest().trim_start_matches("sha256:").to_string();
        let layout = image.write_layout(&self.dir.path().join(format!("layout-{hex}")))?;
        let certs = self.dir.path().join("certs.d");
        self.write_ca_to(&certs)?;
        let dest = format!("{}/{repository}", self.host);
        let out = Command::new("skopeo")
            .args(["copy", "--insecure-policy", "--quiet", "--preserve-digests"])
            .arg("--dest-cert-dir")
            .arg(certs.join(&self.host))
            .args(["--dest-creds", &format!("{USER}:{PASSWORD}")])
            // the layout holds this one image: no reference needed
            .arg(format!("oci:{}", layout.display()))
            .arg(format!("docker://{dest}:{tag}"))
            .output()
            .context("running skopeo copy")?;
        if !out.status.success() {
            bail!(
                "skopeo copy to {dest}:{tag} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(format!("{dest}@{}", image.digest()))
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.is_file())
    })
}

/// An OCI image built in memory: its layers (uncompressed tars), config and manifest.
pub struct TestImage {
    layers: Vec<Vec<u8>>,
    config: Vec<u8>,
    manifest: Vec<u8>,
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl TestImage {
    /// An image of one layer per entry of `layers`, each a list of (path, contents).
    pub fn new(layers: &[&[(&str, &[u8])]]) -> TestImage {
        let layers: Vec<Vec<u8>> = layers.iter().map(|files| tar(files)).collect();
        let diff_ids: Vec<String> = layers.iter().map(|l| sha256(l)).collect();
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }))
        .expect("JSON");
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": sha256(&config),
                "size": config.len(),
            },
            "layers": layers.iter().map(|l| serde_json::json!({
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": sha256(l),
                "size": l.len(),
            })).collect::<Vec<_>>(),
        }))
        .expect("JSON");
        TestImage {
            layers,
            config,
            manifest,
        }
    }

    /// A one-layer image with one file of `size` bytes of `fill`, named `name`.
    pub fn with_file(name: &str, size: usize, fill: u8) -> TestImage {
        let contents = vec![fill; size];
        TestImage::new(&[&[(name, contents.as_slice())]])
    }

    /// The manifest's digest (`sha256:...`).
    pub fn digest(&self) -> String {
        sha256(&self.manifest)
    }

    /// The layers' total size, as the manifest says it.
    pub fn layer_bytes(&self) -> usize {
        self.layers.iter().map(Vec::len).sum()
    }

    /// Writes the image as an OCI layout in `dir`.
    pub fn write_layout(&self, dir: &Path) -> Result<PathBuf> {
        let blobs = dir.join("blobs/sha256");
        fs::create_dir_all(&blobs)?;
        for blob in self.layers.iter().chain([&self.config, &self.manifest]) {
            let name = sha256(blob);
            fs::write(blobs.join(name.trim_start_matches("sha256:")), blob)?;
        }
        fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#)?;
        let index = serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": self.digest(),
                "size": self.manifest.len(),
            }],
        });
        fs::write(dir.join("index.json"), index.to_string())?;
        Ok(dir.to_path_buf())
    }
}

/// A ustar archive of regular files (mode 0644, owned by root, time 0).
fn tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, contents) in files {
        let mut header = [0u8; 512];
        header[..name.len()].copy_from_slice(name.as_bytes());
        let octal = |field: &mut [u8], value: u64| {
            let text = format!("{value:0width$o}\0", width = field.len() - 1);
            field.copy_from_slice(text.as_bytes());
        };
        octal(&mut header[100..108], 0o644);
        octal(&mut header[108..116], 0);
        octal(&mut header[116..124], 0);
        octal(&mut header[124..136], contents.len() as u64);
        octal(&mut header[136..148], 0);
        header[156] = b'0';
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        header[148..156].copy_from_slice(b"        ");
        let sum: u64 = header.iter().map(|b| u64::from(*b)).sum();
        let text = format!("{sum:06o}\0 ");
        header[148..156].copy_from_slice(text.as_bytes());
        out.write_all(&header).expect("memory");
        out.write_all(contents).expect("memory");
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tar_headers_are_ustar() {
        let t = tar(&[("hello.txt", b"hi\n")]);
        assert_eq!(t.len(), 512 + 512 + 1024);
        assert_eq!(&t[257..262], b"ustar");
        // the checksum counts the checksum field as spaces
        let mut h = t[..512].to_vec();
        h[148..156].copy_from_slice(b"        ");
        let sum: u64 = h.iter().map(|b| u64::from(*b)).sum();
        assert_eq!(
            std::str::from_utf8(&t[148..154]).unwrap(),
            format!("{sum:06o}")
        );
        assert_eq!(&t[512..515], b"hi\n");
    }
}
