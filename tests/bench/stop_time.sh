#!/usr/bin/env bash
# How long `mco-agent start` takes to exit after SIGTERM at each step of an update, with a large
# config (MCO_STOP_BENCH_FILES files of MCO_STOP_BENCH_KIB KiB, default 8 of 64 KiB, every
# file changed by the update): the agent built with its failpoints is held at each step
# (`return(hold)`), sent SIGTERM, and timed until it exits; it then converges after a restart
# (agent/tests/stop.rs, `stop_time_at_every_step_with_a_large_config`). Prints one line per step
# and the longest, which the unit's TimeoutStopSec is sized from (docs/daemon.md). Runs twice
# (MCO_STOP_BENCH_RUNS) and keeps every line.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${MCO_STOP_BENCH_RUNS:-2}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for run in $(seq "$runs"); do
  cargo nextest run -p mco-agent --features failpoints --test stop --run-ignored only \
    -E 'test(stop_time_at_every_step_with_a_large_config)' --no-capture 2>/dev/null \
    | grep '^stop-time ' | sed "s/^/run $run: /" | tee -a "$out"
done
[ -s "$out" ] || { echo "no stop-time lines: the benchmark did not run" >&2; exit 1; }
sort -k4 -g "$out" | tail -n 1 | sed 's/^/longest: /'
