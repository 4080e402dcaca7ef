#!/usr/bin/env bash
# Benchmark: mco-companion serving a ~1 MiB rendered config over TLS on loopback, side by side with
# Debian's nginx serving the same bytes as a static file over TLS, both measured with wrk in the
# same run. Reports requests/s, transfer rate, p50/p99 latency, the ratio companion/nginx (the
# median and every round's), and the servers' memory: PSS (proportional set size: pages shared
# between nginx's master and workers, or with other processes, counted once across them; the
# largest of samples taken every 0.25 s while wrk runs) and peak RSS (VmHWM, which counts shared pages in each
# process).
#
#   tests/bench/companion.sh [DURATION_SECONDS] [CONNECTIONS] [ROUNDS]
#
# Each round runs both servers back to back (alternating which goes first), so load from other
# processes on the machine hits both alike; the summary gives medians over the rounds.
#
# Needs root (nginx runs from a temp prefix on a high port; no system service is touched),
# nginx-light, wrk, curl, openssl (tests/setup.sh installs them). Builds mco-companion with its `server` profile.
set -euo pipefail
cd "$(dirname "$0")/../.."

duration=${1:-5}
connections=${2:-16}
rounds=${3:-3}
threads=2
accept='application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1'

for tool in nginx wrk curl openssl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing; run tests/setup.sh" >&2; exit 1; }
done

# the companion's own profile (Cargo.toml: its panics unwind), as it is deployed
cargo build --profile server -q -p mco-companion
companion_bin=${CARGO_TARGET_DIR:-$PWD/target}/server/mco-companion

work=$(mktemp -d /tmp/mco-companion-bench.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"

# --- TLS material -------------------------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench-ca \
  -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$work/san"
openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial \
  -days 1 -extfile "$work/san" -out "$work/tls.crt" 2>/dev/null
chmod 644 "$work"/tls.*
# nginx's workers read their key as another user; the companion refuses a key others can read.
cp "$work/tls.key" "$work/companion.key" && chmod 600 "$work/companion.key"

# --- manifests: a worker pool whose rendered config is ~1 MiB once served ------------------
mkdir -p "$work/manifests"
cat >"$work/manifests/pool.yaml" <<'EOF'
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
EOF
# 100 files of 4.5 KiB of base64 text each; the served body carries them, plus the MachineConfig
# twice more in the appended files (percent-encoded), which lands near 1 MiB
{
  cat <<'EOF'
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 00-worker-bulk
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.2.0
    storage:
      files:
EOF
  for i in $(seq 1 100); do
    data=$(head -c 3400 /dev/urandom | base64 -w0)
    printf '      - path: /etc/bench/file-%03d.conf\n        mode: 420\n        contents:\n          source: data:;base64,%s\n' "$i" "$data"
  done
} >"$work/manifests/bulk.yaml"

port_companion=$((30000 + RANDOM % 10000))
port_nginx=$((port_companion + 1))

"$companion_bin" serve --manifests "$work/manifests" --listen "127.0.0.1:$port_companion" \
  --cert "$work/tls.crt" --key "$work/companion.key" 2>"$work/companion.log" &
companion_pid=$!
pids+=("$companion_pid")
for _ in $(seq 1 100); do
  curl -sf --cacert "$work/ca.crt" "https://127.0.0.1:$port_companion/healthz" >/dev/null && break
  sleep 0.1
done

# the exact bytes the companion serves for this Accept header become nginx's static file
mkdir -p "$work/www/config"
curl -sf --cacert "$work/ca.crt" -H "Accept: $accept" \
  "https://127.0.0.1:$port_companion/config/worker" -o "$work/www/config/worker"
chmod -R a+rX "$work/www"
body_bytes=$(stat -c %s "$work/www/config/worker")

mkdir -p "$work/nginx/logs"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 2;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 100000;
  types { application/json worker; }
  default_type application/json;
  server {
    listen 127.0.0.1:$port_nginx ssl;
    ssl_certificate $work/tls.crt;
    ssl_certificate_key $work/tls.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    root $work/www;
  }
}
EOF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' &
nginx_pid=$!
pids+=("$nginx_pid")
for _ in $(seq 1 100); do
  curl -sf --cacert "$work/ca.crt" "https://127.0.0.1:$port_nginx/config/worker" -o /dev/null && break
  sleep 0.1
