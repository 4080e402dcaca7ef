#!/usr/bin/env bash
# Benchmark: the companion's leader failover (tests/cluster/examples/failover.rs). Three
# replicas against the API test server with the cluster tier's leader election timings (lease
# 6 s, renew deadline 4 s, retry period 1 s); RUNS times the leader is SIGKILLed (the Lease must
# expire) and, after it, the new leader gets SIGTERM (it releases the Lease); prints the time
# until another replica holds the Lease, each run and the spread.
#
#   tests/bench/failover.sh [RUNS]     (default 10)
#
# A debug build: the handover waits on the timings, not on CPU.
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${1:-10}
export CARGO_PROFILE_DEV_DEBUG=0
cargo build -q -p mco-cluster-tests --bins --example failover
bin=${CARGO_TARGET_DIR:-$PWD/target}/debug
echo "$(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$bin/examples/failover" \
  --companion-bin "$bin/e2e-mco-companion" \
  --apiserver-bin "$bin/e2e-mco-test-apiserver" \
  --runs "$runs"
