#!/usr/bin/env bash
# Installs everything the build, the demo and the tests need on a fresh Debian 12 machine.
# Idempotent: packages already present are skipped quickly.
set -euo pipefail

# Packages, one group per purpose. Add to the group your code needs.
packages=(
  # build: ostree crate links Debian's libostree 2022.7
  pkg-config libostree-dev
  # build: the selinux crate binds libselinux with bindgen (libclang and its headers)
  libselinux1-dev libclang1-14 libclang-common-14-dev
  # real components used by tests
  ostree gir1.2-ostree-1.0 ignition dbus-daemon python3-dbusmock curl
  # the order of the agent's writes and syncs, traced (agent/tests/write_order.rs)
  strace
  # the rpm-ostree stand-in's tests: a GDBus client (python3-gi), the booted simulation and
  # cleanup of immutable deployments (util-linux unshare/nsenter, e2fsprogs chattr)
  python3-gi util-linux
  # systemctl --root: the oracle for offline unit enablement
  systemd
  # packaging checks (binutils: nm, the fakes check)
  rpm selinux-policy-dev checkpolicy semodule-utils policycoreutils selinux-utils setools bzip2 binutils
  # man pages and completions (docgen's tests, rpm-spec/check.sh, units/check.sh): man(1) and
  # groff render the pages; zsh and fish check that their completion scripts parse
  man-db groff-base zsh fish
  # systemd in a container and VMs (qemu-utils pinned to bookworm: a newer qemu-utils from
  # backports breaks bookworm's qemu-system 7.2, and installing it alone removes qemu-img)
  systemd-container qemu-system-x86 qemu-utils/bookworm busybox-static debootstrap cpio kmod e2fsprogs
  # fuzzing: libfuzzer-sys builds libFuzzer's C++ runtime from source (tests/fuzz.sh)
  g++
  # pinned image sets: a real container runtime's CRI image service and a real registry with
  # TLS and htpasswd (apache2-utils), images pushed and inspected with skopeo
  containerd docker-registry apache2-utils skopeo
  # the OS rebase from local container storage (agent/tests/os_local_image.rs): real podman,
  # and skopeo (above) judging the temporary signature policy
  podman
  # benchmarks
  nginx-light wrk openssl
  # tests/flake-hunt.sh --stress: the test tiers repeated beside a CPU load
  stress-ng
  # the docs' link check (tests/doc_links.py)
  python3
  # the hook tests' ansible-core venv (below)
  python3-venv
  # the alert rules' tests (promtool test rules, agent/src/metrics/alert_rules.rs)
  prometheus
  # the status page rendered in a real browser (tests/cluster/tests/status_page.rs)
  chromium
)

missing=()
for p in "${packages[@]}"; do
  name=${p%%/*}
  if [ "$name" = qemu-utils ]; then
    # the machine ships qemu-utils 10 from backports, which conflicts with bookworm's qemu-system
    dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null | grep -q '^1:7\.' || missing+=("$p")
    continue
  fi
  dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# kubectl: the machine has one (google-cloud-sdk); Debian's is the fallback
command -v kubectl >/dev/null || missing+=(kubernetes-client)

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # another apt run may hold the lock for a while on a fresh machine
  for i in $(seq 1 60); do
    apt-get update -qq && break
    sleep 5
  done
  apt-get install -y -qq --no-install-recommends --allow-downgrades "${missing[@]}" >/dev/null
fi

command -v cargo-nextest >/dev/null || cargo install --locked cargo-nextest

# ansible-core (the real ansible-playbook of agent/tests/hooks_e2e.rs), from the Python package
# index into a venv under target/ (the tests look for target/ansible/bin/ansible-playbook)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ ! -x "$repo/target/ansible/bin/ansible-playbook" ]; then
  echo "setup: installing ansible-core into $repo/target/ansible" >&2
  python3 -m venv "$repo/target/ansible"
  "$repo/target/ansible/bin/pip" install -q ansible-core
fi
