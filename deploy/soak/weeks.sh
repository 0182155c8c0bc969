#!/usr/bin/env bash
# Weeks in minutes (docs/RELIABILITY.md "Running for weeks"): the dev network
# (p1 → b1 → s1, s2; deploy/soak/lib.sh) as four broker processes for
# DURATION seconds, `max_retain = MAX_RETAIN` at p1, one publisher at RATE
# events/s of 100 bytes without pause, and what a deployment meets over
# weeks, squeezed:
#   - a durable subscriber at s1 ("away") that reads for AWAY_AFTER seconds
#     (30) and is killed (-9) for good: its subscription stays at s1, and
#     must pin nothing past MAX_RETAIN;
#   - s2, with a subscriber of its own, killed (-9) for good after
#     KILL_S2_AFTER seconds (60);
#   - b1 killed (-9) and restarted 2 s later every B1_EVERY seconds (300; 0:
#     never) up to B1_UNTIL seconds (DURATION − 1260, so that the last 20
#     minutes, where the slopes are taken, have none);
#   - a plain subscriber ("plain") and a durable one ("stay") at s1 that stay
#     to the end, each checked as it reads (awk, streaming): every event
#     once, in order (ticks rising per pubend), none missing (the publisher's
#     seq property rises by one) but where a gap notice came between, none
#     inside a gap notice's ticks.
# Every 10 s it writes a line of DIR/samples.csv: each live broker's RSS
# (VmRSS) and data directory, the load average, p1's log and retained
# events (/metrics), the live heap of p1, b1 and s1 (HeapAlloc just after a
# collection, AERIE_PPROF) and the subscribers' progress. At the end it prints,
# per 5-minute window, min/median/max of each figure, and the slope (MB per
# minute, least squares) of each over the last 20 minutes. Heap profiles of
# p1, b1 and s1 (AERIE_PPROF) are saved at 600 s and at the end.
#
#   deploy/soak/weeks.sh [DURATION] [RATE] [MAX_RETAIN]    (1800 10000 10s)
#
# Ports 19101–19503 on 127.0.0.1; data in DIR ($DIR, else a fresh temporary
# directory).
set -euo pipefail
dur=${1:-1800}; rate=${2:-10000}; retain=${3:-10s}
away_after=${AWAY_AFTER:-30}; kill_s2=${KILL_S2_AFTER:-60}
b1_every=${B1_EVERY:-300}; b1_until=${B1_UNTIL:-$((dur - 1260))}
cd "$(dirname "$0")/../.."
. deploy/soak/lib.sh
dir=${DIR:-$(mktemp -d /tmp/aerie-weeks.XXXXXX)}
mkdir -p "$dir"
soak_build "$dir"
SOAK_HTTP=1 soak_network "$dir" "$retain" 19
echo "# $(git rev-parse --short HEAD) $(date -u +%FT%TZ) weeks.sh $dur $rate $retain in $dir"

