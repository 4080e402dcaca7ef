#!/usr/bin/env bash
# Benchmark: the resident memory of an idle `mco-agent start` in cluster mode.
#
#   tests/bench/idle_rss.sh [SETTLE_SECONDS]
#
# Starts the Kubernetes API test server (`mco-test-apiserver`) with a Node (node-0, desiredConfig
# set to a small rendered worker config), that rendered MachineConfig, and
# `MachineConfiguration/cluster` with its node disruption policy status; then `mco-agent start`
# with the kubelet's kubeconfig for node-0 (no config server: the agent reads the rendered config
# by name from the API server, as it does in host-first mode without `--config-server`), on a
# temp root, with no system bus. It waits until the Node says `state=Done`, lets the agent idle
# SETTLE_SECONDS (default 10), and reports, from /proc/PID/status: VmRSS, RssAnon, RssFile,
# RssShmem, VmHWM and Threads, and how much of RssFile is the agent's own binary
# (/proc/PID/smaps).
#
# The agent is the release build (`cargo build --release -p mco-agent`) unless MCO_AGENT_BIN
# names another; CARGO_TARGET_DIR is honoured. The API test server is a dev build (its memory is
# not measured). Extra environment for the agent can be given as MCO_IDLE_ENV="K=V K=V" (e.g.
# MALLOC_ARENA_MAX=1). Needs curl and python3.
set -euo pipefail
cd "$(dirname "$0")/../.."

settle=${1:-10}
target=${CARGO_TARGET_DIR:-$PWD/target}
for tool in curl python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool missing" >&2; exit 1; }
done

if [ -z "${MCO_AGENT_BIN:-}" ]; then
  cargo build --release -q -p mco-agent
  MCO_AGENT_BIN=$target/release/mco-agent
fi
if [ -z "${MCO_TEST_APISERVER_BIN:-}" ]; then
  cargo build -q -p mco-test-support --bin mco-test-apiserver
  MCO_TEST_APISERVER_BIN=$target/debug/mco-test-apiserver
fi

work=$(mktemp -d /tmp/mco-idle-rss.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# --- the node's root: the user database a CoreOS node has before its config is applied ------
root=$work/root
mkdir -p "$root/etc"
printf 'root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/home/core:/bin/bash\n' >"$root/etc/passwd"
printf 'root:x:0:\ncore:x:1000:\n' >"$root/etc/group"
printf 'core:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
echo boot-1 >"$work/boot_id"

# --- the cluster's objects -------------------------------------------------------------------
rendered=rendered-worker-idle
cat >"$work/seed.yaml" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: node-0
  labels: {node-role.kubernetes.io/worker: ""}
  annotations:
    machineconfiguration.openshift.io/desiredConfig: $rendered
---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: $rendered
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
      - {path: /etc/mco/idle/a.conf, mode: 420, overwrite: true, contents: {source: "data:,a%0A"}}
      - {path: /etc/mco/idle/b.conf, mode: 420, overwrite: true, contents: {source: "data:,b%0A"}}
      - {path: /etc/mco/idle/c.conf, mode: 420, overwrite: true, contents: {source: "data:,c%0A"}}
---
apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata: {name: cluster, generation: 1}
status:
  observedGeneration: 1
  nodeDisruptionPolicyStatus:
    clusterPolicies:
      files:
      - path: /etc/mco/idle/a.conf
        actions: [{type: None}]
      - path: /etc/mco/idle/b.conf
        actions: [{type: None}]
      - path: /etc/mco/idle/c.conf
        actions: [{type: None}]
EOF

"$MCO_TEST_APISERVER_BIN" --kubeconfig-out "$work/admin.kubeconfig" \
  --node-kubeconfig "node-0=$work/kubelet.kubeconfig" --seed "$work/seed.yaml" \
  >"$work/apiserver.url" 2>"$work/apiserver.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/apiserver.url" ] && break; sleep 0.1; done
api=$(head -1 "$work/apiserver.url")
[ -n "$api" ] || { cat "$work/apiserver.log" >&2; echo "bench: the API test server did not start" >&2; exit 1; }
token=$(sed -n 's/^ *token: "\(.*\)"$/\1/p' "$work/admin.kubeconfig")

# --- the agent ---------------------------------------------------------------------------------
# shellcheck disable=SC2086 # MCO_IDLE_ENV is a list of K=V words
env -u NOTIFY_SOCKET -u INVOCATION_ID -u JOURNAL_STREAM -u MCO_METRICS_LISTEN \
  DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/no-system-bus" RUST_LOG=info ${MCO_IDLE_ENV:-} \
  "$MCO_AGENT_BIN" start --root "$root" --node-name node-0 \
  --kubeconfig "$work/kubelet.kubeconfig" --boot-id-file "$work/boot_id" --skip-reboot \
  </dev/null >"$work/agent.log" 2>&1 &
agent=$!
pids+=("$agent")

state() {
  curl -sk -H "Authorization: Bearer $token" "$api/api/v1/nodes/node-0" |
    python3 -c 'import json,sys; a=json.load(sys.stdin)["metadata"].get("annotations",{}); print(a.get("machineconfiguration.openshift.io/state",""), a.get("machineconfiguration.openshift.io/currentConfig",""))'
}
done_at=""
for _ in $(seq 600); do
  kill -0 "$agent" 2>/dev/null || { cat "$work/agent.log" >&2; echo "bench: the agent exited" >&2; exit 1; }
  if [ "$(state)" = "Done $rendered" ]; then done_at=$(date +%s.%N); break; fi
  sleep 0.1
done
[ -n "$done_at" ] || { tail -20 "$work/agent.log" >&2; echo "bench: the Node never got state=Done" >&2; exit 1; }
sleep "$settle"
kill -0 "$agent" 2>/dev/null || { cat "$work/agent.log" >&2; echo "bench: the agent exited" >&2; exit 1; }

field() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$agent/status"; }
binary=$(readlink -f "/proc/$agent/exe")
# Resident pages of the binary's own mappings (its text, read-only data, relocated data).
bin_kib=$(awk -v b="$binary" '
  /^[0-9a-f]+-[0-9a-f]+ / { mine = ($6 == b) }
  mine && $1 == "Rss:" { sum += $2 }
  END { print sum + 0 }' "/proc/$agent/smaps")
kib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

echo "idle mco-agent start (cluster mode), ${settle} s after state=Done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $binary ($(stat -c %s "$binary") bytes)${MCO_IDLE_ENV:+; environment: $MCO_IDLE_ENV}"
printf '%-10s %s\n' \
  VmRSS "$(kib "$(field VmRSS)")" \
  RssAnon "$(kib "$(field RssAnon)")" \
  RssFile "$(kib "$(field RssFile)") (of which the binary: $(kib "$bin_kib"))" \
  RssShmem "$(kib "$(field RssShmem)")" \
  VmHWM "$(kib "$(field VmHWM)")" \
  Threads "$(field Threads) ($(cat /proc/"$agent"/task/*/comm | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}'))"
