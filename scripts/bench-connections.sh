#!/usr/bin/env bash
# Idle connections held by the relay beside nats-server: memory and threads each server spends per connection.
#
# Starts nats-server and a pixie-server relay (relay_tokens=insecure-dev: DEVELOPMENT ONLY, no SEND is made
# here unless THROUGHPUT=1) on free ports. For each server in turn: its RSS (VmRSS) and thread count before, then
# `connection-bench hold` opens CONNECTIONS connections from one epoll thread (SUBSCRIBE_FRACTION of them
# subscribed to one random subject, spread over SOURCES addresses in 127.0.0.0/8), and once its `ready` line is
# out (and SETTLE seconds more) RSS and threads again. Bytes per connection = (RSS with them - RSS before) /
# connections up. A Markdown table, and the relay / NATS ratio of bytes per connection.
#
# With THROUGHPUT=1 the idle connections stay held on both servers while relay-bench runs (COUNT messages),
# and its table follows.
#
# Environment: CONFIG (debug or release, default release), CONNECTIONS (default 10000), SUBSCRIBE_FRACTION
# (default 1), SOURCES (default 100), RAMP (handshakes in flight, default 200), SETTLE (seconds, default 2),
# READY_TIMEOUT (seconds to wait for `ready`, default 600), THROUGHPUT (default 0), COUNT (default 20000),
# RELAY_ARGS (below). Needs nats-server (./scripts/setup.sh), and libnats-dev for THROUGHPUT=1.
set -euo pipefail

# ---------------------------------------------------------------------------------------------------------------
# RELAY_ARGS: extra `pixie-server relay` flags, word-split, such as the ones that raise its connection limits so
# it takes CONNECTIONS WebSockets (TO BE FILLED IN with the flag names; empty by default, the environment wins).
RELAY_ARGS="${RELAY_ARGS:-}"
# ---------------------------------------------------------------------------------------------------------------

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
config="${CONFIG:-release}"
connections="${CONNECTIONS:-10000}"
fraction="${SUBSCRIBE_FRACTION:-1}"
sources="${SOURCES:-100}"
ramp="${RAMP:-200}"
settle="${SETTLE:-2}"
ready_timeout="${READY_TIMEOUT:-600}"
throughput="${THROUGHPUT:-0}"
say() { printf 'bench-connections: %s\n' "$*" >&2; }
command -v nats-server >/dev/null 2>&1 || { say "nats-server is not installed: run ./scripts/setup.sh"; exit 1; }

# Every process started here inherits the raised limit: the servers hold CONNECTIONS sockets each, the client too.
hard="$(ulimit -Hn)"
if [ "$hard" = unlimited ]; then ulimit -n 1048576 2>/dev/null || true; else ulimit -n "$hard"; fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((connections + 64)) ]; then
    say "CONNECTIONS=$connections needs $((connections + 64)) descriptors, but ulimit -n is at most $(ulimit -n)"
    exit 1
fi

say "building pixie-server and connection-bench ($config)"
swift build -c "$config" --product pixie-server >&2
swift build -c "$config" --product connection-bench >&2
if [ "$throughput" = 1 ]; then swift build -c "$config" --product relay-bench >&2; fi
bin="$(swift build -c "$config" --show-bin-path)"

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A field of /proc/PID/status ("VmRSS" in kB, "Threads"), as a number.
status_field() { awk -v field="$2:" '$1 == field { print $2 }' "/proc/$1/status"; }
mib() { awk -v kb="$1" 'BEGIN { printf "%.1f MiB", kb / 1024 }'; }

nats_port="$(free_port)"
nats-server -a 127.0.0.1 -p "$nats_port" 2>"$work/nats.log" &
nats_pid=$!
pids+=("$nats_pid")
for _ in $(seq 50); do
    grep -q "Server is ready" "$work/nats.log" && break
    sleep 0.1
done
grep -q "Server is ready" "$work/nats.log" || { cat "$work/nats.log" >&2; say "nats-server did not start"; exit 1; }

read -r -a relay_args <<<"$RELAY_ARGS"
"$bin/pixie-server" relay --data-dir "$work/data" --port 0 --relay-tokens insecure-dev \
    ${relay_args[@]+"${relay_args[@]}"} >/dev/null 2>"$work/server.log" &
relay_pid=$!
pids+=("$relay_pid")
relay_port=""
for _ in $(seq 100); do
    relay_port="$(sed -n 's/.*"address":"http:\/\/127.0.0.1:\([0-9]*\)".*"msg":"listening".*/\1/p' "$work/server.log" | head -1)"
    [ -n "$relay_port" ] && break
    sleep 0.1
