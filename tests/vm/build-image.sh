#!/usr/bin/env bash
# Builds, or reuses from the cache, the Debian 12 images the VM tests and the nspawn tier boot.
# Debian packages only. Needs root. Idempotent: a stage is rebuilt only when its
# recipe (the stage function and the guest files it copies) or an input stage changed.
#
# usage: tests/vm/build-image.sh [STAGE...]          (no STAGE: all)
#   kernel  Debian's kernel package, extracted: vmlinux (ELF, qemu boots it through PVH),
#           kver, a module subset (virtio, ext4, 9p, fw_cfg, overlay...) with its modules.dep
#   rootfs  debootstrap minbase + systemd, dbus, udev, ostree...: boots with
#           `systemd-nspawn -D $MCO_VM_CACHE/rootfs --boot --register=no` (never write into it:
#           use an overlay or --volatile; a rebuild replaces it)
#   initrd  busybox initramfs: loads virtio/ext4, runs ostree-prepare-root when ostree= is given
#   disk    disk.raw: plain ext4 root disk (rootfs + modules), root=/dev/vda
#   ostree  ostree.raw: ostree sysroot disk; commits debian/mco/a and debian/mco/b of the OS,
#           a deployed; boot it through its BLS entries (/boot/loader/entries)
#   selinux selinux.raw: the plain disk with Debian's reference policy (selinux-policy-default),
#           the project's mco_agent module installed, SELINUX=permissive, every file labelled;
#           boot it with `security=selinux selinux=1` (not built unless asked for)
#
# Cache: $MCO_VM_CACHE (default tests/vm/.cache), about 1.5 GB. Debian packages are not
# re-fetched while a stage is current: `rm -rf $MCO_VM_CACHE/rootfs*` forces a fresh debootstrap.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
GUEST=$HERE/guest
C=${MCO_VM_CACHE:-$HERE/.cache}
mkdir -p "$C"
C=$(cd "$C" && pwd)
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
log() { echo "[build-image $(date +%T)] $*" >&2; }
die() { echo "build-image: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, ostree sysroot ownership)"

# One builder at a time per cache (tests and engineers may call this concurrently).
exec 9>"$C/.lock"
flock 9

# The guest packages. systemd brings journald and logind; ostree-boot brings ostree-remount and
# ostree-finalize-staged; qemu-guest-agent is how the harness runs commands in a VM.
GUEST_PACKAGES=systemd,systemd-sysv,dbus,udev,kmod,iproute2,procps,ostree,ostree-boot,qemu-guest-agent
# Modules copied into the VM images (with their dependencies), and those the initramfs loads.
VM_MODULES="virtio_pci virtio_blk ext4 9pnet_virtio 9p virtio_net virtio_rng virtio_console
  qemu_fw_cfg autofs4 loop overlay configfs squashfs efivarfs fuse"
INITRD_MODULES="virtio_pci virtio_blk ext4"

# rm -rf that also removes ostree deployments in a sysroot at DIR or DIR/* (a deployment's
# root directory is immutable)
remove_tree() {
  local d
  for d in "$1"/ostree/deploy/*/deploy/*/ "$1"/*/ostree/deploy/*/deploy/*/; do
    [ -d "$d" ] && chattr -i "$d"
  done
  rm -rf "$1"
}

mirror() {
  awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources
}

# The kernel package linux-image-amd64 points at today (never a hard-coded version: Debian replaces it with every point release).
kernel_package() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'
}

stage_kernel() {
  local out=$1 pkg kv
  pkg=$(kernel_package)
  [ -n "$pkg" ] || die "apt-cache knows no linux-image-amd64 (run apt-get update)"
  mkdir -p "$out/pkg"
  chmod 777 "$out/pkg" # apt-get download drops privileges to _apt
  (cd "$out/pkg" && apt-get download -q "$pkg" >/dev/null 2>&1) ||
    { apt-get update -qq && (cd "$out/pkg" && apt-get download -q "$pkg" >/dev/null); }
  dpkg -x "$out"/pkg/*.deb "$out/x"
  kv=$(ls "$out/x/lib/modules")
  echo "$kv" >"$out/kver"
  # the bzImage carries an xz-compressed ELF: unpack it so qemu boots it through PVH (faster than the bzImage)
  /usr/bin/python3 - "$out/x/boot/vmlinuz-$kv" "$out/vmlinux" <<'EOF'
import lzma, sys
data = open(sys.argv[1], "rb").read()
start = data.find(b"\xfd7zXZ\x00")
if start < 0:
    sys.exit(f"{sys.argv[1]}: no xz payload")
open(sys.argv[2], "wb").write(lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[start:]))
EOF
  depmod -b "$out/x" "$kv"
  local src=$out/x/lib/modules/$kv dst=$out/mods/lib/modules/$kv m f
  mkdir -p "$dst"
  for m in $VM_MODULES; do
    modprobe -d "$out/x" -S "$kv" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
  done | sort -u | while read -r f; do
    install -D -m644 "$f" "$dst/${f#"$src"/}"
  done
  cp "$src"/modules.builtin "$src"/modules.builtin.modinfo "$src"/modules.order "$dst/"
  depmod -b "$out/mods" "$kv"
  rm -rf "$out/x" "$out/pkg"
}

stage_rootfs() {
  local r=$1 u
  log "debootstrap (50-90 s)"
  debootstrap --variant=minbase --include="$GUEST_PACKAGES" bookworm "$r" "$(mirror)" \
    >"$C/debootstrap.log" 2>&1 || { tail -20 "$C/debootstrap.log" >&2; die "debootstrap failed"; }
  echo mco-test >"$r/etc/hostname"
  chroot "$r" passwd -d root >/dev/null
  printf '/dev/vda / ext4 rw,noatime 0 1\n' >"$r/etc/fstab"
  # empty machine-id: each VM / container gets its own at first boot
  : >"$r/etc/machine-id"
  install -m644 "$GUEST/10-vm.network" "$r/etc/systemd/network/10-vm.network"
  for u in systemd-networkd systemd-networkd-wait-online; do
    install -D -m644 "$GUEST/vm-only.conf" "$r/etc/systemd/system/$u.service.d/vm-only.conf"
  done
  chroot "$r" systemctl enable systemd-networkd.service >/dev/null 2>&1
  install -m644 "$GUEST/mnt-host.mount" "$r/etc/systemd/system/mnt-host.mount"
  mkdir -p "$r/mnt/host"
  chroot "$r" systemctl enable mnt-host.mount >/dev/null 2>&1
  # nothing in a test boot needs these; they cost boot time under TCG or start at random times
  for u in systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
    e2scrub_reap.service fstrim.timer dpkg-db-backup.timer getty@tty1.service systemd-pstore.service; do
    chroot "$r" systemctl mask "$u" >/dev/null 2>&1
  done
  # Under TCG every process a boot spawns costs a fraction of a second of emulated CPU, and
  # each boot of the VM suite pays it again: the generators and early units no test guest
  # uses are masked (no encrypted, verity or GPT-auto volumes, no SysV scripts, no console
  # login: the harness talks to qemu-guest-agent; no debug, trace, hugepage, FUSE-control or
  # configfs mounts; no device-mapper or DRM modules; no utmp records).
  mkdir -p "$r/etc/systemd/system-generators"
  for g in systemd-cryptsetup-generator systemd-gpt-auto-generator systemd-hibernate-resume-generator \
    systemd-integritysetup-generator systemd-veritysetup-generator systemd-rc-local-generator \
    systemd-sysv-generator systemd-system-update-generator systemd-run-generator \
    systemd-getty-generator; do
    ln -sf /dev/null "$r/etc/systemd/system-generators/$g"
  done
  for u in modprobe@drm.service modprobe@dm_mod.service dev-hugepages.mount sys-kernel-debug.mount \
    sys-kernel-tracing.mount sys-fs-fuse-connections.mount sys-kernel-config.mount \
    systemd-update-utmp.service systemd-update-utmp-runlevel.service \
    systemd-network-generator.service; do
    chroot "$r" systemctl mask "$u" >/dev/null 2>&1
  done
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* "$r"/usr/share/doc/* \
    "$r"/usr/share/man/* "$r"/usr/share/locale/* "$r"/usr/share/info/*
}

stage_initrd() {
  local out=$1 kv i=$1/tree m
  kv=$(cat "$C/kernel/kver")
  mkdir -p "$i"/{bin,proc,sys,dev,run,sysroot} "$i/lib/modules/$kv" "$i/usr/lib/ostree"
  cp /bin/busybox "$i/bin/"
  for m in $INITRD_MODULES; do
    modprobe -d "$C/kernel/mods" -S "$kv" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
  done | awk '!seen[$0]++' | sed "s#^$C/kernel/mods/lib/modules/$kv/##" >"$i/modlist"
  while read -r m; do
    install -D -m644 "$C/kernel/mods/lib/modules/$kv/$m" "$i/lib/modules/$kv/$m"
  done <"$i/modlist"
  install -m755 "$GUEST/initrd-init" "$i/init"
  # ostree-prepare-root and the libraries it links, from the guest itself
  local r=$C/rootfs lib
  cp "$r/usr/lib/ostree/ostree-prepare-root" "$i/usr/lib/ostree/"
  for lib in $(chroot "$r" ldd /usr/lib/ostree/ostree-prepare-root | awk '/=>/{print $3} /ld-linux/{print $1}'); do
    mkdir -p "$i$(dirname "$lib")"
    cp -L "$r$lib" "$i$lib"
  done
  (cd "$i" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$out/initrd.img"
  rm -rf "$i"
}

# A copy of the rootfs to lay out an image in. Hard links keep it fast and small: only add,
# rename or delete entries in it, never write into an existing file (that would change rootfs).
stage_tree() {
  local dst=$1 kv
  kv=$(cat "$C/kernel/kver")
  cp -al "$C/rootfs" "$dst"
  mkdir -p "$dst/usr/lib/modules"
  cp -a "$C/kernel/mods/lib/modules/$kv" "$dst/usr/lib/modules/"
  install -m644 "$GUEST/modules-load.conf" "$dst/etc/modules-load.d/mco-vm.conf"
}

stage_disk() {
  local out=$1
  stage_tree "$out/tree"
  truncate -s 2G "$out/disk.raw"
  mkfs.ext4 -q -F -L root -d "$out/tree" "$out/disk.raw"
  rm -rf "$out/tree"
}

stage_ostree() {
  local out=$1 o=$1/os sr=$1/sysroot kv v
  kv=$(cat "$C/kernel/kver")
  stage_tree "$o"
  # kernel and initramfs where ostree looks for them; the ELF vmlinux boots faster
  cp "$C/kernel/vmlinux" "$o/usr/lib/modules/$kv/vmlinuz"
  cp "$C/initrd/initrd.img" "$o/usr/lib/modules/$kv/initramfs.img"
  mv "$o/etc" "$o/usr/etc"
  rm -rf "${o:?}"/{run,tmp,var/log,dev}/* "$o/boot"/*
  mkdir -p "$o/sysroot"
  ln -sfn sysroot/ostree "$o/ostree"
  # /usr is read-only in a deployment; /usr/local is persistent state under /var (the
  # Fedora CoreOS layout), which is where the tests install the agent binaries
  rm -rf "$o/usr/local"
  ln -s ../var/usrlocal "$o/usr/local"
  install -D -m644 /dev/stdin "$o/usr/lib/tmpfiles.d/mco-usrlocal.conf" <<'EOF'
d /var/usrlocal 0755 root root -
d /var/usrlocal/bin 0755 root root -
d /var/usrlocal/libexec 0755 root root -
EOF
  mkdir -p "$sr"
  ostree admin init-fs "$sr" >/dev/null
  ostree admin os-init debian --sysroot="$sr" >/dev/null
  ostree --repo="$sr/ostree/repo" config set sysroot.bootloader none
  # two commits of the OS that differ in /usr/share/mco-os-version, so a pivot is visible
  for v in a b; do
    install -D -m644 /dev/stdin "$out/version-$v/usr/share/mco-os-version" <<<"$v"
    ostree --repo="$sr/ostree/repo" commit -b "debian/mco/$v" --subject "mco test OS $v" \
      --tree=dir="$o" --tree=dir="$out/version-$v" >/dev/null
  done
  # the plain disk's kernel arguments (PLAIN_CMDLINE in src/vm.rs says why each is there)
  ostree admin deploy --sysroot="$sr" --os=debian debian/mco/a \
    --karg=root=/dev/vda --karg=rw --karg=console=ttyS0 --karg=panic=-1 --karg=no_timer_check \
    --karg=quiet >"$out/deploy.log" 2>&1 ||
    { cat "$out/deploy.log" >&2; die "ostree admin deploy failed"; }
  rm "$out/deploy.log"
  truncate -s 3G "$out/ostree.raw"
  mkfs.ext4 -q -F -L root -d "$sr" "$out/ostree.raw"
  rm -rf "$o" "$out"/version-*
  remove_tree "$sr"
}

# The plain disk with SELinux: Debian's reference policy and the project's module, labelled
# offline (the guest boots permissive, so a denial is logged, not fatal). A full copy of the
# rootfs, not stage_tree's hard links: package scripts may write into existing files.
SELINUX_PACKAGES="selinux-policy-default policycoreutils selinux-utils"
stage_selinux() {
  local out=$1 t=$1/tree kv fc
  kv=$(cat "$C/kernel/kver")
  cp -a "$C/rootfs" "$t"
  mkdir -p "$t/usr/lib/modules"
  cp -a "$C/kernel/mods/lib/modules/$kv" "$t/usr/lib/modules/"
  install -m644 "$GUEST/modules-load.conf" "$t/etc/modules-load.d/mco-vm.conf"
  mount -t proc proc "$t/proc"
  # shellcheck disable=SC2064 # expand now: $t is local
  trap "umount '$t/proc' 2>/dev/null || true" RETURN
  cp /etc/resolv.conf "$t/etc/resolv.conf"
  chroot "$t" apt-get update -qq >"$out/apt.log" 2>&1 &&
    chroot "$t" apt-get install -y -qq --no-install-recommends $SELINUX_PACKAGES >>"$out/apt.log" 2>&1 ||
    { tail -30 "$out/apt.log" >&2; die "installing $SELINUX_PACKAGES into the guest failed"; }
  "$HERE/../../selinux/build.sh" "$out/module"
  cp "$out/module/mco_agent.pp" "$HERE/../../selinux/mco_agent_port.cil" "$t/tmp/"
  chroot "$t" semodule -n -i /tmp/mco_agent.pp -i /tmp/mco_agent_port.cil ||
    die "semodule -i mco_agent.pp mco_agent_port.cil in the guest failed"
  rm "$t/tmp/mco_agent.pp" "$t/tmp/mco_agent_port.cil"
  sed -i 's/^SELINUX=.*/SELINUX=permissive/; s/^SELINUXTYPE=.*/SELINUXTYPE=default/' \
    "$t/etc/selinux/config"
  umount "$t/proc"
  rm -rf "$t"/var/cache/apt/archives/*.deb "$t"/var/lib/apt/lists/*
  fc=$t/etc/selinux/default/contexts/files/file_contexts
  setfiles -r "$t" "$fc" "$t" || die "labelling the guest tree with setfiles failed"
  truncate -s 2G "$out/selinux.raw"
  mkfs.ext4 -q -F -L root -d "$t" "$out/selinux.raw"
  rm -rf "$t" "$out/module"
}

# The key of a stage: its recipe and the guest files, plus the keys of the stages it reads.
declare -A DEPS=([kernel]="" [rootfs]="" [initrd]="kernel rootfs" [disk]="kernel rootfs"
  [ostree]="kernel rootfs initrd" [selinux]="kernel rootfs")
stage_key() {
  local s=$1 d
  {
    declare -f "stage_$s"
    case $s in kernel) kernel_package; echo "$VM_MODULES" ;; rootfs) echo "$GUEST_PACKAGES" ;;
      initrd) echo "$INITRD_MODULES" ;; disk | ostree) declare -f stage_tree ;;
      selinux) echo "$SELINUX_PACKAGES"; cat "$HERE"/../../selinux/mco_agent* ;; esac
    cat "$GUEST"/*
    for d in ${DEPS[$s]}; do cat "$C/$d.key"; done
  } | sha256sum | cut -d' ' -f1
}

# Build STAGE into $C/STAGE.new and swap it in, unless $C/STAGE is current ($C/STAGE.key).
build() {
  local s=$1 d key
  for d in ${DEPS[$s]}; do build "$d"; done
  key=$(stage_key "$s")
  if [ -d "$C/$s" ] && [ -f "$C/$s.key" ] && [ "$(cat "$C/$s.key")" = "$key" ]; then
    return
  fi
  log "building $s"
  local t0=$SECONDS
  remove_tree "$C/$s.new"
  rm -f "$C/$s.key"
  mkdir -p "$C/$s.new"
  "stage_$s" "$C/$s.new"
  remove_tree "$C/$s.old"
  if [ -e "$C/$s" ]; then mv "$C/$s" "$C/$s.old"; fi
  mv "$C/$s.new" "$C/$s"
  echo "$key" >"$C/$s.key"
  remove_tree "$C/$s.old"
  log "built $s in $((SECONDS - t0)) s"
}

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(kernel rootfs initrd disk ostree)
for s in "${stages[@]}"; do
  case $s in
    kernel | rootfs | initrd | disk | ostree | selinux) build "$s" ;;
    all) for t in kernel rootfs initrd disk ostree selinux; do build "$t"; done ;;
    *) die "unknown stage '$s' (kernel rootfs initrd disk ostree selinux all)" ;;
  esac
done
