#!/usr/bin/env bash
# Packaging checks (tests/run.sh runs them): the systemd units, the SELinux module against the
# full reference policy, the RPMs, and the Containerfile's inputs. Root; about 1 min on a fresh
# machine (the linked reference policy is cached under target/packaging-cache).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build -q -p mco-agent -p mco-firstboot
units/check.sh
selinux/check.sh
rpm-spec/check.sh

# The Containerfile cannot be built here (no container engine, no registry): check that every
# file it copies from the build context exists, and that it copies every cargo workspace member
# (cargo refuses to build a workspace with a member missing).
fail() { echo "tests/packaging.sh: FAIL: $*" >&2; exit 1; }
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
members=$(sed -n '/^members *=/{s/.*\[//; s/\].*//; s/[",]/ /g; p}' Cargo.toml)
for member in $members; do
  covered=no
  for src in "${sources[@]}"; do
    case "$member/" in "$src"/*) covered=yes ;; esac
    [ "$src" = "$member/Cargo.toml" ] && covered=yes
  done
  [ $covered = yes ] || fail "Containerfile does not copy workspace member $member"
done
echo "tests/packaging.sh: Containerfile copies ${#sources[@]} existing paths, every workspace member included"
