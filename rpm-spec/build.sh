#!/usr/bin/env bash
# Builds the mco-agent RPMs with rpmbuild and leaves them in OUTDIR.
# usage: rpm-spec/build.sh OUTDIR [--prebuilt DIR]
#   --prebuilt DIR  package DIR/mco-agent, DIR/mco-firstboot and DIR/mco-sysroot-status (e.g. target/release), a
#                   policy module built here by selinux/build.sh and the man pages and shell
#                   completions DIR/mco-docgen writes here, instead of running
#                   `cargo build --release`, selinux/build.sh and mco-docgen in %build
# On Debian, macros.debian-compat supplies the systemd and SELinux macros Debian's rpm lacks.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${1:?usage: rpm-spec/build.sh OUTDIR [--prebuilt DIR]}
shift
prebuilt=
while [ $# -gt 0 ]; do
  case $1 in
    --prebuilt) prebuilt=$(cd "${2:?--prebuilt needs a directory}" && pwd); shift 2 ;;
    *) echo "rpm-spec/build.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
die() { echo "rpm-spec/build.sh: $*" >&2; exit 1; }

spec=$HERE/mco-agent.spec
version=$(awk '$1 == "Version:" {print $2}' "$spec")
crate_version=$(awk -F'"' '/^version = / {print $2; exit}' "$ROOT/Cargo.toml")
[ "$version" = "$crate_version" ] || die "spec Version $version differs from the workspace version $crate_version"

top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
mkdir -p "$top"/{SOURCES,SPECS,BUILD,RPMS,SRPMS,tmp}
cp "$spec" "$top/SPECS/"
# Source0: the tracked and new (not ignored) files of the tree; outside a git checkout (the
# Containerfile's builder), the tree without build outputs
source_files() {
  if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do [ -e "$ROOT/$f" ] && printf '%s\0' "$f"; done
  else
    (cd "$ROOT" && find . \( -path ./target -o -path ./tests/vm/.cache \) -prune -o \
      ! -type d -printf '%P\0')
  fi
}
source_files | tar -C "$ROOT" --null -T - --transform "s,^,mco-agent-$version/," \
  -czf "$top/SOURCES/mco-agent-$version.tar.gz"

args=(--define "_topdir $top" --define "_tmppath $top/tmp")
if [ -f /etc/debian_version ]; then
  # build dependencies are Debian packages here, unknown to rpm's (empty) database
  args+=(--load "$HERE/macros.debian-compat" --nodeps)
fi
if [ -n "$prebuilt" ]; then
  artifacts=$top/artifacts
  mkdir -p "$artifacts"
  for bin in mco-agent mco-firstboot mco-sysroot-status kubectl-mco mco-docgen; do
    [ -x "$prebuilt/$bin" ] || die "$prebuilt/$bin: missing (build it first)"
  done
  cp "$prebuilt/mco-agent" "$prebuilt/mco-firstboot" "$prebuilt/mco-sysroot-status" "$prebuilt/kubectl-mco" "$artifacts/"
  "$ROOT/selinux/build.sh" "$artifacts"
  "$prebuilt/mco-docgen" "$ROOT/docs/man" "$artifacts/docs" >/dev/null
  args+=(--define "mco_prebuilt $artifacts")
fi
rpmbuild -bb "${args[@]}" "$top/SPECS/mco-agent.spec" >"$top/rpmbuild.log" 2>&1 ||
  { tail -40 "$top/rpmbuild.log" >&2; die "rpmbuild failed"; }
mkdir -p "$OUT"
find "$top/RPMS" -name '*.rpm' -exec cp {} "$OUT/" \;
ls "$OUT"/*.rpm
