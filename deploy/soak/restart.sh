#!/usr/bin/env bash
# A PHB's memory and restart with a durable subscriber away (docs/RELIABILITY.md
# "Running for weeks"): p1 → s1 as two broker processes, a durable
# subscription at s1 whose subscriber leaves at once, so p1 releases nothing
# and retains every event. One publisher sends N events of SIZE bytes at
# RATE events/s (default 50000; 0: as fast as acks allow), split over PUBS
# publishers (default 1) each with its own id, so that 10 M events fill in
# minutes. max_retain is "0s" (never released early). Then: p1's RSS
# above its idle RSS, per retained event, 5 s and 155 s after the last ack
# (Go collects at least every 2 minutes); kill -9 of p1 and a restart, timed
# from the exec to the client port accepting and to the first
# acknowledgement of a new publish, with p1's CPU time (user + system) at
# each; p1's RSS after it.
#
#   deploy/soak/restart.sh [N] [SIZE] [RATE] [DIR] [PUBS]
#
# 10 M events: deploy/soak/restart.sh 10000000 20 0 "" 4 (about 400 MB of
# log; 20-byte payloads save disk and change nothing restored: a cold
# event keeps its tick and size only).
#
# With DIR holding a previous run (its network.toml and data), the
# publishing is skipped and only the restart is measured. Ports 17111–17212
# on 127.0.0.1; data in a fresh temporary directory unless DIR is given.
# SETTLE (seconds, default 150) is the wait before the second reading.
# Congestion control is off unless CC=true: on a machine shared with other
# work the SHB falls behind now and then, and the pubend's rate limit
# (docs/CONCEPTS.md "Congestion control") then slows the fill to a trickle;
# nothing measured here depends on it.
# P1_PPROF=host:port has p1 serve Go's profiles there (AERIE_PPROF) and
# saves its heap beside the readings (held.heap, after.heap).
set -euo pipefail
n=${1:-1000000}; size=${2:-100}; rate=${3:-50000}; dir=${4:-}; pubs=${5:-1}
cd "$(dirname "$0")/../.."
fresh=1
if [ -n "$dir" ] && [ -f "$dir/network.toml" ]; then fresh=0; fi
[ -n "$dir" ] || dir=$(mktemp -d /tmp/aerie-restart.XXXXXX)
mkdir -p "$dir"
bin=$dir/aerie
go build -o "$bin" ./cmd/aerie
if [ $fresh = 1 ]; then
cat > "$dir/network.toml" <<TOML
congestion_control = ${CC:-false}

[[broker]]
id = "p1"
listen = "127.0.0.1:17111"
clients = "127.0.0.1:17211"
data = "$dir/p1"
pubends = ["P1"]
max_retain = "0s"

[[broker]]
id = "s1"
listen = "127.0.0.1:17112"
clients = "127.0.0.1:17212"
data = "$dir/s1"

[[link]]
up = "p1"
down = "s1"
TOML
fi
declare -A pid
trap 'kill ${pid[*]} 2>/dev/null || true' EXIT
rss() { echo $(( $(awk '/VmRSS/{print $2}' /proc/$1/status) / 1024 )); }
waitport() { for _ in $(seq 6000); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.01; done; return 1; }
now() { date +%s.%N; }
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' /proc/$1/stat; } # user + system seconds
start() { [ "$1" = p1 ] && export AERIE_PPROF=${P1_PPROF:-} || export AERIE_PPROF=; "$bin" broker --config "$dir/network.toml" --id "$1" >>"$dir/$1.log" 2>&1 & pid[$1]=$!; }
start s1
if [ $fresh = 1 ]; then
  start p1
  waitport 17211; waitport 17212
  sleep 2
  idle=$(rss ${pid[p1]})
  echo "# p1 idle RSS ${idle} MiB"
  echo "$idle" > "$dir/idle_rss"
  # The durable subscriber takes its subscription and leaves at once.
  "$bin" sub --connect 127.0.0.1:17212 --topic '>' --durable away --json >/dev/null 2>"$dir/sub.err" &
  sp=$!
  for _ in $(seq 500); do grep -q subscribed "$dir/sub.err" && break; sleep 0.02; done
  kill -9 $sp; wait $sp 2>/dev/null || true
  t0=$(now)
  # PUBS publishers with N/PUBS events each (the first takes the rest).
  per=$((n / pubs)); pp=()
  for i in $(seq "$pubs"); do
    c=$per; [ "$i" = 1 ] && c=$((n - per * (pubs - 1)))
    r=$(echo "$rate / $pubs" | bc -l)
    "$bin" pub --connect 127.0.0.1:17211 --topic orders.eu --size "$size" --rate "$r" --count "$c" --id "fill-$i" --timeout 10m >"$dir/pub$i.out" 2>"$dir/pub$i.err" &
    pp+=($!)
  done
  for p in "${pp[@]}"; do wait "$p"; done
  t1=$(now)
  tail -q -n1 "$dir"/pub*.out
  echo "# published $n in $(echo "$t1 - $t0" | bc) s"
  sleep 5
  held=$(rss ${pid[p1]})
  echo "# p1 RSS holding $n events, 5 s after the last ack: ${held} MiB, $(echo "($held - $idle) * 1048576 / $n" | bc) B per event above idle; log $(du -sm "$dir/p1" | cut -f1) MB; load $(cut -d' ' -f1-3 /proc/loadavg)"
  sleep "${SETTLE:-150}"
  held=$(rss ${pid[p1]})
  echo "# p1 RSS holding $n events, $((5 + ${SETTLE:-150})) s after: ${held} MiB, $(echo "($held - $idle) * 1048576 / $n" | bc) B per event above idle"
  if [ -n "${P1_PPROF:-}" ]; then curl -s "http://$P1_PPROF/debug/pprof/heap?gc=1" >"$dir/held.heap"; fi
  kill -9 ${pid[p1]}; wait ${pid[p1]} 2>/dev/null || true
fi
idle=$(cat "$dir/idle_rss")
waitport 17212
t0=$(now)
start p1
waitport 17211
t1=$(now); c1=$(cpu ${pid[p1]})
"$bin" pub --connect 127.0.0.1:17211 --topic orders.eu --size "$size" --count 1 --id after-restart >/dev/null 2>&1
t2=$(now); c2=$(cpu ${pid[p1]})
echo "# restart: client port after $(echo "$t1 - $t0" | bc) s (p1's CPU ${c1} s), first ack after $(echo "$t2 - $t0" | bc) s (CPU ${c2} s); load $(cut -d' ' -f1-3 /proc/loadavg)"
sleep 3
after=$(rss ${pid[p1]})
if [ -n "${P1_PPROF:-}" ]; then curl -s "http://$P1_PPROF/debug/pprof/heap?gc=1" >"$dir/after.heap"; fi
echo "# p1 RSS after the restart: ${after} MiB, $(echo "($after - $idle) * 1048576 / $n" | bc) B per event above idle"
echo "# data and logs in $dir"
