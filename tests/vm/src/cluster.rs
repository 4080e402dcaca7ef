//! Cluster-side test servers on the host that guests reach through qemu's user network: the
//! guest sees the host's loopback at 10.0.2.2, so a server listens on 127.0.0.1 and its
//! certificate and kubeconfigs name 10.0.2.2.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use mco_test_support::apiserver::{ServerOptions, TestApiServer};

use crate::vm::HOST_FROM_GUEST;

/// A Kubernetes API test server (HTTPS) for guests: kubeconfigs it writes point at
/// `https://10.0.2.2:PORT`, which its certificate covers.
pub fn api_server_for_guests() -> Result<TestApiServer> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    TestApiServer::start_with(ServerOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        extra_names: vec![HOST_FROM_GUEST.to_string()],
        server_url: Some(format!("https://{HOST_FROM_GUEST}:{port}")),
        ..ServerOptions::default()
    })
    .context("starting the Kubernetes API test server for guests")
}
