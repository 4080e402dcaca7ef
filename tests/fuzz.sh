#!/usr/bin/env bash
# Builds the coverage-guided fuzz targets (fuzz/, libFuzzer through libfuzzer-sys, on the stable
# toolchain) and runs each for SECONDS (default 60), one after another (docs/fuzzing.md).
#
#   tests/fuzz.sh [SECONDS] [TARGET...]      e.g. tests/fuzz.sh 600 ignition units
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
# stack depth), added by tests/lib/fuzz-rustc to the crates below only: the fuzz targets, the
# project's crates they call and the parsers those run (the rest of the tree is linked, barely
# run, and costs build time instrumented). An explicit --target keeps the flags off build
# scripts and proc macros.
triple=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_TARGET_DIR=$PWD/target/fuzz
export RUSTC_WRAPPER=$PWD/tests/lib/fuzz-rustc
export FUZZ_SANCOV_FLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cllvm-args=-sanitizer-coverage-stack-depth"
export FUZZ_INSTRUMENTED="mco_fuzz ${all_targets[*]} machine_config mco_agent mco_companion \
serde_json serde_saphyr granit_parser toml toml_parser base64 base64_simd vsimd miniz_oxide \
memchr httparse http"
# the instrumented set is in the flags cargo sees, so that a change to it rebuilds what it changes
instrumented_set=$( (printf '%s\n' "$FUZZ_INSTRUMENTED" "$FUZZ_SANCOV_FLAGS"; cat tests/lib/fuzz-rustc) | cksum | cut -d' ' -f1)
export RUSTFLAGS="--cfg fuzzing --cfg fuzz_instrumented=\"$instrumented_set\""
echo "fuzz: building ${targets[*]} (release, instrumented)" >&2
build_args=()
for t in "${targets[@]}"; do build_args+=(--bin "$t"); done
nice -n 10 cargo build -q --release --locked --manifest-path fuzz/Cargo.toml \
  --target "$triple" "${build_args[@]}"
bin_dir=$CARGO_TARGET_DIR/$triple/release

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
  corpus=$CARGO_TARGET_DIR/corpus/$t
  artifacts=$CARGO_TARGET_DIR/artifacts/$t
  log=$CARGO_TARGET_DIR/logs/$t.log
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  seeds=()
  [ -d "fuzz/seeds/$t" ] && seeds+=("fuzz/seeds/$t")
  # shellcheck disable=SC2207
  seeds+=($(repo_seeds "$t"))
  if [ "$t" = dataurl ]; then
    extract_data_urls "$CARGO_TARGET_DIR/seeds/dataurl"
    seeds+=("$CARGO_TARGET_DIR/seeds/dataurl")
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
