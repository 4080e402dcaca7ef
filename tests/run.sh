#!/usr/bin/env bash
# The project's test command (README, docs/testing.md): installs what is missing, then runs every test tier.
#
# A test whose real component is missing fails with the reason. A machine that cannot have a
# component opts out explicitly: MCO_TEST_SKIP=nspawn,journald,vm (any of them) leaves those
# tests out of the run, and this script lists them as skipped (nextest counts them skipped too).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's output goes to its own log, target/test-logs/STAGE.log (a foreground stage's is
# on the terminal too), and its wall time is printed as it ends and in a table at the end: the
# whole run has a 30-minute budget on 2 cores (docs/testing.md), and this says where it goes.
# The fuzzing smoke run (built by the build stage), the Debian images and the VM suite run in the
# background beside the others, their output in their logs only (docs/testing.md "Stage times").
# A failure names the stage and prints its log's tail.
logs=target/test-logs
timings=()
current=
declare -A bg_pid=() bg_start=()
# The CPU time (user and system, whole seconds) of the calling shell's finished children: what a
# stage cost in CPU beside its wall time (on 2 cores, two stages side by side share 2 s per second).
cpu_seconds() {
  local file
  file=$(mktemp)
  times >"$file" # a builtin in this shell: in a pipeline or $(...) it would time a subshell
  awk 'NR == 2 { total = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); total += t[1] * 60 + t[2] }
    printf "%d\n", total }' "$file"
  rm -f "$file"
}
export -f cpu_seconds
stage() {
  local name=$1 start=$SECONDS rc=0
  shift
  current=$name
  # errexit off around the pipeline (tee must not hide the status) and on inside the stage
  set +e
  ( (set -e; "$@"); rc=$?; cpu_seconds >"$logs/$name.cpu"; exit $rc ) 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -eq 0 ] || exit "$rc"
  timings+=("$(printf '%5d s  %5s s CPU  %s (target/ then: %s)' $((SECONDS - start)) \
    "$(cat "$logs/$name.cpu" 2>/dev/null)" "$name" "$(target_size)")")
  echo "tests/run.sh: stage '$name' took $((SECONDS - start)) s"
  current=
}
# bg_stage NAME COMMAND...: starts COMMAND (a program) in its own session, so that a failure
# elsewhere ends it and everything it started (qemu, fuzzers); `collect NAME` waits for it.
bg_stage() {
  local name=$1
  shift
  rm -f "$logs/$name.status"
  bg_start[$name]=$SECONDS
  setsid bash -c 'start=$SECONDS; rc=0; "$@" || rc=$?; cpu_seconds >"$0.cpu"; echo "$rc $((SECONDS - start)) $(cat "$0.cpu")" >"$0"; exit $rc' \
    "$logs/$name.status" "$@" >"$logs/$name.log" 2>&1 </dev/null &
  bg_pid[$name]=$!
  echo "tests/run.sh: stage '$name' started in the background (log: $logs/$name.log)"
}
collect() {
  local name=$1 rc=0 status= took= cpu=
  current=$name
  echo "tests/run.sh: waiting for the background stage '$name' (log: $logs/$name.log)"
  wait "${bg_pid[$name]}" || rc=$?
  unset "bg_pid[$name]"
  read -r status took cpu <"$logs/$name.status" 2>/dev/null || { status=$rc; took=$((SECONDS - bg_start[$name])); }
  timings+=("$(printf '%5d s  %5s s CPU  %s (background, from %d s to %d s; target/ then: %s)' "$took" \
    "$cpu" "$name" "${bg_start[$name]}" $((bg_start[$name] + took)) "$(target_size)")")
  echo "tests/run.sh: stage '$name' took $took s (background)"
  [ "$rc" -eq 0 ] || exit "$rc"
  current=
}
report_times() {
  local rc=$?
  for name in "${!bg_pid[@]}"; do
    kill -- "-${bg_pid[$name]}" 2>/dev/null && echo "tests/run.sh: stopped the background stage '$name'"
  done
  echo "tests/run.sh: stage times (wall; load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
  printf '  %s\n' "${timings[@]}"
  cpu_seconds >"$logs/total.cpu"
  echo "  total $SECONDS s wall, $(cat "$logs/total.cpu") s CPU (the stages' processes)"
  if [ $rc -ne 0 ]; then
    if [ -n "$current" ] && [ -s "$logs/$current.log" ]; then
      echo "tests/run.sh: the last 60 lines of $logs/$current.log:"
      tail -n 60 "$logs/$current.log" | sed 's/^/  | /'
    fi
    echo "tests/run.sh: FAILED in stage '$current' (exit $rc; log: $logs/$current.log)"
    free_space
  fi
}
trap report_times EXIT

