#!/usr/bin/env bash
# Benchmark: the peak memory of the agent given a gzip bomb, and of a config at the cap.
#
#   tests/bench/gzip_bomb.sh [BOMB_MIB]
#
# Builds two MachineConfigs whose one file is a gzip `data:` URL: a bomb (BOMB_MIB, default
# 2048, MiB of zeros: about 2 MiB compressed, over the per-file cap) and a file of exactly the
# cap (128 MiB). Runs `mco-agent validate --config FILE` (a root with that config recorded)
# and `mco-agent once-from FILE --root DIR` (a fresh root) on each, under /usr/bin/time, and
# reports the exit code and the peak resident memory (VmHWM: "Maximum resident set size").
# The bomb must be refused and peak far below the unit's MemoryMax=1G.
#
# The agent is the dev build (`cargo build -p mco-agent`) unless MCO_AGENT_BIN names another
# (the peak is the decompressed data and the decoder's buffers, not code); CARGO_TARGET_DIR is
# honoured. Needs python3 and /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/../.."

bomb_mib=${1:-2048}
cap_mib=128
target=${CARGO_TARGET_DIR:-$PWD/target}
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
if [ -z "${MCO_AGENT_BIN:-}" ]; then
  cargo build -q -p mco-agent
  MCO_AGENT_BIN=$target/debug/mco-agent
fi

work=$(mktemp -d /tmp/mco-gzip-bomb.XXXXXX)
trap 'rm -rf "$work"' EXIT

config() { # NAME MIB: a MachineConfig with /etc/big, MIB MiB of zeros gzipped
  python3 - "$work/$1.json" "$2" <<'PY'
import base64, json, sys, zlib
path, mib = sys.argv[1], int(sys.argv[2])
z = zlib.compressobj(9, zlib.DEFLATED, 31)
chunk = b"\0" * (1 << 20)
gz = b"".join(z.compress(chunk) for _ in range(mib)) + z.flush()
url = "data:;base64," + base64.b64encode(gz).decode()
mc = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
      "metadata": {"name": "bomb"},
      "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
          {"path": "/etc/big", "mode": 420, "overwrite": True,
           "contents": {"source": url, "compression": "gzip"}}]}}}}
json.dump(mc, open(path, "w"))
PY
}

measure() { # LABEL ARGS...: runs the agent, prints exit code and peak RSS
  local label=$1; shift
  local rc=0
  /usr/bin/time -f '%M' -o "$work/rss" "$MCO_AGENT_BIN" "$@" >"$work/out" 2>&1 || rc=$?
  printf '%-34s exit %-3s peak RSS %6d MiB   %s\n' "$label" "$rc" $(( $(tail -1 "$work/rss") / 1024 )) \
    "$(grep -m1 -o 'exceeds[^"]*\|decompressed[^"]*' "$work/out" | head -c 80 || true)"
}

root() { # a fresh root with the user database the agent reads
  local r=$work/root-$1
  mkdir -p "$r/etc/machine-config-daemon"
  printf 'root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/var/home/core:/bin/bash\n' >"$r/etc/passwd"
  printf 'root:x:0:\ncore:x:1000:\n' >"$r/etc/group"
  echo "$r"
}

config bomb "$bomb_mib"
config at-cap "$cap_mib"
echo "mco-agent: $MCO_AGENT_BIN; bomb ${bomb_mib} MiB of zeros ($(du -k "$work/bomb.json" | cut -f1) KiB config), file at the cap ${cap_mib} MiB"
for name in bomb at-cap; do
  measure "once-from ($name)" once-from "$work/$name.json" --root "$(root "$name")" --skip-reboot
  r=$(root "v-$name")
  cp "$work/$name.json" "$r/etc/machine-config-daemon/currentconfig"
  measure "validate ($name)" validate --root "$r"
done
