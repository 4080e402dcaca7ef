#!/usr/bin/env bash
# The main job, on a fresh machine with no cluster: the companion serves the worker pool of
# examples/ over TLS on loopback, mco-agent (the daemon, standalone) pulls it, plans and applies
# it into a sandbox root under target/demo, and `status` shows the result; an edit of the
# served example is then rolled out without a reboot, with its plan. Drift is caught and
# healed, and the metrics are scraped. Everything started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

tests/setup.sh
cargo build -q -p mco-agent -p mco-companion
agent=target/debug/mco-agent
companion=target/debug/mco-companion
demo=target/demo
root=$demo/root
manifests=$demo/manifests

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "demo: timed out waiting for $what" >&2
      tail -n 20 "$demo"/*.log >&2 || true
      exit 1
    fi
    sleep 0.1
  done
}
# The example without its OS fields (osImageURL, kernelArguments): they go to rpm-ostree,
# which a sandbox root does not have. $2 renames the MachineConfig.
without_os() {
  awk -v name="$2" '
    /^  osImageURL:/ { next }
    /^  kernelArguments:/ { skip = 1; next }
    skip && /^  - / { next }
    { skip = 0 }
    /^  name: / && name != "" { print "  name: " name; next }
    { print }' "$1"
}
rendered_name() { grep -o '"name": *"rendered-[^"]*"' "$1" | head -1 | sed 's/.*"\(rendered-[^"]*\)"/\1/'; }
agent_status_is() { "$agent" status --root "$root" -o json | tr -d ' \n' | grep -q "$1"; }

step "A fresh sandbox node at $root (users, an OS-default chrony.conf, vendor units, /home -> var/home)"
rm -rf "$demo"
mkdir -p "$root"/{etc/systemd/system,usr/lib/systemd/system,var/home/core} "$manifests"
ln -s var/home "$root/home"
chown 1000:1000 "$root/var/home/core"
printf 'root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n' >"$root/etc/passwd"
printf 'root:x:0:\nwheel:x:10:core\ncore:x:1000:\n' >"$root/etc/group"
printf 'root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
chmod 0640 "$root/etc/shadow"
printf 'pool 2.fedora.pool.ntp.org iburst\n' >"$root/etc/chrony.conf"
printf '[Service]\nExecStart=/usr/bin/crio\n[Install]\nWantedBy=multi-user.target\n' >"$root/usr/lib/systemd/system/crio.service"
printf '[Service]\nExecStart=/usr/libexec/bluetooth/bluetoothd\n[Install]\nWantedBy=bluetooth.target\n' >"$root/usr/lib/systemd/system/bluetooth.service"
printf 'ID=fedora\nVARIANT_ID=coreos\nVERSION_ID=42\n' >"$root/etc/os-release"

step "TLS for the config server on loopback: a throwaway CA and a certificate for 127.0.0.1 (openssl)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=mco-demo-ca \
  -keyout "$demo/ca.key" -out "$demo/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$demo/tls.key" -out "$demo/tls.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$demo/san"
openssl x509 -req -in "$demo/tls.csr" -CA "$demo/ca.crt" -CAkey "$demo/ca.key" -CAcreateserial \
  -days 1 -extfile "$demo/san" -out "$demo/tls.crt" 2>/dev/null
chmod 600 "$demo/tls.key" # the companion refuses a key others can read
echo "$demo/ca.crt signs $demo/tls.crt (IP:127.0.0.1)"

step "The companion serves the worker pool: examples/pool-worker.yaml and examples/00-worker-base.yaml (without its OS fields)"
cp examples/pool-worker.yaml "$manifests/"
without_os examples/00-worker-base.yaml "" >"$manifests/00-worker-base.yaml"
RUST_LOG=info NO_COLOR=1 "$companion" serve --manifests "$manifests" --listen 127.0.0.1:0 \
  --cert "$demo/tls.crt" --key "$demo/tls.key" --poll-interval 1 >"$demo/companion.log" 2>&1 &
pids+=($!)
wait_for 10 "the companion to listen" grep -q 'Launching server on' "$demo/companion.log"
url="https://$(grep -o 'Launching server on 127.0.0.1:[0-9]*' "$demo/companion.log" | grep -o '127.0.0.1:[0-9]*')"
run curl -sS --cacert "$demo/ca.crt" -o /dev/null -w '%{http_code} %{content_type} %{size_download} bytes\n' \
  -H 'Accept: application/vnd.coreos.ignition+json;version=3.4.0' "$url/config/worker"
"$companion" render --manifests "$manifests" --pool worker -o json >"$demo/rendered-1.json"
first=$(rendered_name "$demo/rendered-1.json")
echo "the pool renders to $first"

step "Provisioning: Ignition's job at first boot, done here by once-from with the rendered config"
run "$agent" once-from "$demo/rendered-1.json" --root "$root" --skip-reboot

step "The agent, standalone: follows what the config server serves for pool worker (polling every second)"
# No system bus for the sandbox: nothing on this machine can be rebooted or changed by rpm-ostree.
DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent RUST_LOG=info NO_COLOR=1 "$agent" start --root "$root" \
  --config-server "$url" --ca "$demo/ca.crt" --pool worker --node-name demo-node \
  --poll-interval 1s --skip-reboot --metrics-listen 127.0.0.1:0 --kubelet-healthz-enabled false \
  >"$demo/agent.log" 2>&1 &
pids+=($!)
wait_for 30 "the agent to be Done in $first" agent_status_is "\"state\":\"Done\",\"reason\":\"\",\"current\":\"$first\""
run "$agent" status --root "$root"

step "Edit the served example: 00-worker-base gets a registry appended, a stricter policy.json and a second SSH key (01-worker-files-only's changes)"
without_os examples/01-worker-files-only.yaml 00-worker-base >"$manifests/.00-worker-base.yaml.new"
mv "$manifests/.00-worker-base.yaml.new" "$manifests/00-worker-base.yaml"
"$companion" render --manifests "$manifests" --pool worker -o json >"$demo/rendered-2.json"
second=$(rendered_name "$demo/rendered-2.json")
echo "the pool now renders to $second; the plan from $first:"
run "$agent" diff "$demo/rendered-1.json" "$demo/rendered-2.json"
wait_for 30 "the agent to be Done in $second" agent_status_is "\"state\":\"Done\",\"reason\":\"\",\"current\":\"$second\""
echo "the agent's log of the update (timestamps, targets and the long fields left out):"
awk -v to="$second" 'index($0, "Starting update") && index($0, to) { on = 1 }
  on { print } on && index($0, "-> Done") { exit }' "$demo/agent.log" |
  sed -E 's/^[^ ]+ +[A-Z]+ [^ ]+: /  /; s/ (update|plan|config|from|state|step|event)=("([^"\\]|\\.)*"|[^ ]*)//g'
run "$agent" status --root "$root"

step "Drift: a hand edit of a managed file degrades the node with the MCD's reason; undoing it heals it"
cp "$root/etc/chrony.conf" "$demo/chrony.conf.good"
echo "pool rogue.example.com" >>"$root/etc/chrony.conf"
wait_for 10 "the drift to be detected" agent_status_is '"state":"Degraded"'
"$agent" status --root "$root" | grep -E '^(State|Reason):'
cp "$demo/chrony.conf.good" "$root/etc/chrony.conf"
wait_for 10 "the node to be Done again" agent_status_is '"state":"Done"'
"$agent" status --root "$root" | grep -E '^State:'

step "Metrics (Prometheus text), as the MCD names them, and ours"
metrics="http://$(grep -o 'serving metrics at http://127.0.0.1:[0-9]*' "$demo/agent.log" | grep -o '127.0.0.1:[0-9]*')/metrics"
printf '$ curl -s %s | grep ...\n' "$metrics"
curl -sS "$metrics" | grep -E '^(mcd_state|mcd_update_state|mcd_config_drift|mco_agent_updates_total|mco_agent_update_duration_seconds_count|mcd_host_os_and_version)'

step "What would reboot: a kernel-argument change (rpm-ostree kargs) — the plan only"
printf '$ %s | tail -4\n' "$agent diff examples/00-worker-base.yaml examples/02-worker-kargs.yaml"
"$agent" diff examples/00-worker-base.yaml examples/02-worker-kargs.yaml | tail -4

step "Done: the agent and the companion are stopped; logs in $demo/agent.log and $demo/companion.log"
