#!/usr/bin/env bash
# A replicated PHB's memory and leader change with a durable subscriber away
# (docs/RELIABILITY.md "Running for weeks", docs/REPLICATION.md): a cell
# "phb" of three members p1, p2, p3 hosting P1 (one Raft group, default
# raft_election_timeout 1 s, raft_clients forward) feeding s1, as four broker
# processes; a durable subscription at s1 whose subscriber leaves at once, so
# the cell releases nothing (max_retain "0s") and retains every event. PUBS
# publishers (default 4) send N events of SIZE bytes at the serving leader as
# fast as acks allow. Then: each member's RSS above its idle RSS, per
# retained event, 5 s and 5 + SETTLE s after the last ack; kill -9 of the
# leader, timed to the first acknowledgement of a publish sent right after
# it by a client given the two other members' addresses (it reaches one of
# them, which forwards to whichever is elected); the new leader's RSS after
# it; the old leader restarted, timed to its client port accepting, and
# every member's RSS once it is back.
#
#   deploy/soak/restart-raft.sh [N] [SIZE] [PUBS] [DIR]
#
# 10 M events: deploy/soak/restart-raft.sh 10000000 20 4 (about 400 MB of
# log at each member, and its Raft log until compacted; 20-byte payloads
# save disk and change nothing restored: a cold event keeps its tick and
# size only). With DIR holding a previous run (its network.toml and data)
# the publishing is skipped and only the leader change is measured. Ports
# 17311–17413 and 17511–17513 on 127.0.0.1; data in a fresh temporary
# directory unless DIR is given. SETTLE (seconds, default 150) is the wait
# before the second reading (Go collects at least every 2 minutes). With
# PPROF=1 member pI serves Go's profiles on 127.0.0.1:176I0 (AERIE_PPROF),
# and each member's heap is saved beside each reading. Congestion control
# is off unless CC=true, as in restart.sh.
set -euo pipefail
n=${1:-1000000}; size=${2:-100}; pubs=${3:-4}; dir=${4:-}
cd "$(dirname "$0")/../.."
fresh=1
if [ -n "$dir" ] && [ -f "$dir/network.toml" ]; then fresh=0; fi
[ -n "$dir" ] || dir=$(mktemp -d /tmp/aerie-restart-raft.XXXXXX)
mkdir -p "$dir"
bin=$dir/aerie
go build -o "$bin" ./cmd/aerie
members=(p1 p2 p3)
declare -A client http
for i in 1 2 3; do client[p$i]=127.0.0.1:1741$i; http[p$i]=127.0.0.1:1751$i; done
if [ $fresh = 1 ]; then
  echo "congestion_control = ${CC:-false}" > "$dir/network.toml"
  echo >> "$dir/network.toml"
  for i in 1 2 3; do cat >> "$dir/network.toml" <<TOML
[[broker]]
id = "p$i"
cell = "phb"
listen = "127.0.0.1:1731$i"
clients = "${client[p$i]}"
http = "${http[p$i]}"
data = "$dir/p$i"
pubends = ["P1"]
max_retain = "0s"

TOML
  done
  cat >> "$dir/network.toml" <<TOML
[[broker]]
id = "s1"
listen = "127.0.0.1:17314"
clients = "127.0.0.1:17414"
data = "$dir/s1"

