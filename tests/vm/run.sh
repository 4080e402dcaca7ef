#!/usr/bin/env bash
# Runs the qemu VM suite, or the named scenarios (test names or parts of them), e.g.
#   tests/vm/run.sh                      # everything but the full power-cut sequence
#   tests/vm/run.sh selftest_ostree      # one scenario
#   tests/vm/run.sh powercut_full        # the full power-cut sequence (two VMs, ~30 min)
#   tests/vm/run.sh stop_                # SIGTERM at every failpoint (two VMs, about an hour)
# Builds or reuses the images (tests/vm/build-image.sh), builds the harness, then boots at most
# $MCO_VM_PARALLEL VMs at a time (default 2: one core each). Nothing is built while VMs run.
# Console logs: $MCO_VM_CACHE/logs/<vm>/boot<N>.log (default tests/vm/.cache). Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."

tests/vm/build-image.sh
# the harness, and the binaries the scenarios install into the guests; the power-cut scenarios
# install the agent built with its failpoints, kept under its own name (cargo writes both
# builds to the same path). With MCO_VM_BIN_DIR set, the caller built the binaries and copied
# them there (tests/run.sh does, so that the suite can run beside other stages' builds, which
# rewrite target/debug/mco-agent with other features).
cargo build -q -p mco-vm-tests --tests
if [ -n "${MCO_VM_BIN_DIR:-}" ]; then
  for b in mco-agent mco-agent-failpoints mco-firstboot mco-sysroot-status mco-companion mco-test-rpmostreed; do
    [ -x "$MCO_VM_BIN_DIR/$b" ] || { echo "tests/vm/run.sh: MCO_VM_BIN_DIR=$MCO_VM_BIN_DIR has no $b" >&2; exit 1; }
  done
else
  bin=${CARGO_TARGET_DIR:-target}/debug
  cargo build -q -p mco-agent --features failpoints --bins
  install -m755 "$bin/mco-agent" "$bin/mco-agent-failpoints"
  cargo build -q -p mco-agent -p mco-firstboot -p mco-sysroot-status -p mco-companion -p mco-test-support --bins
fi
# Left out of the default run, by name (run them by name): the long power-cut sequence, the
# SIGTERM scenarios (agent/tests/stop.rs covers every step without a VM in tests/run.sh), and three
# harness self-tests that every agent scenario goes through anyway (a boot to multi-user with
# 9p and host servers, the rpm-ostree stand-in on the system bus, a staged pivot with a kernel
# argument); they are for working on the harness. The whole test run has a 30-minute budget.
if [ $# -eq 0 ]; then
  set -- -E 'not test(/^(powercut_full|stop_)/) and not test(/^selftest_(boots_to_multi_user|rpmostree_standin|ostree_staged_pivot)/)'
fi
exec cargo nextest run -p mco-vm-tests --run-ignored only --no-fail-fast \
  --test-threads="${MCO_VM_PARALLEL:-2}" "$@"
