#!/usr/bin/env bash
# Benchmark, never part of the test run: the scale harness (tests/cluster/examples/scale.rs).
# The API test server with RBAC from the shipped manifests and 1,000 Node objects in two pools
# (worker 900, infra 100), mco-companion serve --controller, a real `mco-agent start` for every
# node (each on a small root of its own; no node is played by the harness); a files-only
# rollout through each pool with maxUnavailable 10%, then 10 bursts of 1,000 concurrent
# anonymous first-boot fetches of the worker pool's ~1 MiB config. Prints the time to roll each
# pool, the CPU time and RSS of the companion and of the API test server, the API requests per
# node per update of the agents and of the controller, and each burst's p50/p99 (a fetch that
# fails or takes longer than --fetch-timeout-s counts as a timeout). Nothing is asserted.
#
#   tests/bench/scale.sh [--nodes N] [--small-pool N] [--agents N] [--fetches N] [...]
#   (tests/bench/scale.sh --help lists them all)
#
# Needs root (the nodes' roots hold files owned by other users) and Ignition (tests/setup.sh).
# Release build, in a faster variant than the shipped profile (thin LTO, 16 codegen units:
# the fat-LTO build takes most of an hour on a 2-core machine) and a target directory of its
# own (SCALE_TARGET_DIR, default target/scale) so it does not disturb other builds.
set -euo pipefail
cd "$(dirname "$0")/../.."

export CARGO_PROFILE_RELEASE_LTO=${CARGO_PROFILE_RELEASE_LTO:-thin}
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}
export CARGO_TARGET_DIR=${SCALE_TARGET_DIR:-$PWD/target/scale}
nice cargo build --release -q -p mco-cluster-tests --bins --example scale
bin=$CARGO_TARGET_DIR/release

# a thousand TLS connections at once, and hundreds of agents each with its own files
ulimit -n "$(ulimit -Hn)"
# Every agent's drift monitor holds an inotify instance, and the kernel's default is 128 per
# user: with 200 agents, everything else of root's that needs inotify (the test suite, systemd
# tools) fails with "Too many open files" while the harness runs. Raised for the machine (it
# stays raised; the previous value is printed to restore it).
instances=$(cat /proc/sys/fs/inotify/max_user_instances)
if [ "$instances" -lt 1024 ]; then
  echo "fs.inotify.max_user_instances: $instances -> 1024 (restore: sysctl fs.inotify.max_user_instances=$instances)"
  sysctl -q fs.inotify.max_user_instances=1024
fi
echo "release build (lto=$CARGO_PROFILE_RELEASE_LTO, codegen-units=$CARGO_PROFILE_RELEASE_CODEGEN_UNITS) in $bin; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$bin/examples/scale" \
  --agent-bin "$bin/e2e-mco-agent" \
  --companion-bin "$bin/e2e-mco-companion" \
  --apiserver-bin "$bin/e2e-mco-test-apiserver" \
  "$@"