[[link]]
up = "phb"
down = "s1"
TOML
fi
declare -A pid
trap 'kill ${pid[*]} 2>/dev/null || true' EXIT
rss() { echo $(( $(awk '/VmRSS/{print $2}' /proc/$1/status) / 1024 )); }
waitport() { for _ in $(seq 6000); do (exec 3<>/dev/tcp/${1%:*}/${1#*:}) 2>/dev/null && return 0; sleep 0.01; done; return 1; }
now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
start() { export AERIE_PPROF=; [ -n "${PPROF:-}" ] && [ "$1" != s1 ] && export AERIE_PPROF=127.0.0.1:176${1#p}0; "$bin" broker --config "$dir/network.toml" --id "$1" >>"$dir/$1.log" 2>&1 & pid[$1]=$!; }
# serving: the member that serves P1 (its /status says so), after waiting
# for one; empty if none does within 30 s.
serving() {
  for _ in $(seq 3000); do
    for m in "$@"; do
      if curl -sf "http://${http[$m]}/status" 2>/dev/null | grep -q '"serving":true'; then echo "$m"; return 0; fi
    done
    sleep 0.01
  done
}
per_event() { echo "($1 - $2) * 1048576 / $n" | bc; }
heaps() { [ -n "${PPROF:-}" ] || return 0; for m in "${members[@]}"; do [ -n "${pid[$m]:-}" ] && curl -s "http://127.0.0.1:176${m#p}0/debug/pprof/heap?gc=1" >"$dir/$1.$m.heap"; done; return 0; }
rsses() { for m in "${members[@]}"; do [ -n "${pid[$m]:-}" ] && printf '%s %s MiB (%s B per event above idle)  ' "$m" "$(rss ${pid[$m]})" "$(per_event "$(rss ${pid[$m]})" "$(cat "$dir/idle_rss.$m")")"; done; echo; }
for m in "${members[@]}" s1; do start "$m"; done
for m in "${members[@]}"; do waitport "${client[$m]}"; done
waitport 127.0.0.1:17414
leader=$(serving "${members[@]}")
[ -n "$leader" ] || { echo "no member serves P1" >&2; exit 1; }
if [ $fresh = 1 ]; then
  sleep 2
  for m in "${members[@]}"; do rss ${pid[$m]} > "$dir/idle_rss.$m"; done
  echo "# idle RSS: $(for m in "${members[@]}"; do printf '%s %s MiB  ' "$m" "$(cat "$dir/idle_rss.$m")"; done); leader $leader"
  # The durable subscriber takes its subscription and leaves at once.
  "$bin" sub --connect 127.0.0.1:17414 --topic '>' --durable away --json >/dev/null 2>"$dir/sub.err" &
  sp=$!
  for _ in $(seq 500); do grep -q subscribed "$dir/sub.err" && break; sleep 0.02; done
  kill -9 $sp; wait $sp 2>/dev/null || true
  t0=$(now)
  per=$((n / pubs)); pp=()
  for i in $(seq "$pubs"); do
    c=$per; [ "$i" = 1 ] && c=$((n - per * (pubs - 1)))
    "$bin" pub --connect "${client[$leader]}" --topic orders.eu --size "$size" --rate 0 --count "$c" --id "fill-$i" --timeout 10m >"$dir/pub$i.out" 2>"$dir/pub$i.err" &
    pp+=($!)
  done
  for p in "${pp[@]}"; do wait "$p"; done
  t1=$(now)
  tail -q -n1 "$dir"/pub*.out
  echo "# published $n in $(echo "$t1 - $t0" | bc) s; log at $leader $(du -sm "$dir/$leader" | cut -f1) MB"
  sleep 5
  echo "# RSS holding $n events, 5 s after the last ack: $(rsses)load $(load)"
  sleep "${SETTLE:-150}"
  echo "# RSS holding $n events, $((5 + ${SETTLE:-150})) s after: $(rsses)load $(load)"
  heaps held
fi
others=()
for m in "${members[@]}"; do [ "$m" = "$leader" ] || others+=("$m"); done
connect=$(printf '%s,' "${client[${others[0]}]}" "${client[${others[1]}]}"); connect=${connect%,}
t0=$(now)
kill -9 ${pid[$leader]}
"$bin" pub --connect "$connect" --topic orders.eu --size "$size" --count 1 --id after-leader-change >"$dir/after.out" 2>&1
t1=$(now)
{ wait ${pid[$leader]}; } 2>/dev/null || true
unset "pid[$leader]"
next=$(serving "${others[@]}")
echo "# leader change: kill -9 of $leader to the first new ack $(echo "$t1 - $t0" | bc) s (new leader $next); load $(load)"
sleep 3
echo "# RSS after the leader change: $(rsses)"
heaps changed
t0=$(now)
start "$leader"
waitport "${client[$leader]}"
t1=$(now)
echo "# $leader restarted: client port after $(echo "$t1 - $t0" | bc) s; load $(load)"
sleep 10
echo "# RSS 10 s after: $(rsses)"
heaps rejoined
echo "# data and logs in $dir"
