//! `mco-test-apiserver --listen ADDR --kubeconfig-out FILE [--http] [--rbac] [--seed FILE]...
//! [--latency DURATION] [--write-latency DURATION]`: the Kubernetes API test server as a
//! process, until SIGINT or SIGTERM (SIGUSR1 drops every open watch). It prints its URL on
//! stdout once every requested file is written.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use mco_test_support::apiserver::{
    AuthorizationMode, Credential, Identity, ServerOptions, TestApiServer,
};

#[derive(Parser, Debug)]
#[command(version, about = "In-memory Kubernetes API server for tests")]
struct Args {
    /// Address to listen on, e.g. 127.0.0.1:6443 (port 0 picks one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write an admin kubeconfig (user `admin` in `system:masters`).
    #[arg(long)]
    kubeconfig_out: PathBuf,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    http: bool,
    /// Authorize with the Node authorizer and RBAC, and run NodeRestriction admission
    /// (default: every authenticated request is allowed).
    #[arg(long)]
    rbac: bool,
    /// Serve requests without credentials as `system:anonymous` (`true`/`false`; default:
    /// only over plain HTTP).
    #[arg(long)]
    anonymous_auth: Option<bool>,
    /// Append every authorization decision to FILE as JSON lines.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Extra certificate names (DNS names or IP addresses).
    #[arg(long = "san")]
    sans: Vec<String>,
    /// Server URL to write into kubeconfigs (when clients reach the server by another address).
    #[arg(long)]
    server_url: Option<String>,
    /// How long deleted or evicted pods stay terminating, e.g. `2s`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    pod_termination_delay: Duration,
    /// Manifests (YAML or JSON, multi-document, Lists) to load at start; repeatable.
    #[arg(long = "seed")]
    seeds: Vec<PathBuf>,
    /// A kubeconfig with a token for USER: `USER=FILE`; repeatable. Groups: those given with
    /// --user-groups, else those the name implies (system:node:NAME, system:serviceaccount:NS:NAME).
    #[arg(long = "user-kubeconfig", value_name = "USER=FILE")]
    user_kubeconfigs: Vec<String>,
    /// The groups of USER's credentials: `USER=GROUP[,GROUP...]`; repeatable.
    #[arg(long = "user-groups", value_name = "USER=GROUPS")]
    user_groups: Vec<String>,
    /// A kubeconfig with a client certificate for USER (CN=USER, O=its group), as kubelets
    /// have: `USER=FILE`; repeatable.
    #[arg(long = "cert-kubeconfig", value_name = "USER=FILE")]
    cert_kubeconfigs: Vec<String>,
    /// A kubelet's kubeconfig for node NAME (client certificate for `system:node:NAME` in
    /// `system:nodes`): `NAME=FILE`; repeatable.
    #[arg(long = "node-kubeconfig", value_name = "NAME=FILE")]
    node_kubeconfigs: Vec<String>,
    /// A kubeconfig with the token of a service account: `NAMESPACE/NAME=FILE`; repeatable.
    #[arg(long = "serviceaccount-kubeconfig", value_name = "NAMESPACE/NAME=FILE")]
    serviceaccount_kubeconfigs: Vec<String>,
    /// Where to write the server's CA certificate (PEM).
    #[arg(long, value_name = "FILE")]
    ca_out: Option<PathBuf>,
    /// Where to write the CA that signs client certificates (PEM).
    #[arg(long, value_name = "FILE")]
    client_ca_out: Option<PathBuf>,
    /// Added to every request before it is served (a watch: before it starts), e.g. `5ms`: an
    /// API server across a link with that round trip.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    latency: Option<Duration>,
    /// Added to every write (POST, PUT, PATCH, DELETE) on top of --latency, e.g. `20ms`: an
    /// API server whose etcd commits slowly.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    write_latency: Option<Duration>,
}

fn split_entry<'a>(flag: &str, entry: &'a str) -> Result<(&'a str, &'a Path)> {
    let (key, file) = entry
        .rsplit_once('=')
        .filter(|(key, file)| !key.is_empty() && !file.is_empty())
        .with_context(|| format!("--{flag} {entry:?}: expected KEY=FILE"))?;
    Ok((key, Path::new(file)))
}

