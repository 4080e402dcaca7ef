#!/usr/bin/env bash
# Checks the policy module against the full Debian reference policy, without touching the host's
# policy store: builds it (selinux/build.sh), links it with all 331 modules of
# selinux-policy-default in an alternate store (semodule -p), then asserts the key rules with
# sesearch/seinfo and the file contexts with selabel_lookup. Also compiles a module that calls
# every interface of mco_agent.if. No SELinux kernel is needed (none runs here).
# usage: selinux/check.sh       (root; ~45 s the first time, ~15 s with the cached base store)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${MCO_PACKAGING_CACHE:-$HERE/../target/packaging-cache}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "selinux/check.sh: FAIL: $*" >&2; exit 1; }

"$HERE/build.sh" "$work/out"

# every interface of mco_agent.if expands (a module using them compiles with ours beside it)
mkdir "$work/ifcheck"
cp "$HERE"/mco_agent.{te,fc,if} "$work/ifcheck/"
cat >"$work/ifcheck/mco_agent_ifcheck.te" <<'TE'
policy_module(mco_agent_ifcheck, 0.1.0)
type mco_agent_ifcheck_t;
domain_type(mco_agent_ifcheck_t)
mco_agent_domtrans(mco_agent_ifcheck_t)
mco_agent_read_config(mco_agent_ifcheck_t)
mco_agent_read_runtime_files(mco_agent_ifcheck_t)
TE
make -C "$work/ifcheck" -f /usr/share/selinux/devel/Makefile mco_agent_ifcheck.pp >"$work/ifcheck.log" 2>&1 ||
  { cat "$work/ifcheck.log" >&2; fail "a module calling the interfaces of mco_agent.if does not compile"; }

# the full reference policy, linked once per package version into a cached alternate store
version=$(apt-cache policy selinux-policy-default | awk '/Candidate:/{print $2}' | tr ':' '_')
[ -n "$version" ] || fail "apt-cache knows no selinux-policy-default"
base=$CACHE/selinux-policy-default-$version
if [ ! -f "$base/.linked" ]; then
  echo "selinux/check.sh: linking the reference policy $version (~30 s)" >&2
  rm -rf "$base"
  mkdir -p "$base/deb"
  chmod 777 "$base/deb" # apt-get download drops privileges to _apt
  (cd "$base/deb" && apt-get download -q selinux-policy-default >/dev/null)
  dpkg-deb -x "$base"/deb/selinux-policy-default_*.deb "$base/root"
  mkdir -p "$base/root/etc/selinux"
  cp /etc/selinux/semanage.conf "$base/root/etc/selinux/"
  modules=()
  for m in $(cat "$base/root/usr/share/selinux/default/.modules"); do
    modules+=(-i "$base/root/usr/share/selinux/default/$m.pp.bz2")
  done
  semodule -p "$base/root" -s default -n -X 100 "${modules[@]}" 2>"$base/link.log" ||
    { cat "$base/link.log" >&2; fail "linking the reference policy itself failed"; }
  touch "$base/.linked"
fi
cp -a "$base/root" "$work/root"
semodule -p "$work/root" -s default -n -i "$work/out/mco_agent.pp" -i "$HERE/mco_agent_port.cil" 2>"$work/link.log" ||
  { cat "$work/link.log" >&2; fail "mco_agent.pp does not link into the full reference policy"; }
policy=$(ls "$work"/root/etc/selinux/default/policy/policy.*)
contexts=$work/root/etc/selinux/default/contexts/files/file_contexts

checks=0
# expect DESCRIPTION PATTERN SESEARCH-ARGS...: sesearch prints a line matching PATTERN
expect() {
  local what=$1 pattern=$2
  shift 2
  local rules
  rules=$(sesearch "$@" "$policy" 2>/dev/null)
  grep -qE "$pattern" <<<"$rules" || fail "$what: no rule matching /$pattern/ (sesearch $*)"
  checks=$((checks + 1))
}
# refuse DESCRIPTION SESEARCH-ARGS...: sesearch prints no rule
refuse() {
  local what=$1
  shift
  [ -z "$(sesearch "$@" "$policy" 2>/dev/null)" ] || fail "$what: unexpected rule (sesearch $*)"
  checks=$((checks + 1))
}
# label PATH TYPE: the file context of PATH has TYPE
label() {
  grep -q ":$2:" <<<"$(selabel_lookup -b file -k "$1" -f "$contexts")" || fail "$1 is not labelled $2"
  checks=$((checks + 1))
}

expect "systemd starts the agent in its domain" 'type_transition init_t mco_agent_exec_t:process mco_agent_t' \
  -T -s init_t -t mco_agent_exec_t -c process
