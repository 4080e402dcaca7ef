//! Installs the agent cargo built into a booted guest, laid out as the RPM lays it out, except
//! that the binaries go under /usr/local (on the ostree disk /usr is read-only and /usr/local is
//! /var/usrlocal, which survives OS pivots, as on Fedora CoreOS). The units are the real ones
//! from `units/`, with a drop-in that points ExecStart at /usr/local.

use std::path::PathBuf;

use anyhow::{Context, Result, ensure};

use crate::images;
use crate::vm::{GUEST_SHARE, Vm};

/// The ostree disk's OS commits `debian/mco/a` and `debian/mco/b` as container image references
/// (an `osImageURL`): the rpm-ostree stand-in's image map resolves them to the local commits.
pub const OS_IMAGE_A: &str =
    "quay.io/mco-vmtest/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub const OS_IMAGE_B: &str =
    "quay.io/mco-vmtest/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// The agent built with `--features failpoints`, beside the other binaries (tests/vm/run.sh
/// copies it there: cargo puts both builds at the same path).
pub const FAILPOINTS_AGENT: &str = "mco-agent-failpoints";

/// (binary, directory under /usr/local, unit whose ExecStart runs it)
const BINARIES: [(&str, &str, &str); 2] = [
    ("mco-agent", "bin", "mco-agent.service"),
    ("mco-firstboot", "libexec", "mco-firstboot.service"),
];

/// The sysroot reader `mco-agent status` runs, unit-less: in /usr/local/libexec, where the agent
/// in /usr/local/bin looks for it (`../libexec/` beside itself), as the RPM's /usr/libexec.
const SYSROOT_READER: &str = "mco-sysroot-status";

/// Where cargo put the binaries: `$MCO_VM_BIN_DIR`, else `$CARGO_TARGET_DIR/debug`, else
/// `target/debug` (tests/vm/run.sh builds them before any VM boots).
pub fn binary_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MCO_VM_BIN_DIR") {
        return PathBuf::from(dir);
    }
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| images::workspace_dir().join("target"))
        .join("debug")
}

impl Vm {
    /// Installs `mco-agent`, `mco-firstboot` and `mco-sysroot-status` under /usr/local, the units
    /// (not enabled) and the tmpfiles (applied), then reloads systemd.
    pub fn install_agent(&mut self) -> Result<()> {
        self.install_agent_binary("mco-agent")
    }

    /// Like [`Vm::install_agent`], with the agent built with its failpoints
    /// ([`FAILPOINTS_AGENT`], which tests/vm/run.sh builds): `FAILPOINTS` in its environment
    /// arms them.
    pub fn install_agent_with_failpoints(&mut self) -> Result<()> {
        self.install_agent_binary(FAILPOINTS_AGENT)
    }

    fn install_agent_binary(&mut self, agent: &str) -> Result<()> {
        let staging = self.share().join("mco");
        let units = images::workspace_dir().join("units");
        std::fs::create_dir_all(staging.join("bin"))?;
        std::fs::create_dir_all(staging.join("units"))?;
        let bins = binary_dir();
        let names = BINARIES.iter().map(|(name, _, _)| *name);
        for name in names.chain([SYSROOT_READER]) {
            let built = if name == "mco-agent" { agent } else { name };
            let from = bins.join(built);
            ensure!(
                from.is_file(),
                "{}: missing (tests/vm/run.sh builds it)",
                from.display()
            );
            std::fs::copy(&from, staging.join("bin").join(name))
                .with_context(|| format!("copying {}", from.display()))?;
        }
        for name in [
            "mco-agent.service",
            "mco-firstboot.service",
            "mco-agent.conf",
        ] {
            std::fs::copy(units.join(name), staging.join("units").join(name))
                .with_context(|| format!("copying units/{name}"))?;
        }
        let mut script = String::from("set -e\n");
        for (name, dir, unit) in BINARIES {
            script.push_str(&format!(
                "install -D -m755 {GUEST_SHARE}/mco/bin/{name} /usr/local/{dir}/{name}\n\
                 install -m644 {GUEST_SHARE}/mco/units/{unit} /etc/systemd/system/{unit}\n\
                 mkdir -p /etc/systemd/system/{unit}.d\n\
                 printf '[Service]\\nExecStart=\\nExecStart=%s\\n' \
                   \"$(sed -n 's|^ExecStart=/usr/{dir}/|/usr/local/{dir}/|p' /etc/systemd/system/{unit})\" \
                   > /etc/systemd/system/{unit}.d/50-usr-local.conf\n"
            ));
        }
        script.push_str(&format!(
            "install -D -m755 {GUEST_SHARE}/mco/bin/{SYSROOT_READER} /usr/local/libexec/{SYSROOT_READER}\n\
             install -m644 {GUEST_SHARE}/mco/units/mco-agent.conf /etc/tmpfiles.d/mco-agent.conf\n\
             systemd-tmpfiles --create /etc/tmpfiles.d/mco-agent.conf\n\
             systemctl daemon-reload\n"
        ));
        self.run(&script)
            .context("installing the agent in the guest")?;
        for (_, dir, unit) in BINARIES {
            let exec = self.run(&format!("systemctl show -P ExecStart {unit}"))?;
            ensure!(
                exec.contains(&format!("path=/usr/local/{dir}/")),
                "{unit}: ExecStart not redirected to /usr/local: {exec}"
            );
        }
        Ok(())
    }

