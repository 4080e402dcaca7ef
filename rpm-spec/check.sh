#!/usr/bin/env bash
# Builds the RPMs here (rpm-spec/build.sh, with the debug binaries cargo built), checks what
# `rpm -qlp` lists, the scriptlets and dependencies, and installs them into a temporary
# `rpm --root` (--nodeps --noscripts: the root has no rpm-ostree or systemd), then verifies them.
# usage: rpm-spec/check.sh      (after `cargo build -p mco-agent -p mco-firstboot`)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "rpm-spec/check.sh: FAIL: $*" >&2; exit 1; }

"$HERE/build.sh" "$work/rpms" --prebuilt "$TARGET/debug" >/dev/null
main=$(ls "$work"/rpms/mco-agent-[0-9]*.x86_64.rpm)
selinux=$(ls "$work"/rpms/mco-agent-selinux-[0-9]*.noarch.rpm)

checks=0
# lists RPM PATH...: rpm -qlp RPM lists every PATH
lists() {
  local rpm=$1 files
  shift
  files=$(rpm -qlp "$rpm")
  for path in "$@"; do
    grep -qxF "$path" <<<"$files" || fail "$(basename "$rpm") does not contain $path"
    checks=$((checks + 1))
  done
}
lists "$main" /usr/bin/mco-agent /usr/libexec/mco-firstboot \
  /usr/lib/systemd/system/mco-agent.service /usr/lib/systemd/system/mco-firstboot.service \
  /usr/lib/systemd/system-preset/80-mco-agent.preset /usr/lib/tmpfiles.d/mco-agent.conf \
  /usr/lib/mco-agent/config.d /etc/mco-agent/config.d \
  /usr/share/licenses/mco-agent/LICENSE
lists "$selinux" /usr/share/selinux/packages/targeted/mco_agent.pp.bz2 \
  /usr/share/selinux/devel/include/distributed/mco_agent.if

# contains WHAT TEXT PATTERN: TEXT has a line matching PATTERN
contains() {
  grep -qE "$3" <<<"$2" || fail "$1: nothing matches /$3/"
  checks=$((checks + 1))
}
contains "the policy package carries the license" "$(rpm -qlp "$selinux")" '^/usr/share/licenses/mco-agent[^/]*/LICENSE$'
scripts=$(rpm -qp --scripts "$main")
contains "enables the units on install" "$scripts" 'systemctl .*preset mco-agent.service mco-firstboot.service'
contains "disables them on removal" "$scripts" 'systemctl .*disable .*mco-agent.service'
contains "restarts the agent on upgrade" "$scripts" 'try-restart mco-agent.service'
contains "needs rpm-ostree" "$(rpm -qp --requires "$main")" '^rpm-ostree$'
contains "pulls the policy where SELinux is" "$(rpm -qp --requires "$main")" \
  '^\(mco-agent-selinux = .* if selinux-policy-targeted\)$'
contains "installs the policy module" "$(rpm -qp --scripts "$selinux")" \
  'semodule .*-s targeted .*-i /usr/share/selinux/packages/targeted/mco_agent.pp.bz2'
contains "the module is a bzip2'd policy package" "$(rpm2cpio "$selinux" | cpio -i --to-stdout ./usr/share/selinux/packages/targeted/mco_agent.pp.bz2 2>/dev/null | bzip2 -dc | head -c 4 | od -An -tx1)" \
  '^ 8f ff 7c f9$'

# install both into an empty root and verify every file
r=$work/root
quiet=()
[ -f /etc/debian_version ] && quiet=(--force-debian) # Debian's rpm warns against installing
rpm --root "$r" --dbpath /usr/lib/sysimage/rpm --initdb
rpm --root "$r" --dbpath /usr/lib/sysimage/rpm -i --nodeps --noscripts "${quiet[@]}" "$main" "$selinux" ||
  fail "the RPMs do not install"
rpm --root "$r" --dbpath /usr/lib/sysimage/rpm -V --nodeps mco-agent mco-agent-selinux ||
  fail "rpm -V reports changed files"
[ -x "$r/usr/bin/mco-agent" ] && [ -x "$r/usr/libexec/mco-firstboot" ] || fail "binaries not executable"
cmp -s "$r/usr/lib/systemd/system/mco-agent.service" "$ROOT/units/mco-agent.service" ||
  fail "the packaged mco-agent.service differs from units/"
checks=$((checks + 4))
echo "rpm-spec/check.sh: $(basename "$main") and $(basename "$selinux") build, list and install; $checks checks passed"