# Free disk where the builds (target/) and the VM guests' disks (the temporary directory) go:
# printed at the start, before the VM suite and on a failure, so that a full disk is named.
free_space() {
  echo "tests/run.sh: free space:"
  df -h --output=file,avail "$PWD/target" "${TMPDIR:-/tmp}" 2>/dev/null | sed 's/^/  /' || true
}
# The build directory's size, for the stage table: what a run needs free is its peak (docs/testing.md
# "## Disk"), and a stage that grows it is named.
target_size() {
  du -sh "${CARGO_TARGET_DIR:-target}" 2>/dev/null | cut -f1
}
mkdir -p "$logs"
free_space

stage setup tests/setup.sh

# Opt-outs: the nextest filterset of the tests left out, and what is skipped, for the log.
left_out=()
skip_vm=no
skip_nspawn=no
IFS=, read -r -a components <<<"${MCO_TEST_SKIP:-}"
for component in "${components[@]}"; do
  case $component in
    "") ;;
    nspawn) left_out+=("binary(/_nspawn$/)"); skip_nspawn=yes ;;
    journald) left_out+=("binary(=logging_journald)") ;;
    vm) skip_vm=yes ;;
    *) echo "tests/run.sh: MCO_TEST_SKIP: unknown component '$component' (nspawn, journald, vm)" >&2
       exit 2 ;;
  esac
