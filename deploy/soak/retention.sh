#!/usr/bin/env bash
# Retention under continuous load (docs/RELIABILITY.md "Running for weeks"):
# the dev network (p1 → b1 → s1, s2) as four broker processes, max_retain
# on p1, one subscriber at s1, one publisher at RATE events/s of 100 bytes
# for SECONDS without pause. Every 10 s: p1's data directory on disk, p1's
# and b1's RSS, and the load average. With KILL_S2_AFTER=N, s2 is killed
# (-9) after N seconds, with a durable subscriber of its own; with
# RESTART_S2_AFTER=M as well, s2 and that subscriber come back after M
# seconds, and at the end the script counts what the subscriber got: events
# (each pubend's ticks must rise, none twice) and gap notices, and checks it
# against the subscriber at s1, which had every event: each one must be at
# s2 or inside a gap notice's ticks, and nothing at s2 may be inside one.
#
#   deploy/soak/retention.sh [SECONDS] [RATE] [MAX_RETAIN]
#
# Ports 17101–17304 on 127.0.0.1 (deploy/soak/lib.sh); data in a fresh
# temporary directory.
set -euo pipefail
secs=${1:-300}; rate=${2:-20000}; retain=${3:-20s}
cd "$(dirname "$0")/../.."
. deploy/soak/lib.sh
dir=$(mktemp -d /tmp/aerie-soak.XXXXXX)
soak_build "$dir"
soak_network "$dir" "$retain" 17
declare -A pid
trap 'kill ${pid[*]} 2>/dev/null || true' EXIT
for b in p1 b1 s1 s2; do soak_broker "$dir" $b; done
for port in 17201 17203 17204; do soak_wait_port $port; done
# The durable subscriber at s2, appending to durable.out. It resumes by
# name from what it acknowledged: a --checkpoint file, saved (fsync) after
# every line, would hold it to a few hundred events/s, far behind RATE.
durable() {
  "$bin" sub --connect 127.0.0.1:17204 --topic 'orders.>' --json --durable soak \
    >>"$dir/durable.out" 2>>"$dir/durable.err" &
  pid[durable]=$!
}
if [ -n "${KILL_S2_AFTER:-}" ]; then durable; fi
# The subscriber at s1 keeps "pubend tick" of every event when s2 is killed
# (the reference for what s2's durable subscriber must have).
ticks() { soak_ticks; }
if [ -n "${KILL_S2_AFTER:-}" ]; then
  "$bin" sub --connect 127.0.0.1:17203 --topic 'orders.>' --json 2>"$dir/sub.err" > >(ticks >"$dir/s1.ticks") & # $! is the sub
else
  "$bin" sub --connect 127.0.0.1:17203 --topic 'orders.>' --json >/dev/null 2>"$dir/sub.err" &
fi
pid[sub]=$!
"$bin" pub --connect 127.0.0.1:17201 --topic orders.eu --size 100 --rate "$rate" --count $((rate * secs)) >"$dir/pub.out" 2>"$dir/pub.err" &
pub=$!
rss() { soak_rss "$1"; }
start=$(date +%s)
echo "t_s p1_data_MB p1_rss_MB b1_rss_MB load1"
while kill -0 $pub 2>/dev/null; do
  sleep 10
  t=$(( $(date +%s) - start ))
  if [ -n "${KILL_S2_AFTER:-}" ] && [ "$t" -ge "$KILL_S2_AFTER" ] && [ -z "${killed:-}" ]; then
    kill -9 "${pid[s2]}" "${pid[durable]}"; killed=$t; echo "# s2 and its durable subscriber killed at ${t}s"
  fi
  if [ -n "${RESTART_S2_AFTER:-}" ] && [ "$t" -ge "$RESTART_S2_AFTER" ] && [ -n "${killed:-}" ] && [ -z "${restarted:-}" ]; then
    soak_broker "$dir" s2; restarted=$t
    soak_wait_port 17204
    durable; echo "# s2 and its durable subscriber restarted at ${t}s"
  fi
  echo "$t $(du -sm "$dir/p1" | cut -f1) $(rss ${pid[p1]}) $(rss ${pid[b1]}) $(cut -d' ' -f1 /proc/loadavg)"
done
wait $pub || true
tail -1 "$dir/pub.out"
if [ -n "${KILL_S2_AFTER:-}" ]; then
  # Let s2's durable subscriber catch up: until its output stops growing
  # for 10 s (at most 10 minutes).
  for _ in $(seq 60); do
    n=$(wc -l <"$dir/durable.out"); sleep 10
    [ "$(wc -l <"$dir/durable.out")" = "$n" ] && break
  done
  kill "${pid[durable]}" "${pid[sub]}" 2>/dev/null || true
  sleep 1
  # Events carry "pubend" and "tick"; gap notices {"gap":{...}}.
  awk '/"gap"/ {gaps++; print "# gap notice: " $0; next}
    match($0, /"pubend":"[^"]*","tick":[0-9]+/) { split(substr($0, RSTART, RLENGTH), a, /"/)
      p = a[4]; t = substr(a[7], 2) + 0
      if (t <= last[p]) bad++; last[p] = t; events++ }
    END { printf "# durable subscriber at s2: %d events, %d gap notices, %d ticks out of order or twice\n", events, gaps, bad }' "$dir/durable.out"
  # Every event s1 had since the durable subscription came into force (its
  # first event) is at s2 or inside a gap; none at s2 is inside one, but
  # for lines written just before the kill, whose acknowledgement died with
  # the subscriber (at least once there).
  ticks <"$dir/durable.out" >"$dir/s2.ticks"
  grep '"gap"' "$dir/durable.out" | sed -E 's/.*"pubend":"([^"]*)".*"from":([0-9]+).*"to":([0-9]+).*/\1 \2 \3/' >"$dir/gaps" || true
  awk 'FILENAME == ARGV[1] { n[$1]++; lo[$1, n[$1]] = $2; hi[$1, n[$1]] = $3; next }
    function gapped(p, t,   i) { for (i = 1; i <= n[p]; i++) if (t > lo[p, i] && t <= hi[p, i]) return 1; return 0 }
    FILENAME == ARGV[2] { at2[$1, $2] = 1; if (!($1 in first)) first[$1] = $2; if (gapped($1, $2)) inside++; next }
    !($1 in first) || $2 < first[$1] { next }
    { s1++; if (!(($1, $2) in at2) && !gapped($1, $2)) missing++ }
    END { printf "# against s1: %d events at s1, %d neither at s2 nor in a gap (lost), %d at s2 inside a gap\n", s1, missing, inside }' \
    "$dir/gaps" "$dir/s2.ticks" "$dir/s1.ticks"
fi
echo "# data and logs in $dir"