done
cmp -s <(curl -sf --cacert "$work/ca.crt" "https://127.0.0.1:$port_nginx/config/worker") \
  "$work/www/config/worker" || { echo "bench: nginx does not serve the same bytes" >&2; exit 1; }

# peak RSS in KiB of a process and its children (nginx's workers)
peak_rss() {
  local total=0 pid
  for pid in "$1" $(pgrep -P "$1" || true); do
    total=$((total + $(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

# PSS in KiB of a process and its children, now (smaps_rollup: Linux 4.14 and later)
pss_now() {
  local total=0 pid
  for pid in "$1" $(pgrep -P "$1" || true); do
    total=$((total + $(awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0)))
  done
  echo "$total"
}
# both servers' PSS every 0.25 s, one line each (companion nginx), until the script ends
sample_pss() {
  while :; do
    echo "$(pss_now "$companion_pid") $(pss_now "$nginx_pid")" >>"$work/pss"
    sleep 0.25
  done
}

# wrk's summary: requests/s, transfer/s, p50, p99
run_wrk() {
  local name=$1 url=$2 extra=$3 out
  out=$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -H "Accept: $accept" $extra "$url")
  echo "$out" >"$work/wrk-$name.txt"
  local rps tps p50 p99 errors
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  tps=$(awk '/^Transfer\/sec:/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  errors=$(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr '\n' ' ' || true)
  echo "$rps|$tps|$p50|$p99|${errors:-none}"
}

echo "body: $body_bytes bytes; wrk -t$threads -c$connections -d${duration}s x $rounds rounds; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
to_ms() { awk '{ v = $1; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 } print v }'; }
declare -A rps p99 ratios errors_seen
sample_pss &
pids+=("$!")
for mode in keepalive close; do
  extra=""
  [ "$mode" = close ] && extra="-H Connection:close"
  wrk -t1 -c2 -d1s -H "Accept: $accept" "https://127.0.0.1:$port_companion/config/worker" >/dev/null
  wrk -t1 -c2 -d1s "https://127.0.0.1:$port_nginx/config/worker" >/dev/null
  for round in $(seq 1 "$rounds"); do
    order="companion nginx"
    [ $((round % 2)) -eq 0 ] && order="nginx companion"
    for server in $order; do
      port=$port_companion
      [ "$server" = nginx ] && port=$port_nginx
      IFS='|' read -r r _ _ p e <<<"$(run_wrk "$server-$mode-$round" "https://127.0.0.1:$port/config/worker" "$extra")"
      rps[$server-$mode]+="$r "
      p99[$server-$mode]+="$(to_ms <<<"$p") "
      [ "$e" != none ] && errors_seen[$server-$mode]+="$e "
      [ "$server" = nginx ] && n_last=$r || c_last=$r
    done
    ratios[$mode]+="$(awk -v c="$c_last" -v n="$n_last" 'BEGIN { printf "%.3f", c / n }') "
  done
done

rss_companion=$(peak_rss "$companion_pid")
rss_nginx=$(peak_rss "$nginx_pid")

printf '\n| connections | server | requests/s (median) | p99 ms (median) | all rounds requests/s | errors |\n|---|---|---|---|---|---|\n'
for mode in keepalive close; do
  for server in companion nginx; do
    printf '| %s | %s | %s | %s | %s | %s |\n' "$mode" "$server" \
      "$(tr ' ' '\n' <<<"${rps[$server-$mode]}" | grep . | median)" \
      "$(tr ' ' '\n' <<<"${p99[$server-$mode]}" | grep . | median)" \
      "${rps[$server-$mode]% }" "${errors_seen[$server-$mode]:-none}"
  done
done
for mode in keepalive close; do
  echo "ratio companion/nginx ($mode): median $(tr ' ' '\n' <<<"${ratios[$mode]}" | grep . | median) of rounds ${ratios[$mode]% }"
done
pss_companion=$(awk '$1 > m { m = $1 } END { print m + 0 }' "$work/pss")
pss_nginx=$(awk '$2 > m { m = $2 } END { print m + 0 }' "$work/pss")
echo "PSS (largest sample): companion $((pss_companion / 1024)) MiB, nginx (master + workers) $((pss_nginx / 1024)) MiB"
echo "peak RSS (VmHWM, shared pages counted in each process): companion $((rss_companion / 1024)) MiB, nginx (master + workers) $((rss_nginx / 1024)) MiB"