expect "the agent binary is the domain's entry point" 'entrypoint' -A -s mco_agent_t -t mco_agent_exec_t -c file
expect "writes managed files under /etc" 'etc_t:file .*create.*rename.*unlink.*write' -A -s mco_agent_t -t etc_t -c file
expect "creates directories under /etc" 'etc_t:dir .*create' -A -s mco_agent_t -t etc_t -c dir
expect "/etc/machine-config-daemon gets its type" 'type_transition mco_agent_t etc_t:dir mco_agent_conf_t machine-config-daemon' \
  -T -s mco_agent_t -t etc_t
expect "keeps its state" 'mco_agent_conf_t:file .*create.*write' -A -s mco_agent_t -t mco_agent_conf_t -c file
expect "/run/mco-agent gets its type" 'type_transition mco_agent_t var_run_t:dir mco_agent_runtime_t mco-agent' \
  -T -s mco_agent_t -t var_run_t
expect "consumes the force file" 'var_run_t:file .*unlink' -A -s mco_agent_t -t var_run_t -c file
refuse "writes or creates no runtime file of others (the force file is only checked and unlinked)" \
  -A -s mco_agent_t -t var_run_t -c file -p write,append,create
# a rebase from containers-storage under a restrictive policy.json: the temporary signature
# policy in /run (a type of its own) and the drop-in binding it over rpm-ostreed's policy.json
expect "creates regular files in /run as the temporary signature policy (an O_TMPFILE has no name)" \
  'type_transition mco_agent_t var_run_t:file mco_agent_tmp_policy_t;' -T -s mco_agent_t -t var_run_t -c file
expect "writes, links into place and removes the temporary signature policy" \
  'mco_agent_tmp_policy_t:file .*create.*link.*rename.*unlink.*write' -A -s mco_agent_t -t mco_agent_tmp_policy_t -c file
expect "creates rpm-ostreed's drop-in directory in /run/systemd/system" ':dir .*add_name.*create' \
  -A -s mco_agent_t -t init_runtime_t -c dir
expect "writes and removes the drop-in" ':file .*create.*rename.*unlink.*write' -A -s mco_agent_t -t init_runtime_t -c file
# rpm-ostree's registry credentials: /run/ostree/auth.json, a link to the pull secret
expect "creates /run/ostree, when missing, with a type of its own" \
  'type_transition mco_agent_t var_run_t:dir mco_agent_ostree_auth_t ostree' -T -s mco_agent_t -t var_run_t -c dir
expect "links made in /run get the pull secret link's type (made under a temp name)" \
  'type_transition mco_agent_t var_run_t:lnk_file mco_agent_ostree_auth_t;' -T -s mco_agent_t -t var_run_t -c lnk_file
expect "adds the link to /run/ostree" 'mco_agent_ostree_auth_t:dir .*add_name.*create' \
  -A -s mco_agent_t -t mco_agent_ostree_auth_t -c dir
expect "makes, gives to root, renames and removes the pull secret link" \
  'mco_agent_ostree_auth_t:lnk_file .*create.*rename.*setattr.*unlink' -A -s mco_agent_t -t mco_agent_ostree_auth_t -c lnk_file
refuse "creates no directory or link in /run of another type" -A -s mco_agent_t -t var_run_t -c dir,lnk_file -p create
expect "keeps its boot-rollback record in /var/lib/mco-agent" 'mco_agent_var_lib_t:file .*create.*write' \
  -A -s mco_agent_t -t mco_agent_var_lib_t -c file
expect "/var/lib/mco-agent gets its type" 'type_transition mco_agent_t var_lib_t:dir mco_agent_var_lib_t mco-agent' \
  -T -s mco_agent_t -t var_lib_t
refuse "removes or renames no directory under /var/lib" -A -s mco_agent_t -t var_lib_t -c dir -p rmdir,rename,reparent
expect "writes hooks" 'mco_agent_hook_exec_t:file .*create.*write' -A -s mco_agent_t -t mco_agent_hook_exec_t -c file
expect "runs hooks in its domain" 'execute_no_trans' -A -s mco_agent_t -t mco_agent_hook_exec_t -c file
expect "runs each hook in a process group of its own" 'setpgid' -A -s mco_agent_t -t mco_agent_t -c process
expect "links an O_TMPFILE into place under /var/lib" 'var_lib_t:file .*link' -A -s mco_agent_t -t var_lib_t -c file
refuse "executes no other file under /etc" -A -s mco_agent_t -t etc_t -c file -p execute
expect "writes executables an administrator delivers to /usr/local/bin" 'bin_t:file .*create.*write' \
  -A -s mco_agent_t -t bin_t -c file
