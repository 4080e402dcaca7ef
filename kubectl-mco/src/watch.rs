//! `--watch`: print the fleet, then again each time what is printed would change. A watch on
//! pools, Nodes and MachineConfigNodes wakes it; each wake-up reads the fleet again (three
//! LISTs) and prints only when the text differs, so a Node's heartbeat redraws nothing.
//! On a terminal the screen is cleared first (a redraw); piped, each print follows the last.

use std::io::Write;

use anyhow::{Context, Result};
use futures::{StreamExt, stream};
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use mco_kube::fleet::{self, FleetStatus};
use mco_kube::objects::Node;

const CLEAR_SCREEN: &str = "\x1b[H\x1b[2J";

pub async fn run(
    client: &kube::Client,
    namespace: Option<&str>,
    terminal: bool,
    render: impl Fn(&FleetStatus) -> Result<String>,
) -> Result<()> {
    let mco = |kind: &str| {
        let gvk = GroupVersionKind::gvk(machine_config::machineconfig::GROUP, "v1", kind);
        Api::<DynamicObject>::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
    };
    let config = watcher::Config::default();
    // Only whether something changed matters; a watch error ends the plugin with it.
    let pools = watcher(mco("MachineConfigPool"), config.clone()).map(|e| e.map(drop));
    let mcns = watcher(mco("MachineConfigNode"), config.clone()).map(|e| e.map(drop));
    let nodes = watcher(Api::<Node>::all(client.clone()), config).map(|e| e.map(drop));
    let mut changes = stream::select_all([pools.boxed(), mcns.boxed(), nodes.boxed()]);

    let mut last = String::new();
    loop {
        let status = fleet::read(client, namespace).await?;
        let text = render(&status)?;
        if text != last {
            let mut out = std::io::stdout().lock();
            if terminal {
                out.write_all(CLEAR_SCREEN.as_bytes())?;
            } else if !last.is_empty() {
                out.write_all(b"\n")?;
            }
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .context("writing to stdout")?;
            last = text;
        }
        match changes.next().await {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(e).context("watching pools, nodes and machineconfignodes"),
            None => return Ok(()),
        }
    }
}
