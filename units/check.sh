#!/usr/bin/env bash
# Checks the units with `systemd-analyze verify` (systemd 252 on Debian 12) in a temporary root
# that has the system's unit directory, our units, tmpfiles and preset, and the binaries their
# ExecStart names (the debug binaries cargo built); then applies the tmpfiles in that root.
# Documentation= is checked too: verify runs man(1) on each man: page, here the pages mco-docgen
# writes into the root (MANPATH).
# usage: units/check.sh      (after `cargo build -p mco-agent -p mco-firstboot -p mco-docgen`)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
r=$(mktemp -d)
trap 'rm -rf "$r"' EXIT
fail() { echo "units/check.sh: FAIL: $*" >&2; exit 1; }

mkdir -p "$r/usr/lib/systemd" "$r/usr/lib/tmpfiles.d" "$r/usr/lib/systemd/system-preset" \
  "$r/usr/bin" "$r/usr/libexec" "$r/etc" "$r/run"
cp -a /usr/lib/systemd/system "$r/usr/lib/systemd/"
install -m644 "$HERE/mco-agent.service" "$HERE/mco-firstboot.service" "$r/usr/lib/systemd/system/"
install -m644 "$HERE/mco-agent.conf" "$r/usr/lib/tmpfiles.d/"
install -m644 "$HERE/80-mco-agent.preset" "$r/usr/lib/systemd/system-preset/"
install -m755 "$TARGET/debug/mco-agent" "$r/usr/bin/mco-agent"
install -m755 "$TARGET/debug/mco-firstboot" "$r/usr/libexec/mco-firstboot"

"$TARGET/debug/mco-docgen" "$ROOT/docs/man" "$r/usr/share" >/dev/null || fail "mco-docgen failed"
out=$(MANPATH="$r/usr/share/man" systemd-analyze verify --root="$r" \
  /usr/lib/systemd/system/mco-agent.service /usr/lib/systemd/system/mco-firstboot.service 2>&1) ||
  fail "systemd-analyze verify: $out"
# verify passes with warnings too: any line about our units is a defect
if grep -E 'mco-(agent|firstboot)' <<<"$out"; then fail "systemd-analyze verify warns about the units"; fi

# the hardening holds: exposure (systemd's 0-10 score) at most 3.0 for the agent (2.7 now) and
# 5.0 for mco-firstboot (4.8 now); what remains is what the job needs: root, writing /etc, /var
# and /home, the network
for unit_max in mco-agent:30 mco-firstboot:50; do
  unit=${unit_max%:*} max=${unit_max#*:}
  sec=$(cd "$r" && systemd-analyze security --offline=true --threshold="$max" "$HERE/$unit.service" 2>&1) ||
    fail "$unit.service: systemd-analyze security exposure above ${max:0:1}.${max:1}: $(tail -1 <<<"$sec")"
done

# each ExecStart binary is the one the unit names, and it runs
for unit in mco-agent mco-firstboot; do
  exe=$(awk -F'[= ]' '/^ExecStart=/{print $2}' "$HERE/$unit.service")
  [ -x "$r$exe" ] || fail "$unit.service: ExecStart $exe is not installed by this check"
done
"$r/usr/bin/mco-agent" --help >/dev/null || fail "mco-agent --help fails"
# mco-firstboot takes the unit's flags: on a root without an encapsulated config it has nothing to do
fb_args=$(sed -n 's|^ExecStart=/usr/libexec/mco-firstboot||p' "$HERE/mco-firstboot.service")
# shellcheck disable=SC2086 # the unit's arguments, split as systemd splits them (no quoting there)
fb_out=$("$r/usr/libexec/mco-firstboot" $fb_args --root "$r" 2>&1) ||
  fail "mco-firstboot $fb_args fails: $fb_out"
grep -q '^first boot is complete: no ' <<<"$fb_out" || fail "mco-firstboot $fb_args: $fb_out"

# the preset enables both units; enabling creates the wants/requires links of [Install]
systemctl --root="$r" preset mco-agent.service mco-firstboot.service >/dev/null 2>&1 ||
  fail "systemctl preset failed"
[ -L "$r/etc/systemd/system/multi-user.target.wants/mco-agent.service" ] || fail "mco-agent.service not enabled by the preset"
[ -L "$r/etc/systemd/system/firstboot-osupdate.target.requires/mco-firstboot.service" ] ||
  fail "mco-firstboot.service not RequiredBy=firstboot-osupdate.target"

systemd-tmpfiles --root="$r" --create || fail "systemd-tmpfiles --create failed"
for d in /run/mco-agent /etc/machine-config-daemon; do
  [ "$(stat -c '%a %U' "$r$d" 2>/dev/null)" = "755 root" ] || fail "tmpfiles did not create $d 0755 root"
done
echo "units/check.sh: mco-agent.service and mco-firstboot.service verify, enable by preset, tmpfiles apply"