expect "connects to the system bus" 'connectto' -A -s mco_agent_t -t system_dbusd_t -c unix_stream_socket
expect "talks to systemd over D-Bus" 'send_msg' -A -s mco_agent_t -t init_t -c dbus
expect "talks to logind over D-Bus" 'send_msg' -A -s mco_agent_t -t systemd_logind_t -c dbus
expect "reloads systemd" 'init_t:system .*reload' -A -s mco_agent_t -t init_t -c system
expect "starts and stops units" 'service .*start.*stop' -A -s mco_agent_t -c service
expect "writes unit files" 'systemdunit:file .*write' -A -s mco_agent_t -t systemdunit -c file
expect "reboots through logind" 'power_unit_t:service .*start' -A -s mco_agent_t -t power_unit_t -c service
expect "notifies systemd (Type=notify, watchdog)" 'write' -A -s mco_agent_t -t init_runtime_t -c sock_file
expect "maps the journal files (journalctl: the previous boot's ostree-finalize-staged)" 'systemd_journal_t:file .*map' \
  -A -s mco_agent_t -t systemd_journal_t -c file
expect "journalctl stats /proc and /run" 'proc_t:filesystem .*getattr' -A -s mco_agent_t -t proc_t -c filesystem
expect "journalctl stats /run" 'tmpfs_t:filesystem .*getattr' -A -s mco_agent_t -t tmpfs_t -c filesystem
expect "reads the kubelet kubeconfig" ':file \{.*read' -A -s mco_agent_t -t var_lib_t -c file
expect "writes the pull secret /var/lib/kubelet/config.json" 'var_lib_t:file .*create.*rename.*write' \
  -A -s mco_agent_t -t var_lib_t -c file
expect "writes the core user's SSH keys" 'ssh_home_t:file .*create.*write' -A -s mco_agent_t -t ssh_home_t -c file
expect "gives ~core/.ssh to core, mode 0700" 'ssh_home_t:dir .*setattr' -A -s mco_agent_t -t ssh_home_t -c dir
expect "creates ~core/.ssh as ssh_home_t" 'type_transition mco_agent_t user_home_dir_t:dir ssh_home_t .ssh' \
  -T -s mco_agent_t -t user_home_dir_t
expect "reads and rewrites /etc/shadow" 'shadow_t:file .*read.*rename.*unlink.*write' -A -s mco_agent_t -t shadow_t -c file
expect "labels the new shadow file shadow_t" 'relabelto' -A -s mco_agent_t -t shadow_t -c file -p relabelto
expect "relabels its temp files in /etc" 'relabelfrom' -A -s mco_agent_t -t etc_t -c file -p relabelfrom
expect "creates /var/lib/kubelet when a file in it is the first" 'var_lib_t:dir .*create.*setattr' \
  -A -s mco_agent_t -t var_lib_t -c dir
expect "labels a new CA anchor cert_t" 'relabelto' -A -s mco_agent_t -t cert_t -c file -p relabelto
expect "writes CA anchors" 'cert_t:file .*create.*rename.*write' -A -s mco_agent_t -t cert_t -c file
expect "runs update-ca-trust (a shell script)" 'execute_no_trans' -A -s mco_agent_t -t shell_exec_t -c file
expect "runs update-ca-trust from bin" 'execute_no_trans' -A -s mco_agent_t -t bin_t -c file
expect "looks labels up in file_contexts" 'file_context_t:file .*read' -A -s mco_agent_t -t file_context_t -c file
expect "validates contexts with the kernel" 'check_context' -A -s mco_agent_t -t security_t -c security
expect "checks /run/ostree/staged-deployment-locked" 'var_run_t:file .*getattr' -A -s mco_agent_t -t var_run_t -c file
expect "binds its metrics port" 'name_bind' -A -s mco_agent_t -t mco_agent_metrics_port_t -c tcp_socket
refuse "binds no other port" -A -s mco_agent_t -t unreserved_port_t -c tcp_socket -p name_bind
for port in 8797 8798; do
  grep -q "tcp $port .*mco_agent_metrics_port_t" <<<"$(seinfo --portcon="$port" "$policy")" ||
    fail "tcp port $port is not labelled mco_agent_metrics_port_t (mco_agent_port.cil)"
  checks=$((checks + 1))
done
expect "connects to the API and config servers" 'name_connect' -A -s mco_agent_t -t unreserved_port_t -c tcp_socket
for port in 6443 22623; do
  grep -q "tcp 1024-65535 .*unreserved_port_t" <<<"$(seinfo --portcon="$port" "$policy")" ||
    fail "tcp port $port is not an unreserved port in this policy"
  checks=$((checks + 1))
