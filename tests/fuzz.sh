#!/usr/bin/env bash
# Builds the coverage-guided fuzz targets (fuzz/, libFuzzer through libfuzzer-sys, on the stable
# toolchain) and runs each for SECONDS (default 60), one after another (docs/fuzzing.md).
#
#   tests/fuzz.sh [--build-only|--no-build] [SECONDS] [TARGET...]   e.g. tests/fuzz.sh 600 units
#
# --build-only builds the targets and runs none (tests/run.sh builds them in its build stage,
# where no other cargo command waits on the build directory's lock) and --no-build runs what is
# built.
#
# Every target starts from its checked-in seeds (fuzz/seeds/TARGET) and the repository's own
# inputs (examples/, the hostile corpus, the Ignition oracle's configs, the companion's
# manifests); what it finds is kept in target/fuzz/corpus/TARGET for the next run. A crash, a
# timeout (an input taking over FUZZ_TIMEOUT seconds of wall-clock time, default 30: a
# starved process on a loaded machine must not look like a hang) or running out of memory
# (over 2 GiB) fails the script; the input is left in target/fuzz/artifacts/TARGET/ and the
# command that replays it is printed. FUZZ_NICE (default 10) is the fuzzers' niceness.
set -euo pipefail
cd "$(dirname "$0")/.."

build=yes run=yes
case ${1:-} in
  --build-only) run=no; shift ;;
  --no-build) build=no; shift ;;
esac
seconds=${1:-60}
shift || true
all_targets=(ignition machine_config dataurl registries kargs units companion)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz: unknown target $t (${all_targets[*]})" >&2; exit 2; }
done

# libFuzzer's runtime is C++, built from source by libfuzzer-sys (tests/setup.sh installs g++).
command -v g++ >/dev/null || { echo "fuzz: g++ is missing (run tests/setup.sh)" >&2; exit 1; }

# Stable rustc flags only (no -Z, no RUSTC_BOOTSTRAP): LLVM's SanitizerCoverage pass with the
# instrumentation libFuzzer reads (8-bit edge counters, the PC table, comparison operands,
# stack depth) and `--cfg fuzzing`, added by tests/lib/fuzz-rustc to the crates below only: the
# fuzz targets, the project's crates they call and the parsers of theirs no other crate of the
# tree uses. The build goes to the project's target directory with the project's dev profile
# (fuzz/Cargo.toml), so that every other crate is the project's debug build's, reused as it is;
# each crate named here has a profile override in fuzz/Cargo.toml (a build of its own), and none
# is a build dependency (build scripts and proc macros are not instrumented). A crate shared with
# the debug build (serde_json, memchr, http, the toml parser system-deps runs at build time...)
# cannot be instrumented: its build is the debug build's.
export RUSTC_WRAPPER=$PWD/tests/lib/fuzz-rustc
export FUZZ_SANCOV_FLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cllvm-args=-sanitizer-coverage-stack-depth"
export FUZZ_INSTRUMENTED="mco_fuzz ${all_targets[*]} machine_config mco_agent mco_companion \
serde_saphyr granit_parser base64_simd vsimd"
# The project's target directory, not the fuzz workspace's own default (fuzz/target).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
fuzz_dir=$PWD/target/fuzz
mkdir -p "$fuzz_dir"

# The flags the wrapper adds are not in what cargo hashes: when they or the instrumented set
# change, the instrumented crates' outputs (listed at each build) are removed, so that cargo
# builds them again with the new flags.
instrumented_set=$( (printf '%s\n' "$FUZZ_INSTRUMENTED" "$FUZZ_SANCOV_FLAGS"; cat tests/lib/fuzz-rustc) | cksum | cut -d' ' -f1)
if [ "$(cat "$fuzz_dir/instrumented.cksum" 2>/dev/null)" != "$instrumented_set" ] && [ -f "$fuzz_dir/instrumented.outputs" ]; then
  xargs -r rm -f <"$fuzz_dir/instrumented.outputs"