declare -A pid
cleanup() { local p; for p in "${pid[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
declare -A pprof=([p1]=19501 [b1]=19502 [s1]=19503)
start_broker() { AERIE_PPROF=${pprof[$1]:+127.0.0.1:${pprof[$1]}} soak_broker "$dir" "$1"; }
for b in p1 b1 s1 s2; do start_broker $b; done
for port in 19201 19203 19204; do soak_wait_port $port; done

# The streaming check of one subscriber's --json lines: the summary goes to
# DIR/NAME.check at the end, "events last_seq" to DIR/NAME.progress every
# 100 000 events.
checker='
function num(re,   s) { if (!match($0, re)) return -1; s = substr($0, RSTART, RLENGTH); sub(/.*:/, "", s); return s + 0 }
/"gap"/ { match($0, /"pubend":"[^"]*"/); p = substr($0, RSTART + 10, RLENGTH - 11)
  ng++; gp[ng] = p; glo[ng] = num("\"from\":[0-9]+"); ghi[ng] = num("\"to\":[0-9]+"); gapseen[p] = 1
  printf "gap notice %s from %.0f to %.0f after %d events\n", p, glo[ng], ghi[ng], n; next }
match($0, /"pubend":"[^"]*","tick":[0-9]+/) {
  split(substr($0, RSTART, RLENGTH), a, /"/); p = a[4]; t = substr(a[7], 2) + 0
  s = num("\"seq\":[0-9]+"); n++
  if (p in last) {
    if (t <= last[p] || s <= lastseq[p]) bad++
    else if (s > lastseq[p] + 1) { if (gapseen[p]) ingap += s - lastseq[p] - 1; else lost += s - lastseq[p] - 1 }
  } else first[p] = s
  for (i = 1; i <= ng; i++) if (gp[i] == p && t > glo[i] && t <= ghi[i]) inside++
  last[p] = t; lastseq[p] = s; gapseen[p] = 0
  if (n % 100000 == 0) { print n, s > prog; fflush(prog) }
}
END { for (p in first) printf "pubend %s: seq %d to %d\n", p, first[p], lastseq[p]
  printf "%d events, %d gap notices, %d out of order or twice, %d missing outside gap notices, %d skipped by gap notices, %d inside a gap notice\n", n, ng, bad, lost, ingap, inside
  print n, lastseq[p] > prog }'
check() { awk -v prog="$dir/$1.progress" "$checker" >"$dir/$1.check"; }
sub_at() { # NAME PORT [sub flags]: $! is the subscriber
  local name=$1 port=$2; shift 2
  "$bin" sub --connect 127.0.0.1:$port --topic 'orders.>' --json "$@" 2>"$dir/$name.err" > >(check "$name") &
  pid[$name]=$!
}
sub_at plain 19203
sub_at stay 19203 --durable stay
sub_at s2sub 19204
"$bin" sub --connect 127.0.0.1:19203 --topic 'orders.>' --json --durable away >"$dir/away.out" 2>"$dir/away.err" &
pid[away]=$!
for s in plain stay s2sub away; do # until each subscription is in force
  for _ in $(seq 100); do grep -q subscribed "$dir/$s.err" 2>/dev/null && break; sleep 0.1; done
done
"$bin" pub --connect 127.0.0.1:19201 --topic orders.eu --size 100 --rate "$rate" --count $((rate * dur)) >"$dir/pub.out" 2>"$dir/pub.err" &
pid[pub]=$!

metric() { # PORT NAME: the sum of a metric's samples (- if unreachable)
  curl -s --max-time 2 "http://127.0.0.1:$1/metrics" 2>/dev/null |
    awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $NF; f = 1 } END { if (f) printf "%.0f\n", s; else print "-" }'
}
disk() { if [ -d "$1" ]; then du -sk "$1" 2>/dev/null | awk '{ printf "%.1f\n", $1 / 1024 }'; else echo -; fi; }
live() { if [ -n "${pid[$1]:-}" ]; then soak_rss "${pid[$1]}"; else echo -; fi; }
progress() { if [ -s "$dir/$1.progress" ]; then tail -1 "$dir/$1.progress" | cut -d' ' -f1; else echo 0; fi; }
live_heap() { # BROKER: its live heap in MB, just after a collection (- if unreachable)
  curl -s --max-time 5 "http://127.0.0.1:${pprof[$1]}/debug/pprof/heap?gc=1&debug=1" 2>/dev/null |
    awk '$1 == "#" && $2 == "HeapAlloc" { printf "%.1f\n", $4 / 1048576; f = 1 } END { if (!f) print "-" }'
}
heap() { local b; for b in p1 b1 s1; do curl -s --max-time 20 "http://127.0.0.1:${pprof[$b]}/debug/pprof/heap" >"$dir/heap-$b-$1.pb.gz" || true; done; }

