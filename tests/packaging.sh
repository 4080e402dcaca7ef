#!/usr/bin/env bash
# Packaging checks (tests/run.sh runs them): the systemd units, the SELinux module against the
# full reference policy, the RPMs (rpmbuild with the spec, packaging the debug binaries cargo
# built once; tests/packaging-from-source.sh runs the spec's own from-source %build), and the
# Containerfile's inputs. Root; about a minute once the binaries are built (the linked reference
# policy is cached under target/packaging-cache).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build -q -p mco-agent -p mco-firstboot -p mco-sysroot-status
# the man page and completion generator, on its own as the spec builds it
cargo build -q -p mco-docgen
# the kubectl plugin's package (built on its own, as the spec builds it)
cargo build -q -p kubectl-mco
units/check.sh
selinux/check.sh
rpm-spec/check.sh

fail() { echo "tests/packaging.sh: FAIL: $*" >&2; exit 1; }

# The in-memory fakes (feature `fakes` of mco-agent, for tests) are not in what ships: the
# features cargo resolves for the spec's `cargo build -p mco-agent -p mco-firstboot
# -p mco-sysroot-status` leave
# `fakes` out (checked against a resolution that has it, so a changed output cannot pass), and
# the debug binaries built above, which keep their symbols, name no fake type.
shipped_features() { cargo tree --locked -q -p mco-agent -p mco-firstboot -p mco-sysroot-status -e features,normal -i mco-agent "$@"; }
with_fakes=$(shipped_features --features mco-agent/fakes)
grep -qF 'mco-agent feature "fakes"' <<<"$with_fakes" ||
  fail "cargo tree does not show the fakes feature even when asked for it (output changed?)"
shipped=$(shipped_features)
! grep -qF 'mco-agent feature "fakes"' <<<"$shipped" ||
  fail "the shipped binaries are built with mco-agent's fakes feature: $shipped"
# FakeNodeApi is in mco-kube (feature `fakes`, turned on by the agent's), which the companion
# links too
kube_features() { cargo tree --locked -q -p mco-agent -p mco-firstboot -p mco-sysroot-status -p mco-companion -e features,normal -i mco-kube "$@"; }
grep -qF 'mco-kube feature "fakes"' <<<"$(kube_features --features mco-kube/fakes)" ||
  fail "cargo tree does not show mco-kube's fakes feature even when asked for it (output changed?)"
shipped_kube=$(kube_features)
! grep -qF 'mco-kube feature "fakes"' <<<"$shipped_kube" ||
  fail "the shipped binaries are built with mco-kube's fakes feature: $shipped_kube"
fakes='Fake(OsUpdater|Systemd|Rebooter|LoginManager|NodeApi|Cluster)\b'
for bin in mco-agent mco-firstboot; do
  symbols=$(nm -C "${CARGO_TARGET_DIR:-target}/debug/$bin") || fail "nm $bin"
  [ -n "$symbols" ] || fail "$bin has no symbols to check"
  ! grep -qE "$fakes" <<<"$symbols" || fail "$bin contains a fake: $(grep -oE "$fakes" <<<"$symbols" | sort -u | tr '\n' ' ')"
done
echo "tests/packaging.sh: no fake in the shipped binaries (feature not resolved, no symbol)"

# libostree is linked by mco-sysroot-status alone (tests/lib/elf-checks.sh says why).
. tests/lib/elf-checks.sh
debug=${CARGO_TARGET_DIR:-target}/debug
for bin in mco-agent mco-firstboot; do check_no_ostree "$debug/$bin"; done
check_has_ostree "$debug/mco-sysroot-status"
echo "tests/packaging.sh: libostree is linked by mco-sysroot-status only (readelf -d NEEDED)"

# The spec's own %build (`cargo build --release` inside rpmbuild, from the source tarball) is
# tests/packaging-from-source.sh: about 8-15 minutes on 2 cores, so outside tests/run.sh; the
# RPMs above are built by the same spec and rpmbuild from the debug binaries built once.

# The Containerfile cannot be built here (no container engine, no registry): check that every
# file it copies from the build context exists, and that it copies every cargo workspace member
# (cargo refuses to build a workspace with a member missing).
sources=()
while read -r instruction rest; do
  [ "$instruction" = COPY ] || continue
  case $rest in --from=*) continue ;; esac
  read -r -a words <<<"$rest"
  [ ${#words[@]} -ge 2 ] || fail "Containerfile: COPY $rest: no destination"
  for src in "${words[@]:0:${#words[@]}-1}"; do
    [ -e "$src" ] || fail "Containerfile copies $src, which is not in the tree"
    sources+=("${src%/}")
  done
done < <(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' Containerfile)
[ ${#sources[@]} -gt 0 ] || fail "Containerfile copies nothing"
# the members, and the path dependencies outside them (the feature-unification crates)
members="$(sed -n '/^members *=/{s/.*\[//; s/\].*//; s/[",]/ /g; p}' Cargo.toml)
  $(sed -n '/^\[workspace.dependencies\]/,/^\[/{s/.*path *= *"\([^"]*\)".*/\1/p}' Cargo.toml)"
for member in $members; do
  covered=no
  for src in "${sources[@]}"; do
    case "$member/" in "$src"/*) covered=yes ;; esac
    [ "$src" = "$member/Cargo.toml" ] && covered=yes
  done
  [ $covered = yes ] || fail "Containerfile does not copy workspace member or path dependency $member"
done
echo "tests/packaging.sh: Containerfile copies ${#sources[@]} existing paths, every workspace member included"