fi
if [ "$build" = yes ]; then
  echo "fuzz: building ${targets[*]} (dev profile, instrumented)" >&2
  build_args=()
  for t in "${targets[@]}"; do build_args+=(--bin "$t"); done
  # From cargo's messages: the instrumented crates' outputs (to the list) and how many crates
  # were compiled and reused (to stderr, with cargo's diagnostics).
  cargo build -q --locked --manifest-path fuzz/Cargo.toml --message-format json-render-diagnostics \
    "${build_args[@]}" | python3 -c '
import json, sys
names = set(sys.argv[1].split())
built = reused = 0
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact":
        continue
    if m["fresh"]:
        reused += 1
    else:
        built += 1
    if m["target"]["name"].replace("-", "_") in names:
        print("\n".join(m["filenames"]))
print(f"fuzz: {built} crates compiled, {reused} reused from earlier builds", file=sys.stderr)' \
    "$FUZZ_INSTRUMENTED" >"$fuzz_dir/instrumented.outputs.new"
  mv "$fuzz_dir/instrumented.outputs.new" "$fuzz_dir/instrumented.outputs"
  echo "$instrumented_set" >"$fuzz_dir/instrumented.cksum"
fi
bin_dir=$CARGO_TARGET_DIR/debug
for t in "${targets[@]}"; do
  [ -x "$bin_dir/$t" ] || { echo "fuzz: $bin_dir/$t is not built (tests/fuzz.sh --build-only)" >&2; exit 1; }
done
[ "$run" = yes ] || exit 0

# Seed directories per target, besides fuzz/seeds/TARGET.
repo_seeds() {
  case $1 in
    ignition|machine_config)
      echo examples agent/tests/corpus/hostile agent/tests/oracle companion/tests/fixtures/manifests ;;
  esac
}

# The data URLs of the repository's configs, one per file, as seeds for the dataurl target.
extract_data_urls() {
  local out=$1 n=0 url
  mkdir -p "$out"
  while IFS= read -r url; do
    n=$((n + 1))
    printf '%s' "$url" >"$out/repo-$n"
  done < <(grep -rhoE 'data:[^"[:space:]]*' examples agent/tests/corpus/hostile agent/tests/oracle \
             companion/tests/fixtures/manifests | sort -u | head -n 200)
}

failed=()
for t in "${targets[@]}"; do
  corpus=$fuzz_dir/corpus/$t
  artifacts=$fuzz_dir/artifacts/$t
  log=$fuzz_dir/logs/$t.log
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  seeds=()
  [ -d "fuzz/seeds/$t" ] && seeds+=("fuzz/seeds/$t")
  # shellcheck disable=SC2207
  seeds+=($(repo_seeds "$t"))
  if [ "$t" = dataurl ]; then
    extract_data_urls "$fuzz_dir/seeds/dataurl"
    seeds+=("$fuzz_dir/seeds/dataurl")
  fi
  echo "fuzz: $t for ${seconds}s" >&2
  rc=0
  nice -n "${FUZZ_NICE:-10}" "$bin_dir/$t" -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-30}" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1 || true)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz: $t ok: ${seconds}s, ${execs:-?} execs, ${cov:-no coverage line}, 0 crashes" >&2
  else
    failed+=("$t")
    echo "fuzz: $t FAILED (exit $rc) after ${execs:-?} execs; last lines of $log:" >&2
    # the panic's message first: the backtrace below it can push it out of the tail
    grep -m 1 -A 1 'panicked at' "$log" >&2 || true
    tail -n 30 "$log" >&2
    for a in "$artifacts"/*; do
      [ -e "$a" ] && echo "fuzz: replay with: $bin_dir/$t $a" >&2
    done
  fi
done

echo "fuzz: $((${#targets[@]} - ${#failed[@]})) targets passed, ${#failed[@]} failed${failed[*]:+ (${failed[*]})}" >&2
[ ${#failed[@]} -eq 0 ]