impl Args {
    /// The identity of USER: explicit groups from --user-groups, else the implied ones.
    fn identity(&self, user: &str) -> Result<Identity> {
        for entry in &self.user_groups {
            let (name, groups) = entry
                .split_once('=')
                .with_context(|| format!("--user-groups {entry:?}: expected USER=GROUPS"))?;
            if name == user {
                let groups: Vec<&str> = groups.split(',').filter(|g| !g.is_empty()).collect();
                return Ok(Identity::new(user, &groups));
            }
        }
        Ok(Identity::for_user(user))
    }

    fn write_credentials(&self, server: &TestApiServer) -> Result<()> {
        server.write_kubeconfig(&self.kubeconfig_out, "admin")?;
        for entry in &self.user_kubeconfigs {
            let (user, file) = split_entry("user-kubeconfig", entry)?;
            server.write_identity_kubeconfig(file, &self.identity(user)?, Credential::Token)?;
        }
        for entry in &self.cert_kubeconfigs {
            let (user, file) = split_entry("cert-kubeconfig", entry)?;
            server
                .write_identity_kubeconfig(
                    file,
                    &self.identity(user)?,
                    Credential::ClientCertificate,
                )
                .with_context(|| format!("--cert-kubeconfig {entry:?}"))?;
        }
        for entry in &self.node_kubeconfigs {
            let (node, file) = split_entry("node-kubeconfig", entry)?;
            server.write_node_kubeconfig(file, node)?;
        }
        for entry in &self.serviceaccount_kubeconfigs {
            let (account, file) = split_entry("serviceaccount-kubeconfig", entry)?;
            let (ns, name) = account.split_once('/').with_context(|| {
                format!("--serviceaccount-kubeconfig {entry:?}: expected NAMESPACE/NAME=FILE")
            })?;
            server.write_service_account_kubeconfig(file, ns, name)?;
        }
        for (file, pem, what) in [
            (&self.ca_out, server.ca_pem(), "--ca-out"),
            (
                &self.client_ca_out,
                server.client_ca_pem(),
                "--client-ca-out",
            ),
        ] {
            if let Some(file) = file {
                let pem = pem.with_context(|| format!("{what}: there is no CA over plain HTTP"))?;
                std::fs::write(file, pem).with_context(|| format!("writing {file:?}"))?;
            }
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let server = TestApiServer::start_with(ServerOptions {
        listen: args.listen,
        tls: !args.http,
        extra_names: args.sans.clone(),
        server_url: args.server_url.clone(),
        pod_termination_delay: args.pod_termination_delay,
        authorization: if args.rbac {
            AuthorizationMode::NodeRbac
        } else {
            AuthorizationMode::AlwaysAllow
        },
        anonymous: args.anonymous_auth,
        audit_log: args.audit_log.clone(),
        ..ServerOptions::default()
    })?;
    if let Some(latency) = args.latency {
        server.faults().delay("*", "*", latency, None);
    }
    if let Some(latency) = args.write_latency {
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            server.faults().delay(method, "*", latency, None);
        }
    }
    for seed in &args.seeds {
        let text = std::fs::read_to_string(seed).with_context(|| format!("reading {seed:?}"))?;
        let count = server
            .seed_manifests(&text)
            .with_context(|| format!("loading {seed:?}"))?;
        eprintln!("loaded {count} objects from {}", seed.display());
    }
    args.write_credentials(&server)?;
    println!("{}", server.url());
    eprintln!(
        "mco-test-apiserver: serving {} (kubeconfig {})",
        server.url(),
        args.kubeconfig_out.display()
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        // SIGUSR1 ends every open watch (clients must re-watch), as an API server restart or a
        // load balancer dropping connections would: what a test of watch recovery needs.
        let mut drop_watches = signal(SignalKind::user_defined1())?;
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = drop_watches.recv() => {
                    eprintln!("mco-test-apiserver: SIGUSR1: dropping every watch");
                    server.faults().drop_watches();
                }
            }
        }
        anyhow::Ok(())
    })?;
    drop(server);
    Ok(())
}
