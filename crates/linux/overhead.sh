#!/usr/bin/env bash
# Daemon overhead benchmark (issue #3): idle CPU and RSS of `appflow daemon`
# while it watches N processes in its domain, and the jitter of its 100 ms loop.
#
#   sudo crates/linux/overhead.sh [--procs 200] [--seconds 60] [--bin PATH] [--detect on|off]
#
# --detect off turns launch detection off ([detect] enabled = false), to
# compare the daemon with and without it (run both at once: same machine load).
# Builds a temporary v1 memory cgroup /sys/fs/cgroup/memory/appflow-overhead-<pid>,
# starts N `sleep` processes in it (all recognised as one declared app by
# cmdline, so every scan reads their oom_score_adj), runs the daemon on that
# domain (preload worker included), measures over the window:
#   * CPU: utime+stime of the daemon (and of its preload worker) from
#     /proc/PID/stat, as % of one core;
#   * RSS: VmRSS and VmHWM of the daemon from /proc/PID/status;
#   * loop jitter p50/p99: the daemon's own record (lateness of each tick
#     against its schedule; `appflow status`);
#   * the machine's load average at the start and the end of the window.
# scripts/idle-cost runs several of these at once (with and without
# detection, one binary against another) under the same machine load.
# Targets: CPU <= 0.5 % of a core, RSS <= 20 MiB, p99 jitter <= 5 ms.
# Everything it starts is stopped and the cgroup removed, also on Ctrl-C.
set -euo pipefail

PROCS=200
SECONDS_WIN=60
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN=""
DETECT=true
while [ $# -gt 0 ]; do
  case "$1" in
    --procs) PROCS="$2"; shift 2 ;;
    --seconds) SECONDS_WIN="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    --detect) case "$2" in on) DETECT=true ;; off) DETECT=false ;; *) echo "--detect on|off" >&2; exit 2 ;; esac; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "overhead.sh: needs root (cgroups)" >&2; exit 2; }
[ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ] || { echo "overhead.sh: needs cgroup v1 memory at /sys/fs/cgroup/memory" >&2; exit 2; }
if [ -z "$BIN" ]; then
  (cd "$ROOT" && cargo build --release -q -p appflow-linux --bin appflowd)
  BIN="$ROOT/target/release/appflowd"
fi

CG=/sys/fs/cgroup/memory/appflow-overhead-$$
WORK=$(mktemp -d /var/tmp/appflow-overhead.XXXXXX)
SLEEPERS=()
DAEMON=""
cleanup() {
  set +e
  [ -n "$DAEMON" ] && kill -TERM "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
  for p in "${SLEEPERS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  for _ in $(seq 50); do rmdir "$CG" 2>/dev/null && break; sleep 0.1; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

mkdir "$CG"
echo $((2 * 1024 * 1024 * 1024)) > "$CG/memory.limit_in_bytes"
for _ in $(seq "$PROCS"); do
  sh -c "echo \$\$ > $CG/cgroup.procs && exec sleep 100000" &
  SLEEPERS+=($!)
done
sleep 1
echo "watching $(wc -l < "$CG/cgroup.procs") processes in $CG"

cat > "$WORK/appflow.toml" <<EOF
[daemon]
socket = "$WORK/appflow.sock"
state_dir = "$WORK/state"
[domain]
kind = "cgroup"
memory_cgroup = "$CG"
[detect]
enabled = $DETECT
[[app]]
name = "sleepers"
cmdline = "^sleep 100000"
EOF
"$BIN" --log warn daemon --config "$WORK/appflow.toml" &
DAEMON=$!
for _ in $(seq 100); do [ -S "$WORK/appflow.sock" ] && break; sleep 0.1; done
[ -S "$WORK/appflow.sock" ] || { echo "daemon did not start" >&2; exit 1; }
WORKER=$("$BIN" status --socket "$WORK/appflow.sock" --format json | sed -n 's/.*"worker_pid": \([0-9]*\).*/\1/p' | head -1)
sleep 5   # warm-up: first scan of every process

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
d0=$(ticks "$DAEMON"); w0=$(ticks "$WORKER"); t0=$(date +%s.%N)
sleep "$SECONDS_WIN"
d1=$(ticks "$DAEMON"); w1=$(ticks "$WORKER"); t1=$(date +%s.%N)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
STATUS=$("$BIN" status --socket "$WORK/appflow.sock")
rss=$(awk '/VmRSS/ {print $2}' "/proc/$DAEMON/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$DAEMON/status")
wrss=$(awk '/VmRSS/ {print $2}' "/proc/$WORKER/status")
watched=$(echo "$STATUS" | sed -n 's/.*processes \([0-9]*\).*/\1/p')
loopline=$(echo "$STATUS" | grep '^loop')
awk -v d0="$d0" -v d1="$d1" -v w0="$w0" -v w1="$w1" -v t0="$t0" -v t1="$t1" -v hz="$HZ" \
    -v rss="$rss" -v hwm="$hwm" -v wrss="$wrss" -v n="$watched" -v loop="$loopline" -v det="$DETECT" \
    -v load0="$load0" -v load1="$load1" 'BEGIN {
  el = t1 - t0
  dc = (d1 - d0) / hz / el * 100; wc = (w1 - w0) / hz / el * 100
  printf "window %.1f s, %d processes watched by the daemon, detection %s\n", el, n, det
  printf "daemon CPU %.3f %% of one core (target <= 0.5 %%), preload worker %.3f %%\n", dc, wc
  printf "daemon RSS %.1f MiB, peak %.1f MiB (target <= 20 MiB); worker RSS %.1f MiB\n", rss/1024, hwm/1024, wrss/1024
  printf "%s\n", loop
  printf "load average (1/5/15 min) at start %s, at end %s\n", load0, load1
}'
