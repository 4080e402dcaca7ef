#!/usr/bin/env bash
# The spec's own %build, as a distribution's build system runs it: rpmbuild from the source
# tarball runs `cargo build --release --locked`, selinux/build.sh and mco-docgen; the binaries
# in the RPM must run, link what they should, and the packages hold the policy module, the man
# pages and the completions. About 8-15 minutes on 2 cores (the fat-LTO release build), so it is
# not part of tests/run.sh, whose packaging stage (tests/packaging.sh, rpm-spec/check.sh) builds
# the RPMs with the same spec from the debug binaries built once (docs/testing.md). Run it when
# the spec, rpm-spec/build.sh, the release profile or a build script changes. Root.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "tests/packaging-from-source.sh: FAIL: $*" >&2; exit 1; }

# libostree is linked by mco-sysroot-status alone (tests/packaging.sh checks the debug build
# the same way).
. tests/lib/elf-checks.sh

from_source=$(mktemp -d)
trap 'rm -rf "$from_source"' EXIT
rpm-spec/build.sh "$from_source/rpms" >/dev/null
version=$(awk -F'"' '/^version = / {print $2; exit}' Cargo.toml)
(cd "$from_source" && rpm2cpio rpms/mco-agent-"$version"-*.x86_64.rpm | cpio -id --quiet)
for bin in usr/bin/mco-agent usr/libexec/mco-firstboot usr/libexec/mco-sysroot-status; do
  got=$("$from_source/$bin" --version) || fail "$bin from the RPM built from source does not run"
  [ "$got" = "$(basename "$bin") $version" ] || fail "$bin --version says '$got'"
done
# the release build: what actually ships
for bin in usr/bin/mco-agent usr/libexec/mco-firstboot; do check_no_ostree "$from_source/$bin"; done
check_has_ostree "$from_source/usr/libexec/mco-sysroot-status"
# the listing first: `rpm | grep -q` would fail under pipefail when grep stops reading early
listing=$(rpm -qlp "$from_source"/rpms/mco-agent-selinux-"$version"-*.noarch.rpm)
grep -qxF /usr/share/selinux/packages/targeted/mco_agent.pp.bz2 <<<"$listing" ||
  fail "the -selinux RPM built from source lacks the policy module"
# %build ran mco-docgen: the man pages and completions are in the package
[ -s "$from_source/usr/share/bash-completion/completions/mco-agent" ] ||
  fail "the RPM built from source lacks the bash completion of mco-agent"
ls "$from_source"/usr/share/man/man8/mco-agent-start.8* >/dev/null 2>&1 ||
  fail "the RPM built from source lacks mco-agent-start(8)"
echo "tests/packaging-from-source.sh: the RPMs build from source (rpmbuild %build), their binaries run ($version)"
# The shipped sizes (release profile, stripped), for docs/benchmarks.md: a figure, not a check.
(cd "$from_source" && stat -c 'tests/packaging-from-source.sh: size %n: %s bytes' usr/bin/mco-agent \
  usr/libexec/mco-firstboot usr/libexec/mco-sysroot-status rpms/mco-agent-"$version"-*.x86_64.rpm)
