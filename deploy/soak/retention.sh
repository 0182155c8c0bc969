#!/usr/bin/env bash
# Retention under continuous load (docs/RELIABILITY.md "Running for weeks"):
# the dev network (p1 → b1 → s1, s2) as four broker processes, max_retain
# on p1, one subscriber at s1, one publisher at RATE events/s of 100 bytes
# for SECONDS without pause. Every 10 s: p1's data directory on disk, p1's
# and b1's RSS, and the load average. With KILL_S2_AFTER=N, s2 is killed
# (-9) for good after N seconds.
#
#   deploy/soak/retention.sh [SECONDS] [RATE] [MAX_RETAIN]
#
# Ports 17101–17304 on 127.0.0.1; data in a fresh temporary directory.
set -euo pipefail
secs=${1:-300}; rate=${2:-20000}; retain=${3:-20s}
cd "$(dirname "$0")/../.."
dir=$(mktemp -d /tmp/aerie-soak.XXXXXX)
bin=$dir/aerie
go build -o "$bin" ./cmd/aerie
cat > "$dir/network.toml" <<TOML
[[broker]]
id = "p1"
listen = "127.0.0.1:17101"
clients = "127.0.0.1:17201"
data = "$dir/p1"
pubends = ["P1", "P2", "P3", "P4"]
max_retain = "$retain"

[[broker]]
id = "b1"
listen = "127.0.0.1:17102"

[[broker]]
id = "s1"
listen = "127.0.0.1:17103"
clients = "127.0.0.1:17203"
data = "$dir/s1"

[[broker]]
id = "s2"
listen = "127.0.0.1:17104"
clients = "127.0.0.1:17204"
data = "$dir/s2"

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
trap 'kill ${pid[*]} 2>/dev/null || true' EXIT
for b in p1 b1 s1 s2; do
  "$bin" broker --config "$dir/network.toml" --id $b >"$dir/$b.log" 2>&1 &
  pid[$b]=$!
done
for b in p1 s1; do # wait for the client ports
  port=$([ $b = p1 ] && echo 17201 || echo 17203)
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
done
"$bin" sub --connect 127.0.0.1:17203 --topic 'orders.>' --json >/dev/null 2>"$dir/sub.err" &
pid[sub]=$!
"$bin" pub --connect 127.0.0.1:17201 --topic orders.eu --size 100 --rate "$rate" --count $((rate * secs)) >"$dir/pub.out" 2>"$dir/pub.err" &
pub=$!
rss() { echo $(( $(awk '/VmRSS/{print $2}' /proc/$1/status) / 1024 )); }
start=$(date +%s)
echo "t_s p1_data_MB p1_rss_MB b1_rss_MB load1"
while kill -0 $pub 2>/dev/null; do
  sleep 10
  t=$(( $(date +%s) - start ))
  if [ -n "${KILL_S2_AFTER:-}" ] && [ "$t" -ge "$KILL_S2_AFTER" ] && kill -0 "${pid[s2]}" 2>/dev/null; then
    kill -9 "${pid[s2]}"; echo "# s2 killed for good at ${t}s"
  fi
  echo "$t $(du -sm "$dir/p1" | cut -f1) $(rss ${pid[p1]}) $(rss ${pid[b1]}) $(cut -d' ' -f1 /proc/loadavg)"
done
wait $pub || true
tail -1 "$dir/pub.out"
echo "# data and logs in $dir"
