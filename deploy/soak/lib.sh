# Shared by retention.sh and weeks.sh (sourced, not run): the dev network
# p1 → b1 → {s1, s2} as four broker processes on 127.0.0.1, with p1 hosting
# pubends P1–P4.
#
# Ports, for a prefix NN (17 for retention.sh, 19 for weeks.sh): links on
# NN101–NN104, clients on NN201 (p1), NN203 (s1), NN204 (s2), operations
# (/metrics) on NN401–NN404 when SOAK_HTTP=1.

# soak_build DIR: builds the aerie binary into DIR/aerie; sets bin.
soak_build() {
  bin=$1/aerie
  go build -o "$bin" ./cmd/aerie
}

# soak_network DIR MAX_RETAIN PREFIX: writes DIR/network.toml.
soak_network() {
  local dir=$1 retain=$2 pp=$3 http1= http2= http3= http4=
  if [ "${SOAK_HTTP:-}" = 1 ]; then
    http1="http = \"127.0.0.1:${pp}401\""; http2="http = \"127.0.0.1:${pp}402\""
    http3="http = \"127.0.0.1:${pp}403\""; http4="http = \"127.0.0.1:${pp}404\""
  fi
  cat >"$dir/network.toml" <<TOML
[[broker]]
id = "p1"
listen = "127.0.0.1:${pp}101"
clients = "127.0.0.1:${pp}201"
data = "$dir/p1"
pubends = ["P1", "P2", "P3", "P4"]
max_retain = "$retain"
$http1

[[broker]]
id = "b1"
listen = "127.0.0.1:${pp}102"
$http2

[[broker]]
id = "s1"
listen = "127.0.0.1:${pp}103"
clients = "127.0.0.1:${pp}203"
data = "$dir/s1"
$http3

[[broker]]
id = "s2"
listen = "127.0.0.1:${pp}104"
clients = "127.0.0.1:${pp}204"
data = "$dir/s2"
$http4

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
}

# soak_broker DIR ID: starts broker ID (log appended to DIR/ID.log) and
# records its PID in pid[ID] (the caller declares `declare -A pid`).
soak_broker() {
  "$bin" broker --config "$1/network.toml" --id "$2" >>"$1/$2.log" 2>&1 &
  pid[$2]=$!
}

# soak_wait_port PORT: waits (at most 10 s) until 127.0.0.1:PORT accepts.
soak_wait_port() {
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return; sleep 0.1; done
}

# soak_rss PID: the process's resident set in MB, one decimal ("-" if gone).
soak_rss() {
  if [ -r /proc/$1/status ]; then awk '/^VmRSS/ { printf "%.1f\n", $2 / 1024 }' /proc/$1/status; else echo -; fi
}

# soak_ticks: filters `aerie sub --json` lines to "pubend tick". Ticks stay
# strings: they pass 2^31, where some awks print numbers as 1.8e+15.
soak_ticks() { awk 'match($0, /"pubend":"[^"]*","tick":[0-9]+/) { split(substr($0, RSTART, RLENGTH), a, /"/); print a[4], substr(a[7], 2) }'; }
