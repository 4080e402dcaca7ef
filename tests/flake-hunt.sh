#!/usr/bin/env bash
# Repeats one test tier N times, optionally beside a CPU load, and prints every failure with the
# test's name and the run's log: the hunt for flaky tests, repeatable (not part of tests/run.sh;
# docs/testing.md "Flaky tests").
#
#   tests/flake-hunt.sh [--stress[=WORKERS]] TIER N [-- NEXTEST-ARGS...]
#     TIER          nextest       cargo nextest run --workspace --all-targets
#                   cluster       cargo nextest run -p mco-cluster-tests
#                   crash-safety  the agent with its failpoints: --test crash_safety --test stop
#                   vm            tests/vm/run.sh (the default VM suite)
#     --stress      `stress-ng --cpu WORKERS` (default 2: every core of the 2-core machine)
#                   runs beside each run, as a loaded CI machine or a neighbour's build would
#     NEXTEST-ARGS  narrow the tier, e.g. -- -E 'test(kargs_argv)' (for vm: scenario names)
#
# The tier is built once before the first run (outside the timed, loaded runs). Each run's
# output is in target/flake-hunt/TIER-TIME/run-I.log. Exit status: 0 when every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: tests/flake-hunt.sh [--stress[=WORKERS]] TIER N [-- NEXTEST-ARGS...]" >&2; exit 2; }
stress=0
case ${1:-} in
  --stress) stress=2; shift ;;
  --stress=*) stress=${1#--stress=}; shift ;;
esac
[ $# -ge 2 ] || usage
tier=$1 runs=$2
shift 2
[[ $runs =~ ^[1-9][0-9]*$ ]] || usage
[[ $stress =~ ^[0-9]+$ ]] || usage
if [ $# -gt 0 ]; then
  [ "$1" = -- ] || usage
  shift
fi
extra=("$@")

case $tier in
  nextest) cmd=(cargo nextest run --workspace --all-targets --no-fail-fast) ;;
  cluster) cmd=(cargo nextest run -p mco-cluster-tests --no-fail-fast) ;;
  crash-safety) cmd=(cargo nextest run -p mco-agent --features failpoints --test crash_safety --test stop --no-fail-fast) ;;
  vm) cmd=(tests/vm/run.sh) ;;
  *) echo "tests/flake-hunt.sh: unknown tier '$tier' (nextest, cluster, crash-safety, vm)" >&2; exit 2 ;;
esac
if [ "$stress" -gt 0 ]; then
  command -v stress-ng >/dev/null || { echo "tests/flake-hunt.sh: stress-ng is missing (tests/setup.sh installs it)" >&2; exit 1; }
fi

dir=target/flake-hunt/$tier-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$dir"
echo "flake-hunt: $tier x$runs${extra[*]:+ (${extra[*]})}, stress-ng --cpu $stress; logs in $dir"

# Built once, unloaded: a failure here is a build failure, not a flake.
if [ "$tier" != vm ]; then
  build=()
  for word in "${cmd[@]}"; do [ "$word" = --no-fail-fast ] || build+=("$word"); done
  "${build[@]}" --no-run >"$dir/build.log" 2>&1 ||
    { tail -n 30 "$dir/build.log" >&2; echo "flake-hunt: the build failed (log: $dir/build.log)" >&2; exit 1; }
fi

stress_pid=
stop_stress() {
  if [ -n "$stress_pid" ]; then
    kill -- "-$stress_pid" 2>/dev/null || true
    wait "$stress_pid" 2>/dev/null || true
    stress_pid=
  fi
}
trap stop_stress EXIT

failed_runs=0
declare -A failures=()
for i in $(seq 1 "$runs"); do
  log=$dir/run-$i.log
  if [ "$stress" -gt 0 ]; then
    setsid stress-ng --cpu "$stress" --quiet >/dev/null 2>&1 </dev/null &
    stress_pid=$!
  fi
  start=$SECONDS rc=0
  "${cmd[@]}" "${extra[@]}" >"$log" 2>&1 </dev/null || rc=$?
  took=$((SECONDS - start))
  stop_stress
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  if [ $rc -eq 0 ]; then
    echo "flake-hunt: run $i/$runs passed in $took s (load $load)"
    continue
  fi
  failed_runs=$((failed_runs + 1))
  # nextest's status lines: FAIL, TIMEOUT, SIGSEGV, SIGABRT... then [ time ] binary test
  names=$(sed -nE 's/^ *(FAIL|TIMEOUT|SIG[A-Z]+|ABORT|LEAK-FAIL) +\[[^]]*\] +(\([^)]*\) +)?(.*)$/\1 \3/p' "$log" | sort -u)
  echo "flake-hunt: run $i/$runs FAILED (exit $rc) in $took s (load $load); log: $log"
  if [ -z "$names" ]; then
    echo "  no test named a failure (a build or harness error?): the log's last lines:"
    tail -n 15 "$log" | sed 's/^/  | /'
  else
    while read -r status name; do
      echo "  $status $name"
      failures[$name]=$(( ${failures[$name]:-0} + 1 ))
    done <<<"$names"
  fi
done

echo "flake-hunt: $tier: $((runs - failed_runs)) of $runs runs passed (stress-ng --cpu $stress); logs in $dir"
for name in "${!failures[@]}"; do
  echo "  failed ${failures[$name]}x: $name"
done
[ $failed_runs -eq 0 ]
