#!/usr/bin/env bash
# A slow durable subscriber resuming a large backlog (docs/BENCHMARKS.md §9a;
# Gryphon DS §4, catch-up at the subscriber's pace). The dev network
# (aerie dev: p1 → b1 → s1, s2) in one process; three durable
# subscriptions at s1 (slow, fast, alone) made, then left away; BACKLOG
# events of 16 bytes published to P1; then:
#   1. "alone" resumes and reads as fast as it can (the fast reader's pace
#      with nobody else catching up);
#   2. "slow" resumes, read at RATE lines/s, and 2 s later "fast" resumes
#      and reads as fast as it can, beside it.
# Each reader checks the seq property: events, repeats, jumps (order), and
# its rate from its first line to its last. Disconnections: the SHB's log
# lines "client connection closed" for s1 while a reader runs, other than
# the readers' own ends, and any "queue full" or "too slow".
#
#   deploy/soak/paced-catchup.sh [BACKLOG] [RATE]
#
# Ports 8601–8804 on 127.0.0.1; data in a fresh temporary directory. Set
# AERIE to a built binary to skip the build (e.g. an older one, to compare).
set -euo pipefail
backlog=${1:-1000000}; rate=${2:-1000}
cd "$(dirname "$0")/../.."
dir=$(mktemp -d /tmp/aerie-paced.XXXXXX)
bin=${AERIE:-$dir/aerie}
[ -n "${AERIE:-}" ] || go build -o "$bin" ./cmd/aerie
cat > "$dir/reader.py" <<'PY'
import sys, time, re, json
rate, out, want = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
pat = re.compile(rb"seq=(\d+)")
last = n = repeats = jumps = 0
t0 = None
for line in sys.stdin.buffer:
    m = pat.search(line)
    if not m:
        continue
    now = time.monotonic()
    t0 = t0 or now
    s = int(m.group(1))
    if s <= last:
        repeats += 1
    else:
        jumps += s != last + 1
        last = s
    n += 1
    if rate > 0 and t0 + n / rate > now:
        time.sleep(t0 + n / rate - now)
    if n >= want:
        break
el = time.monotonic() - t0 if t0 else 0
json.dump({"events": n, "last_seq": last, "repeats": repeats, "jumps": jumps,
           "seconds": round(el, 1), "rate": round(n / el) if el else 0}, open(out, "w"))
PY
"$bin" dev --dir "$dir/dev" --base-port 8600 --http "" --log-level info >"$dir/dev.out" 2>"$dir/dev.err" &
dev=$!
trap 'kill $dev 2>/dev/null || true' EXIT
sleep 4
shb=127.0.0.1:8703
for s in slow fast alone; do
  "$bin" sub --connect $shb --durable $s --topic 'm.>' --count 1 --timeout 1s 2>/dev/null || true
done
"$bin" pub --connect 127.0.0.1:8701 --topic m.x --count "$backlog" --size 16 --id backlog --log-level warn
echo "load after publishing: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" sub --connect $shb --durable alone --topic 'm.>' --count "$backlog" 2>/dev/null |
  python3 "$dir/reader.py" 0 "$dir/alone.json" "$backlog"
"$bin" sub --connect $shb --durable slow --topic 'm.>' --count "$backlog" 2>"$dir/slow.err" |
  python3 "$dir/reader.py" "$rate" "$dir/slow.json" "$backlog" &
slow=$!
sleep 2
"$bin" sub --connect $shb --durable fast --topic 'm.>' --count "$backlog" 2>/dev/null |
  python3 "$dir/reader.py" 0 "$dir/fast.json" "$backlog"
echo "load after the fast reader: $(cut -d' ' -f1-3 /proc/loadavg)"
wait $slow
echo "load after the slow reader: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in alone fast slow; do echo "$r: $(cat "$dir/$r.json")"; done
echo "s1 connections closed (3 made the subscriptions, 3 readers ended): $(grep -c 'client connection closed.*broker=s1' "$dir/dev.err" || true)"
echo "queue full / too slow: $(grep -ci 'queue full\|too slow' "$dir/dev.err" || true)"
echo "data and logs in $dir"
