#!/usr/bin/env bash
# The compose cluster (compose.yaml, network.toml: seven brokers in seven
# containers, TLS on, gossip across containers) under a publisher and two
# subscribers, with containers killed mid-stream: c1, a member of the
# redundant cell feeding s3 (killed for good), and b1, the only IB feeding
# s1 (killed, then started again). Both subscribers must get every event
# exactly once and in order. The clients run in containers on the same
# network and reach the brokers by the names their certificates carry.
# Needs docker and docker-compose; run from anywhere. COUNT (default 3000)
# events at RATE (default 100) per second; KEEP=1 leaves the cluster up.
set -euo pipefail
cd "$(dirname "$0")"
count=${COUNT:-3000}
rate=${RATE:-100}
compose="docker-compose -p aerie-cluster -f compose.yaml"
work=$(mktemp -d)
cleanup() {
  $compose logs --no-color >"$work/brokers.log" 2>&1 || true
  [ "${KEEP:-}" = 1 ] || $compose down -v >/dev/null 2>&1 || true
  echo "logs and events in $work" >&2
}
trap cleanup EXIT
say() { echo "$(date +%T) $*" >&2; }
wait_for() { # wait_for SECONDS DESCRIPTION COMMAND…: poll until COMMAND succeeds
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { say "FAIL: $what"; exit 1; }
    sleep 0.5
  done
}
lines() { [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -ge "$2" ]; }
ready() { curl -sf --cacert certs/ca.pem --resolve "$1:$2:127.0.0.1" "https://$1:$2/readyz"; }

say "building the binary, the certificates and the FROM-scratch image"
(cd .. && CGO_ENABLED=0 go build -o deploy/aerie ./cmd/aerie)
./aerie certs --config network.toml --out certs >/dev/null
docker build -q -t aerie:dev . >/dev/null
$compose down -v >/dev/null 2>&1 || true
$compose up -d 2>&1 | grep -v '^$' >&2
ids=(p1 b1 s1 s2 c1 c2 s3)
for i in "${!ids[@]}"; do wait_for 60 "${ids[$i]} never ready" ready "${ids[$i]}" $((7401 + i)); done
say "all seven brokers ready (their links to every upstream cell are up)"
members=$(curl -sf --cacert certs/ca.pem --resolve s3:7407:127.0.0.1 https://s3:7407/status | python3 -c 'import json,sys; print(json.load(sys.stdin)[0].get("membership",{}).get("members"))')
say "membership as s3 sees it: $members"

client="$compose run --rm -T client"
tls="--tls-ca /etc/aerie/certs/ca.pem"
for s in s1 s3; do
  port=$([ $s = s1 ] && echo 7203 || echo 7207)
  $client sub --connect "$s:$port" $tls --topic 'orders.>' --json --count "$count" --timeout 300s \
    >"$work/$s.jsonl" 2>"$work/$s.err" &
  eval "sub_$s=\$!"
done
wait_for 60 "s1's subscriber never subscribed" grep -q '^subscribed' "$work/s1.err"
wait_for 60 "s3's subscriber never subscribed" grep -q '^subscribed' "$work/s3.err"
say "subscribed at s1 and s3; publishing $count events at $rate/s to p1"
$client pub --connect p1:7201 $tls --topic orders.eu --count "$count" --rate "$rate" --id cluster-run \
  >"$work/pub.out" 2>"$work/pub.err" &
pub=$!

wait_for 120 "no events at s3" lines "$work/s3.jsonl" $((count / 4))
say "kill -9 c1 (cell c keeps c2) and b1 (s1's only path) mid-stream"
$compose kill c1 b1 2>&1 | grep -v '^$' >&2
wait_for 60 "s3 not ready through c2 alone" ready s3 7407
say "s3 is ready through c2 alone"
wait_for 120 "no events at s3 after the kills" lines "$work/s3.jsonl" $((count / 2))
say "start b1 again (c1 stays down)"
$compose start b1 2>&1 | grep -v '^$' >&2

fail=0
wait "$pub" || { say "FAIL: the publisher: $(tail -3 "$work/pub.err")"; fail=1; }
say "publisher: $(tail -1 "$work/pub.out")"
for s in s1 s3; do
  pid_var="sub_$s"
  wait "${!pid_var}" || { say "FAIL: the subscriber at $s: $(tail -3 "$work/$s.err")"; fail=1; }
done
python3 - "$count" "$work/s1.jsonl" "$work/s3.jsonl" <<'PY' || fail=1
import json, sys
count, bad = int(sys.argv[1]), 0
for path in sys.argv[2:]:
    seqs, ticks, gaps, lat = [], [], 0, []
    for line in open(path):
        o = json.loads(line)
        if "gap" in o:
            gaps += 1
            continue
        seqs.append(o["props"]["seq"]); ticks.append(o["tick"]); lat.append(o["recv_ms"] - o["pub_ms"])
    once = sorted(seqs) == list(range(1, count + 1))
    ordered = seqs == sorted(seqs) and all(a < b for a, b in zip(ticks, ticks[1:]))
    lat.sort()
    name = path.rsplit("/", 1)[1].split(".")[0]
    print(f"{name}: {len(seqs)} events, exactly once: {once}, in order: {ordered}, gap notices: {gaps}, "
          f"latency p50 {lat[len(lat)//2]} ms, max {lat[-1]} ms")
    bad += not (once and ordered and gaps == 0)
sys.exit(1 if bad else 0)
PY
if [ $fail = 0 ]; then say "PASS: exactly once, in order, at s1 and s3"; else say "FAIL"; fi
exit $fail
