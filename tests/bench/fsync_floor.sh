#!/bin/bash
# The fsync floor of a directory: what one durable small-file replacement costs there (write a
# 4 KiB temp file, fsync it, rename it over the target, fsync the directory), as the agent
# writes every file of an update. Usage: tests/bench/fsync_floor.sh [DIR] [ROUNDS]
# (DIR defaults to a temp dir under /var/tmp, on the disk the agent writes to; ROUNDS to 200).
set -euo pipefail
dir=${1:-}
rounds=${2:-200}
cleanup=
if [[ -z $dir ]]; then
    dir=$(mktemp -d /var/tmp/fsync-floor.XXXXXX)
    cleanup=$dir
fi
trap '[[ -n $cleanup ]] && rm -rf "$cleanup"' EXIT
python3 - "$dir" "$rounds" <<'PY'
import os, statistics, sys, time
d, rounds = sys.argv[1], int(sys.argv[2])
target, tmp = os.path.join(d, "floor.conf"), os.path.join(d, ".floor.conf.tmp")
data = os.urandom(4096)
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
times = []
for _ in range(rounds):
    start = time.perf_counter()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    os.rename(tmp, target)
    os.fsync(dfd)
    times.append((time.perf_counter() - start) * 1000)
os.close(dfd)
os.unlink(target)
q = statistics.quantiles(times, n=10)
print(f"{d}: {rounds} durable 4 KiB replacements: median {statistics.median(times):.2f} ms, "
      f"p10 {q[0]:.2f} ms, p90 {q[-1]:.2f} ms")
PY
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
