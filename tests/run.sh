#!/usr/bin/env bash
# The project's test command (README): installs what is missing, then runs every test tier.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/setup.sh

# The Debian rootfs the nspawn-tier tests boot (systemd, logind, journald in a container);
# a no-op when current. The tests would build it themselves, but one at a time under a lock.
tests/vm/build-image.sh rootfs

# Unit and integration tests (real ostree, dbus-daemon, Ignition, kubectl; see README "What is real").
cargo nextest run --workspace --all-targets --no-fail-fast
cargo test --workspace --doc
# The API docs build without a warning (broken, private or ambiguous intra-doc links): ~15 s warm.
RUSTDOCFLAGS="-D warnings" cargo doc -q --workspace --no-deps

# The README's main job: the companion, the agent and status on a sandbox root (target/demo/).
examples/demo.sh >target/demo.out 2>&1 || { tail -n 40 target/demo.out; exit 1; }

# Crash safety: the agent built with its failpoints, killed with SIGKILL at every update step.
cargo nextest run -p mco-agent --features failpoints --test crash_safety --no-fail-fast

# Packaging: units (systemd-analyze verify), SELinux module linked into the full reference
# policy, RPM build and install, Containerfile inputs.
tests/packaging.sh

# qemu (TCG) VM suite: real systemd, journald, logind, ostree in a booted Debian guest; after the
# cargo tests so that no build competes with the VMs for the cores (tests/vm/README.md).
tests/vm/run.sh
