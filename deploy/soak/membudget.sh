#!/usr/bin/env bash
# A PHB's memory with and without memory_budget (docs/RELIABILITY.md
# "Running for weeks"): the dev network (p1 → b1 → s1, s2) as four broker
# processes, one subscriber at s1, one publisher at p1 at RATE events/s of
# 100 bytes for SECONDS. b1 is paused (SIGSTOP) from 10 s for PAUSE
# seconds, so p1 keeps what b1 has not acknowledged: its payload cache
# fills (up to 64 MiB). Publishing ends at SECONDS + 30 at the latest.
# Every second: p1's and s1's RSS, p1's live heap as
# sampled against the budget and whether it sheds. At the end: p1's peak
# RSS, its sheds (aerie_memory_shed_total) and log reads, and what the
# subscriber got (events, none out of order or twice).
#
#   deploy/soak/membudget.sh [SECONDS] [RATE] [PAUSE] [MEMORY_BUDGET]
#
# MEMORY_BUDGET is the top-level memory_budget ("" for none), e.g. 48MiB.
# Ports: a random base from 20000; data in a fresh temporary directory.
set -euo pipefail
secs=${1:-40}; rate=${2:-10000}; pause=${3:-20}; budget=${4:-}
cd "$(dirname "$0")/../.."
dir=$(mktemp -d /tmp/aerie-membudget.XXXXXX)
bin=$dir/aerie
go build -o "$bin" ./cmd/aerie
base=$((20000 + RANDOM % 20000))
top=""
if [ -n "$budget" ]; then top="memory_budget = \"$budget\""; fi
cat > "$dir/network.toml" <<TOML
$top

[[broker]]
id = "p1"
listen = "127.0.0.1:$((base + 1))"
clients = "127.0.0.1:$((base + 101))"
http = "127.0.0.1:$((base + 401))"
data = "$dir/p1"
pubends = ["P1"]

[[broker]]
id = "b1"
listen = "127.0.0.1:$((base + 2))"

[[broker]]
id = "s1"
listen = "127.0.0.1:$((base + 3))"
clients = "127.0.0.1:$((base + 103))"

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
pid[pub]=$pub
rss() { echo $(( $(awk '/VmRSS/{print $2}' /proc/$1/status) / 1024 )); }
metric() { curl -s "http://127.0.0.1:$((base + 401))/metrics" | awk -v m="$1" '!done && ($1 ~ "^"m"{" || $1 == m) { print $2; done = 1 }' || true; }
start=$(date +%s)
peak=0; t=0
echo "t_s p1_rss_MB p1_live_heap_MB p1_shedding s1_rss_MB delivered load1"
while kill -0 $pub 2>/dev/null || [ $t -lt $((secs + 20)) ]; do
  sleep 1
  t=$(( $(date +%s) - start ))
  if [ $t -ge 10 ] && [ -z "${paused:-}" ]; then kill -STOP "${pid[b1]}"; paused=$t; echo "# b1 paused at ${t}s"; fi
  if [ -n "${paused:-}" ] && [ $t -ge $((paused + pause)) ] && [ -z "${resumed:-}" ]; then
    kill -CONT "${pid[b1]}"; resumed=$t; echo "# b1 resumed at ${t}s"
  fi
  r=$(rss ${pid[p1]})
  peak=$(( r > peak ? r : peak ))
  heap=$(metric aerie_memory_live_heap_bytes); heap=${heap:-0}
  echo "$t $r $(awk -v h="$heap" 'BEGIN { printf "%.0f", h / 1048576 }') $(metric aerie_memory_shedding) $(rss ${pid[s1]}) $(wc -l <"$dir/sub.out") $(cut -d' ' -f1 /proc/loadavg)"
  if ! kill -0 $pub 2>/dev/null && [ "$(wc -l <"$dir/sub.out")" -ge $((rate * secs)) ]; then break; fi
  if [ $t -ge $((secs + 30)) ]; then kill $pub 2>/dev/null || true; fi # a loaded machine publishes slower: end at SECONDS + 30
done
wait $pub || true
tail -1 "$dir/pub.out"
acked=$(tail -1 "$dir/pub.out" | sed -n 's/.* acked \([0-9]*\).*/\1/p')
for _ in $(seq 30); do # the subscriber gets what was acknowledged
  [ "$(wc -l <"$dir/sub.out")" -ge "${acked:-0}" ] && break
  sleep 1
done
awk 'match($0, /"tick":[0-9]+/) { t = substr($0, RSTART + 7, RLENGTH - 7) + 0; if (t <= last) bad++; last = t; n++ }
  END { printf "# subscriber at s1: %d events, %d out of order or twice\n", n, bad }' "$dir/sub.out"
echo "# p1: $(metric aerie_memory_shed_total) sheds; $(curl -s "http://127.0.0.1:$((base + 401))/status" | grep -o '"\(Evicted\|Fetches\|FetchMisses\|ShedBytes\)":[0-9]*' | tr '\n' ' ')"
echo "# p1 RSS: at most ${peak} MB (memory_budget ${budget:-none})"
echo "# data and logs in $dir"
