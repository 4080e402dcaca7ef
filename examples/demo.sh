#!/usr/bin/env bash
# The main job on an embedded default, no cluster needed: apply example MachineConfigs to a
# sandbox root (a CoreOS-like tree under target/demo), show the update plans, validate, catch
# drift, and apply a second config without a reboot.
set -euo pipefail
cd "$(dirname "$0")/.."

tests/setup.sh
cargo build -q -p mco-agent
agent=target/debug/mco-agent
root=target/demo/root

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "A fresh sandbox node at $root (users, an OS-default chrony.conf, vendor units, /home -> var/home)"
rm -rf target/demo
mkdir -p "$root"/{etc/systemd/system,usr/lib/systemd/system,var/home/core}
ln -s var/home "$root/home"
chown 1000:1000 "$root/var/home/core"
printf 'root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n' >"$root/etc/passwd"
printf 'root:x:0:\nwheel:x:10:core\ncore:x:1000:\n' >"$root/etc/group"
printf 'root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n' >"$root/etc/shadow"
chmod 0640 "$root/etc/shadow"
printf 'pool 2.fedora.pool.ntp.org iburst\n' >"$root/etc/chrony.conf"
printf '[Service]\nExecStart=/usr/bin/crio\n[Install]\nWantedBy=multi-user.target\n' >"$root/usr/lib/systemd/system/crio.service"
printf '[Service]\nExecStart=/usr/libexec/bluetooth/bluetoothd\n[Install]\nWantedBy=bluetooth.target\n' >"$root/usr/lib/systemd/system/bluetooth.service"

step "Apply the base worker config (OS fields need rpm-ostree: left out with --skip-os)"
run "$agent" once-from examples/00-worker-base.yaml --root "$root" --skip-os --skip-reboot

step "Validate the node against it"
run "$agent" validate --config examples/00-worker-base.yaml --root "$root"

step "Drift: someone edits a managed file and chmods another; every mismatch is reported"
echo "pool rogue.example.com" >>"$root/etc/chrony.conf"
chmod 0600 "$root/etc/sysctl.d/99-worker.conf"
run "$agent" validate --config examples/00-worker-base.yaml --root "$root" || echo "(exit $?)"

step "The plan to the files-only change: no reboot, no drain"
run "$agent" diff examples/00-worker-base.yaml examples/01-worker-files-only.yaml

step "Apply it (re-writing the drifted files too) and validate"
run "$agent" once-from examples/01-worker-files-only.yaml --root "$root" --skip-os --skip-reboot
run "$agent" validate --config examples/01-worker-files-only.yaml --root "$root"

step "A kernel-argument change reboots (JSON plan, as scripts consume it)"
run "$agent" diff examples/01-worker-files-only.yaml examples/02-worker-kargs.yaml --json

step "An NTP change reboots by default, restarts chronyd under a node-disruption policy"
printf '$ %s | tail -3\n' "$agent diff examples/00-worker-base.yaml examples/03-worker-chrony.yaml"
"$agent" diff examples/00-worker-base.yaml examples/03-worker-chrony.yaml | tail -3
printf '$ %s | tail -3\n' "$agent diff examples/00-worker-base.yaml examples/03-worker-chrony.yaml --policy examples/policy.yaml"
"$agent" diff examples/00-worker-base.yaml examples/03-worker-chrony.yaml --policy examples/policy.yaml | tail -3

step "chrony.conf's OS original is kept under orig/, restored when no config manages the file"
run cat "$root/etc/machine-config-daemon/orig/etc/chrony.conf.mcdorig"
