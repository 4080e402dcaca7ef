#!/usr/bin/env bash
# Builds the RPMs here (rpm-spec/build.sh, with the debug binaries cargo built), checks what
# `rpm -qlp` lists, the scriptlets and dependencies, and installs them into a temporary
# `rpm --root` (--nodeps --noscripts: the root has no rpm-ostree or systemd), then verifies them.
# usage: rpm-spec/check.sh      (after `cargo build -p mco-agent -p mco-firstboot
#                                 -p mco-sysroot-status -p kubectl-mco -p mco-docgen`)
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
plugin=$(ls "$work"/rpms/kubectl-mco-[0-9]*.x86_64.rpm)

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
lists "$main" /usr/bin/mco-agent /usr/libexec/mco-firstboot /usr/libexec/mco-sysroot-status \
  /usr/lib/systemd/system/mco-agent.service /usr/lib/systemd/system/mco-firstboot.service \
  /usr/lib/systemd/system-preset/80-mco-agent.preset /usr/lib/tmpfiles.d/mco-agent.conf \
  /usr/lib/mco-agent/config.d /etc/mco-agent/config.d \
  /usr/share/licenses/mco-agent/LICENSE
lists "$plugin" /usr/bin/kubectl-mco
lists "$selinux" /usr/share/selinux/packages/targeted/mco_agent.pp.bz2 \
  /usr/share/selinux/packages/targeted/mco_agent_port.cil \
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
  'semodule .*-s targeted .*-i /usr/share/selinux/packages/targeted/mco_agent.pp.bz2 /usr/share/selinux/packages/targeted/mco_agent_port.cil'
contains "removes both modules" "$(rpm -qp --scripts "$selinux")" 'semodule .*-s targeted .*-r mco_agent_port mco_agent'
contains "the module is a bzip2'd policy package" "$(rpm2cpio "$selinux" | cpio -i --to-stdout ./usr/share/selinux/packages/targeted/mco_agent.pp.bz2 2>/dev/null | bzip2 -dc | head -c 4 | od -An -tx1)" \
  '^ 8f ff 7c f9$'

# install both into an empty root and verify every file
r=$work/root
quiet=()
[ -f /etc/debian_version ] && quiet=(--force-debian) # Debian's rpm warns against installing
rpm --root "$r" --dbpath /usr/lib/sysimage/rpm --initdb
rpm --root "$r" --dbpath /usr/lib/sysimage/rpm -i --nodeps --noscripts "${quiet[@]}" "$main" "$selinux" "$plugin" ||
  fail "the RPMs do not install"
rpm --root "$r" --dbpath /usr/lib/sysimage/rpm -V --nodeps mco-agent mco-agent-selinux kubectl-mco ||
  fail "rpm -V reports changed files"
[ -x "$r/usr/bin/mco-agent" ] && [ -x "$r/usr/libexec/mco-firstboot" ] && [ -x "$r/usr/bin/kubectl-mco" ] &&
  [ -x "$r/usr/libexec/mco-sysroot-status" ] || fail "binaries not executable"
cmp -s "$r/usr/lib/systemd/system/mco-agent.service" "$ROOT/units/mco-agent.service" ||
  fail "the packaged mco-agent.service differs from units/"
checks=$((checks + 4))

# man pages: every page mco-docgen writes for the agent and mco-firstboot is packaged (gzipped
# or not, as the distribution's rpmbuild compresses them), man(1) finds and renders the installed
# ones, and each unit's Documentation= names a packaged page
"$TARGET/debug/mco-docgen" "$ROOT/docs/man" "$work/docs" >/dev/null || fail "mco-docgen failed"
pages=$(cd "$work/docs/man/man8" && ls mco-agent.8 mco-agent-*.8 mco-firstboot.8)
[ "$(wc -w <<<"$pages")" -ge 10 ] || fail "mco-docgen wrote only: $pages"
listing=$(rpm -qlp "$main")
for page in $pages; do
  grep -qE "^/usr/share/man/man8/${page//./\\.}(\.(gz|bz2|xz|zst))?\$" <<<"$listing" ||
    fail "$(basename "$main") does not contain the man page $page"
  checks=$((checks + 1))
done
# shows PAGE WHAT...: `man PAGE` in the installed root prints every WHAT
shows() {
  local page=$1 out
  shift
  # one line per paragraph (no wrapping, no hyphenation), ASCII, justification spaces squeezed
  out=$(MANPATH="$r/usr/share/man" MANWIDTH=1000 LC_ALL=C man "$page" 2>&1 | tr -s ' ') ||
    fail "man $page: $out"
  for what in "$@"; do
    grep -qF -- "$what" <<<"$out" || fail "man $page does not show '$what': $(head -20 <<<"$out")"
  done
  checks=$((checks + 1))
}
shows mco-agent-start 'mco-agent start [--root ROOT]' 'EXIT STATUS' '/etc/mco-agent/config.d/*.toml' \
  'MCO_AGENT_CONFIG_SERVER' 'SEE ALSO'
shows mco-agent 'mco-agent-config(8)' 'mco-agent-status(8)' 'EXAMPLES'
shows mco-firstboot '--retry-every' '/etc/ignition-machine-config-encapsulated.json'
for unit in mco-agent mco-firstboot; do
  documented=$(sed -n 's/^Documentation=//p' "$r/usr/lib/systemd/system/$unit.service" | tr ' ' '\n' | sed -n 's/^man:\([^(]*\)(8)$/\1/p')
  [ -n "$documented" ] || fail "$unit.service: Documentation= names no man page"
  for page in $documented; do
    ls "$r/usr/share/man/man8/$page.8"* >/dev/null 2>&1 || fail "$unit.service: Documentation= names $page(8), not installed"
    checks=$((checks + 1))
  done
done

# shell completions: installed where each shell looks for them, and they parse
for bin in mco-agent mco-firstboot; do
  for script in "bash /usr/share/bash-completion/completions/$bin" \
    "zsh /usr/share/zsh/site-functions/_$bin" "fish /usr/share/fish/vendor_completions.d/$bin.fish"; do
    read -r shell path <<<"$script"
    [ -s "$r$path" ] || fail "$path: not installed"
    out=$("$shell" -n "$r$path" 2>&1) || fail "$shell -n $path: $out"
    checks=$((checks + 1))
  done
done
echo "rpm-spec/check.sh: $(basename "$main") and $(basename "$selinux") build, list and install; $checks checks passed"