done
filter=()
if [ ${#left_out[@]} -gt 0 ]; then
  joined=$(IFS='|'; echo "${left_out[*]}")
  filter=(-E "not ($joined)")
fi

# The Debian images: the rootfs the nspawn-tier tests boot (systemd, logind, journald in a
# container), and the VM suite's kernel, initrd and disks; a no-op when current. Built in the
# background from here (debootstrap and mkfs wait on the network and the disk while the lints
# and the build use the cores), collected before the tests that boot them. The tests would
# build the rootfs themselves, but one at a time under a lock.
images=()
[ $skip_nspawn = yes ] || images+=(rootfs)
[ $skip_vm = yes ] || images=()  # no argument: every image the VM suite boots, the rootfs among them
build_images=no
if [ $skip_nspawn = no ] || [ $skip_vm = no ]; then
  build_images=yes
  bg_stage images tests/vm/build-image.sh "${images[@]}"
fi

# The fuzz workspace's lock file follows the main one (a dependency added to a crate the fuzz
# targets use must be locked there too): checked first, not after 12 minutes of tests.
cargo metadata -q --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null || {
  echo "tests/run.sh: fuzz/Cargo.lock is stale: run 'cargo metadata --manifest-path fuzz/Cargo.toml' and commit it" >&2
  exit 1; }

# Every build resolves one feature set per dependency (workspace-hack/, docs/testing.md "Build
# once"): the two generated crates follow the manifests, or each build rebuilds the tree again.
# Checked beside the lints (it reads the fetched crates offline).
cargo fetch -q --locked
bg_stage workspace-hack tests/workspace_hack.py --check

# Formatting and lints first: seconds, where the tiers below take many minutes.
stage fmt cargo fmt --all -- --check
stage clippy cargo clippy --workspace --all-targets -- -D warnings
stage clippy-failpoints cargo clippy -p mco-agent --features failpoints --all-targets -- -D warnings
collect workspace-hack

# Every debug binary and test, once: the stages below reuse them (nextest, the demo, packaging,
# the VM suite, the cluster tier). The VM suite gets its own copy of the binaries it installs in
# guests (target/vm-bin), since the demo, crash-safety and packaging stages relink
# target/debug/mco-agent with other features while it runs. No stage builds release.
build() {
  local bin=${CARGO_TARGET_DIR:-target}/debug vmbin=target/vm-bin
  mkdir -p "$vmbin"
  # The agent with its failpoints, built once for the crash-safety tests and the VM suite's
  # power cuts: the tests' build (their feature set), whose mco-agent the VM suite copies.
  cargo nextest run -p mco-agent --features failpoints --test crash_safety --test stop --no-run
  install -m755 "$bin/mco-agent" "$vmbin/mco-agent-failpoints"
  cargo build -q -p mco-agent -p mco-firstboot -p mco-sysroot-status -p mco-companion -p mco-test-support --bins
  for b in mco-agent mco-firstboot mco-sysroot-status mco-companion mco-test-rpmostreed; do
    install -m755 "$bin/$b" "$vmbin/$b"
  done
  # The fuzz targets, instrumented, on the dependency tree just built (docs/fuzzing.md): here,
  # not in the fuzzing stage, since a cargo build in the background would hold the build
  # directory's lock while the cargo tests wait on it.
  tests/fuzz.sh --build-only
  cargo build -q -p mco-vm-tests --tests
  cargo nextest run --workspace --all-targets --no-run
}
stage build build

[ $build_images = no ] || collect images

# Fuzzing smoke run: every fuzz target (built by the build stage) run for 10 s from its seeds,
# niced: it takes what the other stages leave of the cores (docs/fuzzing.md); a crash, timeout or
# OOM fails here.
bg_stage fuzz tests/fuzz.sh --no-build 10

# qemu (TCG) VM suite: real systemd, journald, logind, ostree in a booted Debian guest
# (tests/vm/README.md). Nothing it needs is built any more (the binaries it installs are
# target/vm-bin's copies), so it starts here, in the background, as soon as the build is done:
# its two lanes of scenarios take about as long as everything after the build (docs/testing.md
# "Stage times"). The cargo tests run beside it at the same priority (the guests' budgets follow
# their boot pace);
# the stages after them run niced, so that the guests keep the cores they ask for (starved
# guests missed their boot deadlines when builds beside them ran at the same priority).
# MCO_VM_BACKGROUND=0 runs it last, alone, instead.
vm_in_background=no
fg_nice=()
if [ $skip_vm = yes ]; then
  echo "tests/run.sh: skipped (MCO_TEST_SKIP=$MCO_TEST_SKIP), not run: the VM suite (tests/vm/run.sh)"
elif [ "${MCO_VM_BACKGROUND:-1}" = 1 ]; then
  free_space
  MCO_VM_BIN_DIR=$PWD/target/vm-bin bg_stage vm tests/vm/run.sh
  vm_in_background=yes
fi

# Unit and integration tests (real ostree, dbus-daemon, Ignition, kubectl; see docs/testing.md).
if [ ${#left_out[@]} -gt 0 ]; then
  echo "tests/run.sh: skipped (MCO_TEST_SKIP=$MCO_TEST_SKIP), not run:"
  cargo nextest list --workspace --all-targets --message-format oneline -E "$joined" | sed 's/^/  skipped: /'
fi
stage nextest cargo nextest run --workspace --all-targets --no-fail-fast "${filter[@]}"

[ $vm_in_background = no ] || fg_nice=(nice -n 10)
stage doctests "${fg_nice[@]}" cargo test --workspace --doc
# The API docs build without a warning (broken, private or ambiguous intra-doc links): ~15 s warm.
# The targets are chosen so that the build resolves the test feature set (the examples, like tests,
# may use dev-dependencies), whose checked dependencies clippy left: a plain `cargo doc` resolves
# the binaries' set and checks the whole dependency tree once more (109 s of CPU) to document
# the members. The libraries, the examples and every binary cargo doc documents by default (those
# not named like their package's library: rustdoc writes both to the same directory).
doc_bins() {
  cargo metadata -q --no-deps --format-version 1 | python3 -c '
import json, sys
for package in json.load(sys.stdin)["packages"]:
    targets = package["targets"]
    libs = {t["name"].replace("-", "_") for t in targets if "lib" in t["kind"]}
    for t in targets:
        if "bin" in t["kind"] and t["name"].replace("-", "_") not in libs:
            print("--bin", t["name"])'
}
# shellcheck disable=SC2046 # one word per option and name
RUSTDOCFLAGS="-D warnings" stage rustdoc "${fg_nice[@]}" cargo doc -q --workspace --no-deps --lib \
  --examples $(doc_bins)
# Every relative link of README.md and docs/ names a file (and heading) of the repository.
stage doc-links tests/doc_links.py

# The README's main job: the companion, the agent and status on a sandbox root (target/demo/).
demo() { "${fg_nice[@]}" examples/demo.sh >target/demo.out 2>&1 || { tail -n 40 target/demo.out; return 1; }; }
stage demo demo

# Crash safety: the agent built with its failpoints, killed with SIGKILL at every update step,
# and stopped with SIGTERM at every step (it exits at once and converges after the next start).
# Niced beside the VM suite it gets a fraction of a core: its waits' bounds are tripled
# (MCO_TEST_TIME_FACTOR, agent/tests/daemon_env), the conditions are the same.
[ $vm_in_background = no ] || export MCO_TEST_TIME_FACTOR=3
stage crash-safety "${fg_nice[@]}" cargo nextest run -p mco-agent --features failpoints --test crash_safety --test stop --no-fail-fast

# Packaging: units (systemd-analyze verify), SELinux module linked into the full reference
# policy, RPM built by rpmbuild from the debug binaries and installed, Containerfile inputs, no
# fake in the shipped binaries. (The spec's from-source %build: tests/packaging-from-source.sh.)
stage packaging "${fg_nice[@]}" tests/packaging.sh

collect fuzz
# MCO_PRUNE=1 (.ci/run): the instrumented crates and the fuzz targets go; the corpus stays.
if [ "${MCO_PRUNE:-0}" = 1 ] && [ -f target/fuzz/instrumented.outputs ]; then
  xargs -r rm -f <target/fuzz/instrumented.outputs
fi
if [ $vm_in_background = yes ]; then
  collect vm
elif [ $skip_vm = no ]; then
  free_space
  MCO_VM_BIN_DIR=$PWD/target/vm-bin stage vm tests/vm/run.sh
fi
