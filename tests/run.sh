#!/usr/bin/env bash
# The project's test command (README, docs/testing.md): installs what is missing, then runs every test tier.
#
# A test whose real component is missing fails with the reason. A machine that cannot have a
# component opts out explicitly: MCO_TEST_SKIP=nspawn,journald,vm (any of them) leaves those
# tests out of the run, and this script lists them as skipped (nextest counts them skipped too).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's wall time, printed as it ends and summed up at the end: the whole run has a
# 45-minute budget (docs/testing.md), and this says where it goes.
timings=()
current=
stage() {
  local name=$1 start=$SECONDS
  shift
  current=$name
  "$@"
  timings+=("$(printf '%5d s  %s' $((SECONDS - start)) "$name")")
  echo "tests/run.sh: stage '$name' took $((SECONDS - start)) s"
  current=
}
report_times() {
  local rc=$?
  echo "tests/run.sh: stage times"
  printf '  %s\n' "${timings[@]}"
  echo "  total $SECONDS s"
  if [ $rc -ne 0 ]; then
    echo "tests/run.sh: FAILED in stage '$current' (exit $rc)"
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
mkdir -p target
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

# The fuzz workspace's lock file follows the main one (a dependency added to a crate the fuzz
# targets use must be locked there too): checked first, not after 12 minutes of tests.
cargo metadata -q --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null || {
  echo "tests/run.sh: fuzz/Cargo.lock is stale: run 'cargo metadata --manifest-path fuzz/Cargo.toml' and commit it" >&2
  exit 1; }

# Formatting and lints first: seconds, where the tiers below take many minutes.
stage fmt cargo fmt --all -- --check
stage clippy cargo clippy --workspace --all-targets -- -D warnings
stage clippy-failpoints cargo clippy -p mco-agent --features failpoints --all-targets -- -D warnings

# The Debian rootfs the nspawn-tier tests boot (systemd, logind, journald in a container);
# a no-op when current. The tests would build it themselves, but one at a time under a lock.
if [ $skip_nspawn = no ]; then
  stage rootfs-image tests/vm/build-image.sh rootfs
fi

# Unit and integration tests (real ostree, dbus-daemon, Ignition, kubectl; see docs/testing.md).
if [ ${#left_out[@]} -gt 0 ]; then
  echo "tests/run.sh: skipped (MCO_TEST_SKIP=$MCO_TEST_SKIP), not run:"
  cargo nextest list --workspace --all-targets --message-format oneline -E "$joined" | sed 's/^/  skipped: /'
fi
stage nextest cargo nextest run --workspace --all-targets --no-fail-fast "${filter[@]}"
stage doctests cargo test --workspace --doc
# The API docs build without a warning (broken, private or ambiguous intra-doc links): ~15 s warm.
RUSTDOCFLAGS="-D warnings" stage rustdoc cargo doc -q --workspace --no-deps
# Every relative link of README.md and docs/ names a file (and heading) of the repository.
stage doc-links tests/doc_links.py

# The README's main job: the companion, the agent and status on a sandbox root (target/demo/).
demo() { examples/demo.sh >target/demo.out 2>&1 || { tail -n 40 target/demo.out; return 1; }; }
stage demo demo

# Crash safety: the agent built with its failpoints, killed with SIGKILL at every update step,
# and stopped with SIGTERM at every step (it exits at once and converges after the next start).
stage crash-safety cargo nextest run -p mco-agent --features failpoints --test crash_safety --test stop --no-fail-fast

# Fuzzing smoke run: every fuzz target built on the stable toolchain and run for 10 s from its
# seeds (docs/fuzzing.md); a crash, timeout or OOM fails here.
stage fuzz tests/fuzz.sh 10
# MCO_PRUNE=1 (.ci/run): the instrumented build (gigabytes) goes; the corpus stays.
if [ "${MCO_PRUNE:-0}" = 1 ]; then
  find target/fuzz -mindepth 1 -maxdepth 1 ! -name corpus ! -name artifacts -exec rm -rf {} +
fi

# Packaging: units (systemd-analyze verify), SELinux module linked into the full reference
# policy, RPM build and install, Containerfile inputs, no fake in the shipped binaries.
stage packaging tests/packaging.sh

# qemu (TCG) VM suite: real systemd, journald, logind, ostree in a booted Debian guest; after the
# cargo tests so that no build competes with the VMs for the cores (tests/vm/README.md).
if [ $skip_vm = yes ]; then
  echo "tests/run.sh: skipped (MCO_TEST_SKIP=$MCO_TEST_SKIP), not run: the VM suite (tests/vm/run.sh)"
else
  free_space
  stage vm tests/vm/run.sh
fi