done
refuse "relabels nothing to a type it has no business with" -A -s mco_agent_t -t security_t -c file -p relabelto
refuse "labels no file as an executable" -A -s mco_agent_t -t bin_t -c file -p relabelto
refuse "writes no shell" -A -s mco_agent_t -t shell_exec_t -c file -p write
# a label is set with the file's own SELinux user, as restorecon without -F: no exemption needed
if seinfo -xa can_change_object_identity "$policy" | grep -qw mco_agent_t; then
  fail "mco_agent_t may change the SELinux user of files (can_change_object_identity)"
fi
checks=$((checks + 1))
refuse "writes nothing under /boot (rpm-ostree's)" -A -s mco_agent_t -t boot_t -c file -p write
refuse "writes no SELinux policy files" -A -s mco_agent_t -t policy_config_t -c file -p write
refuse "writes no file in user homes beyond SSH keys" -A -s mco_agent_t -t user_home_t -c file -p write
refuse "writes no SSH host keys" -A -s mco_agent_t -t sshd_key_t -c file -p write
refuse "reads no Kerberos keytab (a security file)" -A -s mco_agent_t -t krb5_keytab_t -c file -p read
refuse "reads no audit log (a security file)" -A -s mco_agent_t -t auditd_log_t -c file -p read
refuse "loads no kernel modules" -A -s mco_agent_t -c system -p module_load
refuse "loads no SELinux policy" -A -s mco_agent_t -t security_t -c security -p load_policy
refuse "switches no enforcing mode" -A -s mco_agent_t -t security_t -c security -p setenforce
refuse "maps no writable memory executable" -A -s mco_agent_t -t mco_agent_t -c process -p execmem
# capabilities: exactly the CapabilityBoundingSet of the units that run in the domain (rules under
# a boolean left out: auth_use_nsswitch's net_bind_service when allow_ypbind is on, which the
# bounding set refuses anyway)
want=$(sed -n 's/^CapabilityBoundingSet=//p' "$HERE/../units/mco-agent.service" "$HERE/../units/mco-firstboot.service" |
  tr ' ' '\n' | sed 's/^CAP_//' | tr 'A-Z' 'a-z' | sort -u | tr '\n' ' ')
got=$(sesearch -A -s mco_agent_t -c capability "$policy" 2>/dev/null | grep -v '\[ ' | grep -o '{[^}]*}\|capability [a-z_]*;' |
  tr -d '{};' | sed 's/^capability //' | tr ' ' '\n' | grep . | sort -u | tr '\n' ' ')
[ "$got" = "$want" ] || fail "capabilities of mco_agent_t: '$got', the units' bounding sets: '$want'"
checks=$((checks + 1))
# the bootloader's EFI copy mounts the ESP from a transient service of systemd, never here
refuse "mounts no EFI system partition (vfat) itself" -A -s mco_agent_t -t dosfs_t -c filesystem -p mount
refuse "needs no sys_admin, sys_module or sys_ptrace" -A -s mco_agent_t -t mco_agent_t -c capability -p sys_admin,sys_module,sys_ptrace
label /usr/bin/mco-agent mco_agent_exec_t
label /usr/libexec/mco-firstboot mco_agent_exec_t
# not an entry point of the domain: it runs in its caller's (mco-agent status, an administrator)
label /usr/libexec/mco-sysroot-status bin_t
label /usr/lib/systemd/system/mco-agent.service mco_agent_unit_file_t
label /etc/machine-config-daemon/currentconfig mco_agent_conf_t
label /run/mco-agent/state mco_agent_runtime_t
label /etc/shadow shadow_t
label /etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt cert_t
label /etc/systemd/system/kubelet.service systemd_unit_t
label /home/core/.ssh/authorized_keys.d/ignition ssh_home_t
label /var/lib/kubelet/config.json var_lib_t
label /var/lib/mco-agent/boot-rollback.json mco_agent_var_lib_t
label /run/tmp-rpm-ostree-policy.json mco_agent_tmp_policy_t
label /run/systemd/system/rpm-ostreed.service.d/temporal-policy-binding.conf init_runtime_t
label /run/ostree/auth.json mco_agent_ostree_auth_t
label /etc/mco-agent/hooks.d/post-apply/10-site mco_agent_hook_exec_t
label /usr/local/bin/site-tool bin_t
echo "selinux/check.sh: mco_agent.pp links into the reference policy; $checks checks passed"
