//! A private `dbus-daemon` of type "system" for tests.
//!
//! Each [`PrivateBus`] runs its own `dbus-daemon --nofork` with a generated configuration in a
//! temporary directory: a `system`-type bus listening on a unix socket there, EXTERNAL
//! authentication, and a default policy that lets every connection own any name and talk to any
//! peer. The daemon is killed and the directory removed on drop.
//!
//! Clients reach it through [`PrivateBus::address`]; code under test that calls
//! `zbus::Connection::system()` finds it when `DBUS_SYSTEM_BUS_ADDRESS` is set to that address
//! (pass it to child processes with [`PrivateBus::env`], or use [`PrivateBus::connect`] in-process).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// How long the daemon may take to print its address before we give up.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running private system-type bus. Killed on drop.
#[derive(Debug)]
pub struct PrivateBus {
    child: Child,
    address: String,
    dir: tempfile::TempDir,
}

impl PrivateBus {
    /// Starts `dbus-daemon` and waits until it listens.
    pub fn start() -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("mco-test-dbus.")
            .tempdir()
            .context("creating a directory for the private bus")?;
        let socket = dir.path().join("system_bus_socket");
        let config = dir.path().join("system.conf");
        std::fs::write(&config, config_xml(&socket))
            .with_context(|| format!("writing {}", config.display()))?;

        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .arg("--nofork")
            .arg("--nopidfile")
            .arg("--print-address=1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // A system-type bus run by root complains it cannot raise the fd limit: harmless.
            .stderr(Stdio::null())
            .spawn()
            .context(
                "starting dbus-daemon (is the dbus-daemon package installed? see tests/setup.sh)",
            )?;

        let stdout = child.stdout.take().context("dbus-daemon stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let res = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send(res);
        });
        let address = match rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(Ok(line)) if !line.trim().is_empty() => line.trim().to_string(),
            Ok(Ok(_)) => {
                let status = child.wait().ok();
                bail!("dbus-daemon exited without printing its address (status {status:?})")
            }
            Ok(Err(e)) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e).context("reading the dbus-daemon address");
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("dbus-daemon did not print its address within {STARTUP_TIMEOUT:?}")
            }
        };
        Ok(Self {
            child,
            address,
            dir,
        })
    }

    /// The bus address, e.g. `unix:path=/tmp/mco-test-dbus.XXXX/system_bus_socket,guid=...`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The directory holding the socket and the configuration.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The environment a child process needs to use this bus as its system bus.
    pub fn env(&self) -> [(&'static str, String); 1] {
        [("DBUS_SYSTEM_BUS_ADDRESS", self.address.clone())]
    }

    /// A new client connection to this bus.
    pub async fn connect(&self) -> Result<zbus::Connection> {
        zbus::connection::Builder::address(self.address.as_str())
            .context("parsing the private bus address")?
            // a call nobody answers fails the test, naming the method, instead of hanging it
            .method_timeout(Duration::from_secs(60))
            .build()
            .await
            .with_context(|| format!("connecting to the private bus at {}", self.address))
    }

    /// Waits until a connection owns `name` on this bus (a service started as a process has
    /// taken its name), up to `timeout`.
    pub async fn wait_for_name(&self, name: &str, timeout: Duration) -> Result<()> {
        let conn = self.connect().await?;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await?;
        let bus_name = zbus::names::BusName::try_from(name)
            .with_context(|| format!("{name:?} is not a bus name"))?;
        let deadline = std::time::Instant::now() + timeout;
        while !dbus.name_has_owner(bus_name.clone()).await? {
            if std::time::Instant::now() > deadline {
                bail!("nobody took the name {name} on the private bus within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The generated bus configuration: a system bus that trusts everyone who can reach the socket.
fn config_xml(socket: &Path) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_type="method_return"/>
    <allow send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="signal"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
  </policy>
</busconfig>
"#,
        socket = xml_escape(&socket.display().to_string())
    )
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Waits until the object server of `conn` answers method calls; call it after serving objects
/// and before taking a bus name. zbus starts the object server of an existing connection in a
/// task that subscribes to method calls only when it first runs, and a call that arrives
/// before is dropped: its caller waits for a reply that never comes (seen under load as a
/// client's first call to a stand-in hanging). A `Peer.Ping` to the connection itself is
/// answered once the subscription exists; the pings sent before it are the ones dropped.
///
/// A system bus whose policy denies method calls to a connection that owns no name yet (a VM
/// guest's real dbus-daemon, with the stand-in's policy file) refuses the ping: there the check
/// cannot be made, and this returns at once (the race needs a client calling within
/// microseconds of the name being taken, which the private test buses' clients do).
pub async fn object_server_ready(conn: &zbus::Connection) -> Result<()> {
    let me = conn
        .unique_name()
        .context("a bus connection without a unique name")?
        .to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ping = conn.call_method(
            Some(me.clone()),
            "/",
            Some("org.freedesktop.DBus.Peer"),
            "Ping",
            &(),
        );
        match tokio::time::timeout(Duration::from_millis(100), ping).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(zbus::Error::MethodError(name, _, _)))
                if name.as_str() == "org.freedesktop.DBus.Error.AccessDenied" =>
            {
                return Ok(());
            }
            Ok(Err(e)) => return Err(e).context("pinging our own object server"),
            Err(_) if std::time::Instant::now() < deadline => {}
            Err(_) => bail!("the object server did not answer a ping within 30 s"),
        }
    }
}

/// The socket path inside a `unix:path=...` address, if it is one.
pub fn socket_path(address: &str) -> Option<PathBuf> {
    let rest = address.strip_prefix("unix:")?;
    rest.split(',')
        .find_map(|kv| kv.strip_prefix("path="))
        .map(PathBuf::from)
}
