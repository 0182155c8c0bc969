#!/usr/bin/env bash
# An SHB's memory while it recovers a gap (docs/RELIABILITY.md "An SHB
# recovering a gap"): the dev network (p1 → b1 → s1, s2) as four broker
# processes, one subscriber at s1, one publisher at RATE events/s of 100
# bytes for SECONDS. b1 is stopped (SIGSTOP) from 10 s for STOP seconds:
# its links time out, and when it goes on s1 hears the present above the
# ticks it missed while those are recovered from p1. Every second: s1's
# RSS. At the end: s1's RSS before the stop and at its peak after, what
# the subscriber got (events, none out of order or twice), and s1's
# payloads dropped and asked back (its /status).
#
#   deploy/soak/recovery.sh [SECONDS] [RATE] [STOP] [RELAY_CACHE]
#
# RELAY_CACHE is s1's relay_cache_bytes ("" for the default, 64 MiB).
# Ports: a random base from 20000; data in a fresh temporary directory.
set -euo pipefail
secs=${1:-40}; rate=${2:-10000}; stop=${3:-15}; cache=${4:-}
cd "$(dirname "$0")/../.."
dir=$(mktemp -d /tmp/aerie-recovery.XXXXXX)
bin=$dir/aerie
go build -o "$bin" ./cmd/aerie
base=$((20000 + RANDOM % 20000))
s1cache=""
if [ -n "$cache" ]; then s1cache="relay_cache_bytes = \"$cache\""; fi
cat > "$dir/network.toml" <<TOML
[[broker]]
id = "p1"
listen = "127.0.0.1:$((base + 1))"
clients = "127.0.0.1:$((base + 101))"
data = "$dir/p1"
pubends = ["P1"]

[[broker]]
id = "b1"
listen = "127.0.0.1:$((base + 2))"

[[broker]]
id = "s1"
listen = "127.0.0.1:$((base + 3))"
clients = "127.0.0.1:$((base + 103))"
http = "127.0.0.1:$((base + 403))"
$s1cache

[[broker]]
id = "s2"
listen = "127.0.0.1:$((base + 4))"
clients = "127.0.0.1:$((base + 104))"

[[link]]
up = "p1"
down = "b1"

[[link]]
up = "b1"
down = "s1"

[[link]]
up = "b1"
down = "s2"
TOML
declare -A pid
trap 'kill -CONT ${pid[b1]} 2>/dev/null || true; kill ${pid[*]} 2>/dev/null || true' EXIT
for b in p1 b1 s1 s2; do
  "$bin" broker --config "$dir/network.toml" --id $b >"$dir/$b.log" 2>&1 &
  pid[$b]=$!
done
for port in $((base + 101)) $((base + 103)); do # wait for the client ports
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
done
"$bin" sub --connect 127.0.0.1:$((base + 103)) --topic 'orders.>' --json >"$dir/sub.out" 2>"$dir/sub.err" &
pid[sub]=$!
sleep 1
"$bin" pub --connect 127.0.0.1:$((base + 101)) --topic orders.eu --size 100 --rate "$rate" --count $((rate * secs)) >"$dir/pub.out" 2>"$dir/pub.err" &
pub=$!
rss() { echo $(( $(awk '/VmRSS/{print $2}' /proc/$1/status) / 1024 )); }
start=$(date +%s)
before=0; peak=0; t=0
echo "t_s s1_rss_MB delivered load1"
while kill -0 $pub 2>/dev/null || [ $t -lt $((secs + 20)) ]; do
  sleep 1
  t=$(( $(date +%s) - start ))
  if [ $t -ge 10 ] && [ -z "${stopped:-}" ]; then kill -STOP "${pid[b1]}"; stopped=$t; echo "# b1 stopped at ${t}s"; fi
  if [ -n "${stopped:-}" ] && [ $t -ge $((stopped + stop)) ] && [ -z "${resumed:-}" ]; then
    kill -CONT "${pid[b1]}"; resumed=$t; echo "# b1 resumed at ${t}s"
  fi
  r=$(rss ${pid[s1]})
  if [ -z "${stopped:-}" ]; then before=$(( r > before ? r : before )); elif [ -n "${resumed:-}" ]; then peak=$(( r > peak ? r : peak )); fi
  echo "$t $r $(wc -l <"$dir/sub.out") $(cut -d' ' -f1 /proc/loadavg)"
  if ! kill -0 $pub 2>/dev/null && [ "$(wc -l <"$dir/sub.out")" -ge $((rate * secs)) ]; then break; fi
done
wait $pub || true
tail -1 "$dir/pub.out"
awk 'match($0, /"tick":[0-9]+/) { t = substr($0, RSTART + 7, RLENGTH - 7) + 0; if (t <= last) bad++; last = t; n++ }
  END { printf "# subscriber at s1: %d events, %d out of order or twice\n", n, bad }' "$dir/sub.out"
curl -s "http://127.0.0.1:$((base + 403))/status" | grep -o '"\(Evicted\|Refetches\|RefetchTimeouts\|DeliveryFetches\)":[0-9]*' | tr '\n' ' ' | sed 's/^/# s1: /; s/$/\n/'
echo "# s1 RSS: at most ${before} MB before the stop, at most ${peak} MB after it (relay_cache_bytes ${cache:-default})"
echo "# data and logs in $dir"
