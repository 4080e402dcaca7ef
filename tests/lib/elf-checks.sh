# Sourced by tests/packaging.sh and tests/packaging-from-source.sh (not run on its own): the
# checks of which shared libraries a built binary links. The caller defines `fail MESSAGE`.
#
# libostree (and the sixty-odd libraries it brings: glib, gio, gpgme, curl, krb5, icu, ...) is
# linked by mco-sysroot-status alone, never by the daemon (docs/benchmarks.md "Idle memory"):
# the dynamic section's NEEDED entries of the agent and mco-firstboot name none of them, and
# the helper's do name libostree (so the check cannot pass on an unreadable dynamic section).

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }

check_no_ostree() {
  local bin=$1 libs
  libs=$(needed "$bin") || fail "readelf -d $bin"
  grep -q '^libc\.so' <<<"$libs" || fail "readelf -d $bin lists no libc (output changed?): $libs"
  ! grep -qE '^lib(ostree|glib|gio|gobject)-' <<<"$libs" ||
    fail "$bin links $(grep -E '^lib(ostree|glib|gio|gobject)-' <<<"$libs" | tr '\n' ' ')- only mco-sysroot-status may (the agent runs it for the sysroot)"
}

check_has_ostree() {
  needed "$1" | grep -q '^libostree-1\.so' ||
    fail "$1 does not link libostree: is the sysroot still read with it? (NEEDED: $(needed "$1" | tr '\n' ' '))"
}
