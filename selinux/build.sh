#!/usr/bin/env bash
# Builds the mco_agent policy module with the distribution's policy devel Makefile.
# usage: selinux/build.sh OUTDIR      ->  OUTDIR/mco_agent.pp
# Needs selinux-policy-devel (Fedora/RHEL) or selinux-policy-dev (Debian). A module built on
# Debian is for checks only: interfaces expand to distribution-specific rules, so the shipped
# module is built on the target distribution (the RPM's %build).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: selinux/build.sh OUTDIR}
MAKEFILE=${SELINUX_DEVEL_MAKEFILE:-/usr/share/selinux/devel/Makefile}
[ -f "$MAKEFILE" ] ||
  { echo "selinux/build.sh: no $MAKEFILE (install selinux-policy-devel or selinux-policy-dev)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$HERE"/mco_agent.te "$HERE"/mco_agent.fc "$HERE"/mco_agent.if "$work/"
if ! make -C "$work" -f "$MAKEFILE" mco_agent.pp >"$work/build.log" 2>&1; then
  cat "$work/build.log" >&2
  echo "selinux/build.sh: compiling mco_agent.pp failed" >&2
  exit 1
fi
mkdir -p "$OUT"
cp "$work/mco_agent.pp" "$OUT/"
