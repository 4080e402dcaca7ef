//! `mco-test-rpmostreed --sysroot DIR`: the rpm-ostree stand-in (see the library's `rpmostreed`
//! module), on the bus named by `DBUS_SYSTEM_BUS_ADDRESS` (or the system bus).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use mco_test_support::rpmostreed::{Config, run};

#[derive(Debug, Parser)]
#[command(
    name = "mco-test-rpmostreed",
    about = "rpm-ostree stand-in over a real ostree sysroot"
)]
struct Args {
    /// The ostree sysroot: `/` on a booted system, a directory in tests.
    #[arg(long)]
    sysroot: PathBuf,
    /// Where transaction sockets go (default: a fresh directory under $TMPDIR).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    /// Lines of `IMAGE REV` mapping container image references (the whole ostree reference or
    /// the image name) to local ostree revisions. Without an entry, an image pinned by digest
    /// maps to the ref `mco-image/sha256/<hex>`; anything else fails the transaction.
    #[arg(long)]
    image_map: Option<PathBuf>,
    /// A registry host that refuses pulls unless `/run/ostree/auth.json` under --auth-root
    /// holds credentials for it (repeatable).
    #[arg(long, value_name = "REGISTRY")]
    auth_required: Vec<String>,
    /// The root whose `/run/ostree/auth.json` holds the pull credentials (default: the sysroot).
    #[arg(long)]
    auth_root: Option<PathBuf>,
    /// Test knob: every transaction pretends to download for this long (e.g. `2s`, `500ms`).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    txn_delay: Duration,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let (run_dir, _tmp) = match args.run_dir {
        Some(d) => (d, None),
        None => {
            let t = tempfile::Builder::new()
                .prefix("mco-test-rpmostreed.")
                .tempdir()?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let auth = mco_test_support::rpmostreed::auth::RegistryAuth {
        root: args.auth_root.unwrap_or_else(|| args.sysroot.clone()),
        required: args.auth_required,
    };
    run(Config {
        auth,
        sysroot: args.sysroot,
        run_dir,
        image_map: args.image_map,
        txn_delay: args.txn_delay,
        peer_setup_delay: Duration::ZERO,
    })
    .await
}
