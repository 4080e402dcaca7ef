//! `mco-test-apiserver --listen ADDR --kubeconfig-out FILE [--http]`: the Kubernetes API test
//! server as a process, until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use mco_test_support::apiserver::{ServerOptions, TestApiServer};

#[derive(Parser, Debug)]
#[command(version, about = "In-memory Kubernetes API server for tests")]
struct Args {
    /// Address to listen on, e.g. 127.0.0.1:6443 (port 0 picks one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write an admin kubeconfig.
    #[arg(long)]
    kubeconfig_out: PathBuf,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    http: bool,
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
    /// Also write a kubeconfig for another user: `USER=FILE`; repeatable.
    #[arg(long = "user-kubeconfig")]
    user_kubeconfigs: Vec<String>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let server = TestApiServer::start_with(ServerOptions {
        listen: args.listen,
        tls: !args.http,
        extra_names: args.sans.clone(),
        server_url: args.server_url.clone(),
        pod_termination_delay: args.pod_termination_delay,
        ..ServerOptions::default()
    })?;
    for seed in &args.seeds {
        let text = std::fs::read_to_string(seed).with_context(|| format!("reading {seed:?}"))?;
        let count = server
            .seed_manifests(&text)
            .with_context(|| format!("loading {seed:?}"))?;
        eprintln!("loaded {count} objects from {}", seed.display());
    }
    server.write_kubeconfig(&args.kubeconfig_out, "admin")?;
    for entry in &args.user_kubeconfigs {
        let (user, file) = entry
            .split_once('=')
            .with_context(|| format!("--user-kubeconfig {entry:?}: expected USER=FILE"))?;
        server.write_kubeconfig(&PathBuf::from(file), user)?;
    }
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
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        anyhow::Ok(())
    })?;
    drop(server);
    Ok(())
}