csv=$dir/samples.csv
echo "t_s,p1_rss_MB,p1_data_MB,b1_rss_MB,s1_rss_MB,s1_data_MB,s2_rss_MB,load1,p1_log_MB,p1_retained_events,p1_heap_MB,b1_heap_MB,s1_heap_MB,plain_events,stay_events,note" >"$csv"
start=$(date +%s); next_b1=$b1_every; note=
while kill -0 "${pid[pub]}" 2>/dev/null; do
  now=$(date +%s); t=$((now - start)); sleep $((10 - t % 10)); t=$(( $(date +%s) - start ))
  if [ -n "${pid[away]:-}" ] && [ "$t" -ge "$away_after" ]; then
    kill -9 "${pid[away]}"; unset 'pid[away]'; note="$note away subscriber killed;"
  fi
  if [ -n "${pid[s2]:-}" ] && [ "$t" -ge "$kill_s2" ]; then
    kill -9 "${pid[s2]}" "${pid[s2sub]}" 2>/dev/null || true; unset 'pid[s2]' 'pid[s2sub]'; note="$note s2 killed;"
  fi
  if [ "$b1_every" -gt 0 ] && [ "$t" -ge "$next_b1" ] && [ "$t" -le "$b1_until" ]; then
    kill -9 "${pid[b1]}"; sleep 2; start_broker b1; next_b1=$((next_b1 + b1_every)); note="$note b1 killed and restarted;"
  fi
  if [ "$t" -ge 600 ] && [ ! -e "$dir/heap-p1-600.pb.gz" ]; then heap 600; fi
  if [ "$t" -ge $((dur + 600)) ]; then kill "${pid[pub]}"; note="$note publisher ended (10 minutes late);"; fi
  log=$(metric 19401 aerie_log_bytes); [ "$log" != - ] && log=$(awk -v b="$log" 'BEGIN { printf "%.1f", b / 1048576 }')
  echo "$t,$(live p1),$(disk "$dir/p1"),$(live b1),$(live s1),$(disk "$dir/s1"),$(live s2),$(cut -d' ' -f1 /proc/loadavg),$log,$(metric 19401 aerie_retained_events),$(live_heap p1),$(live_heap b1),$(live_heap s1),$(progress plain),$(progress stay),$note" >>"$csv"
  tail -1 "$csv"; note=
done
wait "${pid[pub]}" || true; unset 'pid[pub]'
tail -1 "$dir/pub.out" || true
heap end
curl -s --max-time 5 http://127.0.0.1:19401/metrics >"$dir/p1.metrics" || true
curl -s --max-time 5 http://127.0.0.1:19403/metrics >"$dir/s1.metrics" || true
# Let the subscribers at s1 drain: until neither's progress moves for 20 s
# (at most 10 minutes); then end them (SIGTERM), which ends their checks.
for _ in $(seq 30); do
  a=$(progress plain)$(progress stay); sleep 20; [ "$(progress plain)$(progress stay)" = "$a" ] && break
done
kill "${pid[plain]}" "${pid[stay]}" 2>/dev/null || true; unset 'pid[plain]' 'pid[stay]'
for s in plain stay; do
  for _ in $(seq 600); do [ -s "$dir/$s.check" ] && grep -q events "$dir/$s.check" && break; sleep 0.1; done
  echo "# $s subscriber at s1:"; sed 's/^/#   /' "$dir/$s.check"
done
cleanup; pid=()

# Per 5-minute window: min/median/max of each column; then the slopes over
# the last 20 minutes.
awk -F, '
function stats(w, c,   n, i, j, v, x) { n = cnt[w, c]; if (!n) return "-"
  for (i = 1; i <= n; i++) v[i] = val[w, c, i]
  for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
  return sprintf("%g/%g/%g", v[1], v[int((n + 1) / 2)], v[n]) }
NR == 1 { for (c = 2; c <= 13; c++) name[c] = $c; next }
{ w = int(($1 - 1) / 300); if (w > maxw) maxw = w; t[NR] = $1; last = $1
  for (c = 2; c <= 13; c++) if ($c != "-" && $c != "") { cnt[w, c]++; val[w, c, cnt[w, c]] = $c; col[NR, c] = $c } }
END {
  printf "# per 5-minute window, min/median/max:\n# window"; for (c = 2; c <= 13; c++) printf " %s", name[c]; printf "\n"
  for (w = 0; w <= maxw; w++) { printf "# %d-%d min", w * 5, w * 5 + 5; for (c = 2; c <= 13; c++) printf " %s", stats(w, c); printf "\n" }
  printf "# slope over the last 20 minutes (%d-%d s), per minute:", last - 1200, last
  for (c = 2; c <= 13; c++) { n = sx = sy = sxx = sxy = 0
    for (r in t) if (t[r] >= last - 1200 && (r, c) in col) { x = t[r] / 60; y = col[r, c]; n++; sx += x; sy += y; sxx += x * x; sxy += x * y }
    if (n > 2 && n * sxx != sx * sx) printf " %s %+.3f", name[c], (n * sxy - sx * sy) / (n * sxx - sx * sx) }
  printf "\n" }' "$csv"
echo "# data and logs in $dir"