done
[ -n "$relay_port" ] || { cat "$work/server.log" >&2; say "pixie-server did not report its address"; exit 1; }
say "nats-server on $nats_port (pid $nats_pid), pixie-server relay on $relay_port (pid $relay_pid)"
sleep 1  # both idle a moment before the first sample

# measure ID NAME PROTOCOL PORT SERVER_PID: holds CONNECTIONS connections and appends a table row to $work/rows;
# the client's pid is left in client_pid (still holding), its output in $work/ID.out, bytes per connection in
# $work/ID.per.
measure() {
    local id="$1" name="$2" protocol="$3" port="$4" server="$5"
    local rss_before threads_before rss_after threads_after ready connected failed per
    rss_before="$(status_field "$server" VmRSS)"
    threads_before="$(status_field "$server" Threads)"
    say "$name: opening $connections connections"
    "$bin/connection-bench" hold --protocol "$protocol" --port "$port" --connections "$connections" \
        --subscribe-fraction "$fraction" --sources "$sources" --ramp "$ramp" \
        >"$work/$id.out" 2>"$work/$id.err" &
    client_pid=$!
    pids+=("$client_pid")
    local waited=0
    until grep -q '^ready ' "$work/$id.out"; do
        if ! kill -0 "$client_pid" 2>/dev/null; then
            cat "$work/$id.out" "$work/$id.err" >&2
            say "$name: connection-bench ended before all connections were up"
            exit 1
        fi
        if [ "$waited" -ge $((ready_timeout * 5)) ]; then
            say "$name: no ready line after $ready_timeout s"
            exit 1
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
    sleep "$settle"
    kill -0 "$server" 2>/dev/null || { say "$name: the server is gone"; exit 1; }
    rss_after="$(status_field "$server" VmRSS)"
    threads_after="$(status_field "$server" Threads)"
    ready="$(grep '^ready ' "$work/$id.out")"
    connected="$(sed -n 's/.*connected=\([0-9]*\).*/\1/p' <<<"$ready")"
    failed="$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' <<<"$ready")"
    grep '^failure ' "$work/$id.out" | sed "s/^/bench-connections: $id: /" >&2 || true
    say "$name: $ready"
    if [ "$connected" -gt 0 ]; then
        per="$(awk -v a="$rss_after" -v b="$rss_before" -v n="$connected" \
            'BEGIN { printf "%.0f", (a - b) * 1024 / n }')"
    else
        per="n/a"
    fi
    printf '%s\n' "$per" >"$work/$id.per"
    printf '| %s | %s | %s | %s | %s | %s | %s → %s |\n' "$name" "$connected" "$failed" "$(mib "$rss_before")" \
        "$(mib "$rss_after")" "$per" "$threads_before" "$threads_after" >>"$work/rows"
}

# stop_client ID PID: SIGTERM, then its last line (still_open=...).
stop_client() {
    kill -TERM "$2" 2>/dev/null || true
    wait "$2" 2>/dev/null || true
    say "$1: $(grep '^still_open=' "$work/$1.out" || echo 'no still_open line')"
}

: >"$work/rows"
measure nats "NATS (nats-server)" nats "$nats_port" "$nats_pid"
nats_client="$client_pid"
[ "$throughput" = 1 ] || stop_client nats "$nats_client"
measure relay "relay (pixie-server)" ws "$relay_port" "$relay_pid"
relay_client="$client_pid"

if [ "$throughput" = 1 ]; then
    say "relay-bench with $connections idle connections held on each server"
    "$bin/relay-bench" --relay-port "$relay_port" --nats-port "$nats_port" --count "${COUNT:-20000}" \
        >"$work/throughput.md"
    stop_client nats "$nats_client"
fi
stop_client relay "$relay_client"

echo
echo "$connections idle connections per server (subscribe fraction $fraction, $sources source addresses):"
echo
echo "| server | connections | failed | RSS before | RSS with N | bytes per connection | threads |"
echo "|---|---:|---:|---:|---:|---:|---:|"
cat "$work/rows"
nats_per="$(cat "$work/nats.per")"
relay_per="$(cat "$work/relay.per")"
echo
if [ "$nats_per" != n/a ] && [ "$relay_per" != n/a ] && [ "$nats_per" -gt 0 ]; then
    echo "relay / NATS bytes per connection: $(awk -v r="$relay_per" -v n="$nats_per" 'BEGIN { printf "%.1f", r / n }')"
else
    echo "relay / NATS bytes per connection: n/a (relay $relay_per, NATS $nats_per)"
fi
if [ "$throughput" = 1 ]; then
    echo
    echo "relay-bench with the idle connections held:"
    echo
    cat "$work/throughput.md"
fi