    /// Installs and starts the rpm-ostree stand-in `mco-test-rpmostreed --sysroot /` as
    /// `rpm-ostreed.service` on the guest's system bus (ostree disk only: it serves the booted
    /// sysroot), with [`OS_IMAGE_A`] and [`OS_IMAGE_B`] in its image map.
    pub fn install_rpmostree_standin(&mut self) -> Result<()> {
        let staging = self.share().join("standin");
        std::fs::create_dir_all(&staging)?;
        let binary = binary_dir().join("mco-test-rpmostreed");
        ensure!(
            binary.is_file(),
            "{}: missing (cargo build -p mco-test-support --bins)",
            binary.display()
        );
        std::fs::copy(&binary, staging.join("mco-test-rpmostreed"))?;
        std::fs::write(
            staging.join("image-map"),
            format!("{OS_IMAGE_A} debian/mco/a\n{OS_IMAGE_B} debian/mco/b\n"),
        )?;
        let files = images::harness_dir().join("standin");
        for name in ["rpm-ostreed.service", "org.projectatomic.rpmostree1.conf"] {
            std::fs::copy(files.join(name), staging.join(name))
                .with_context(|| format!("copying tests/vm/standin/{name}"))?;
        }
        self.run(&format!(
            "set -e\n\
             install -D -m755 {GUEST_SHARE}/standin/mco-test-rpmostreed /usr/local/bin/mco-test-rpmostreed\n\
             install -m644 {GUEST_SHARE}/standin/org.projectatomic.rpmostree1.conf /etc/dbus-1/system.d/\n\
             install -m644 {GUEST_SHARE}/standin/rpm-ostreed.service /etc/systemd/system/\n\
             install -D -m644 {GUEST_SHARE}/standin/image-map /etc/mco-vmtest/image-map\n\
             systemctl reload dbus\n\
             systemctl daemon-reload\n\
             systemctl enable --now rpm-ostreed.service\n"
        ))
        .context("installing the rpm-ostree stand-in in the guest")?;
        Ok(())
    }

    /// Enables and starts `mco-agent.service` (Type=notify: `systemctl` returns once the agent
    /// said READY=1) and checks that it runs.
    pub fn start_agent_unit(&mut self) -> Result<()> {
        let started = self.exec("systemctl enable --now mco-agent.service")?;
        // key=value lines, in systemd's order
        let state =
            self.run("systemctl show -p ActiveState -p SubState -p NRestarts mco-agent.service")?;
        let mut state: Vec<&str> = state.lines().collect();
        state.sort_unstable();
        ensure!(
            started.success() && state == ["ActiveState=active", "NRestarts=0", "SubState=running"],
            "mco-agent.service did not start ({}, {state:?}):\n{}",
            started.stderr.trim(),
            self.run("journalctl -b -u mco-agent.service -o cat | tail -40")?
        );
        Ok(())
    }
}

impl Vm {
    /// Makes the booted deployment one deployed from the container image `image` (its origin's
    /// `container-image-reference`), as on a node installed from an OS image: the disk's commits
    /// are deployed from ostree refs. Call before the rpm-ostree stand-in starts (it reads the
    /// origins when it loads the sysroot).
    pub fn booted_from_image(&mut self, image: &str) -> Result<()> {
        self.run(&format!(
            "set -e\n\
             d=$(ostree admin status | sed -n 's/^\\* debian \\([0-9a-f]*\\.[0-9]*\\).*/\\1/p')\n\
             test -n \"$d\"\n\
             mount -o remount,rw /sysroot 2>/dev/null || true\n\
             printf '[origin]\\ncontainer-image-reference=ostree-unverified-registry:{image}\\n' \
               > /ostree/deploy/debian/deploy/$d.origin\n"
        ))
        .context("recording the booted deployment's origin as an image")?;
        Ok(())
    }

    /// Has the rpm-ostree stand-in refuse pulls from `registry` unless `/run/ostree/auth.json`
    /// holds credentials for it (`--auth-required`), as a registry that needs the cluster's pull
    /// secret does; restarts it.
    pub fn standin_requires_auth(&mut self, registry: &str) -> Result<()> {
        // The packaged stand-in unit's command line (tests/vm/standin/rpm-ostreed.service), plus
        // the flag.
        self.run(&format!(
            "set -e\n\
             mkdir -p /etc/systemd/system/rpm-ostreed.service.d\n\
             printf '[Service]\\nExecStart=\\nExecStart=/usr/local/bin/mco-test-rpmostreed \
               --sysroot / --run-dir /run/rpm-ostreed --image-map /etc/mco-vmtest/image-map \
               --auth-required {registry}\\n' \
               > /etc/systemd/system/rpm-ostreed.service.d/50-auth-required.conf\n\
             systemctl daemon-reload\n\
             systemctl restart rpm-ostreed.service\n\
             systemctl show -P ExecStart rpm-ostreed.service | grep -q -- '--auth-required {registry}'\n"
        ))
        .context("making the rpm-ostree stand-in require registry credentials")?;
        Ok(())
    }
}
