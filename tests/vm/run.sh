#!/usr/bin/env bash
# Runs the qemu VM suite, or the named scenarios (test names or parts of them), e.g.
#   tests/vm/run.sh                      # everything
#   tests/vm/run.sh selftest_ostree      # one scenario
# Builds or reuses the images (tests/vm/build-image.sh), builds the harness, then boots at most
# $MCO_VM_PARALLEL VMs at a time (default 2: one core each). Nothing is built while VMs run.
# Console logs: $MCO_VM_CACHE/logs/<vm>/boot<N>.log (default tests/vm/.cache). Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."

tests/vm/build-image.sh
# the harness, and the binaries the scenarios install into the guests
cargo build -q -p mco-vm-tests --tests
cargo build -q -p mco-agent -p mco-firstboot -p mco-companion -p mco-test-support --bins
exec cargo nextest run -p mco-vm-tests --run-ignored only --no-fail-fast \
  --test-threads="${MCO_VM_PARALLEL:-2}" "$@"
