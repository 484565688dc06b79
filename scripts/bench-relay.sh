#!/usr/bin/env bash
# The relay beside raw NATS (docs/benchmarks.md, "The relay beside NATS").
#
# Starts nats-server and two pixie-server relays on free ports: one with relay_tokens=insecure-dev
# (DEVELOPMENT ONLY: tokens are free to make, so the figure is the relay's own cost) and one with the default
# credential tokens (VOPRF-verified and spent in SQLite, minted beforehand by relay-bench). Then runs relay-bench: the same driver for both, one publisher and one
# subscriber connection, COUNT messages of SIZE bytes with at most WINDOW in flight (each of WINDOWS in turn:
# 64 is throughput under pipelining, 1 is one message at a time, the unloaded latency); messages/s and
# p50/p99 delivery latency, as Markdown tables. The issue's target is relay >= 50% of raw NATS.
# Two more relays run on one NATS bus (relay_nats_url, insecure-dev tokens, each on a data directory of its own:
# a Silent SEND touches no store): rows for both clients on one of them (within a node) and for the publisher on one
# and the subscriber on the other (across nodes, every frame through nats-server).
#
# Environment: CONFIG (debug or release, default release), COUNT (default 20000), SIZE (default 1024),
# WINDOWS (default "64 1"). Needs nats-server and libnats-dev (./scripts/setup.sh). Under a minute after the
# build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
config="${CONFIG:-release}"
say() { printf 'bench-relay: %s\n' "$*" >&2; }
command -v nats-server >/dev/null 2>&1 || { say "nats-server is not installed: run ./scripts/setup.sh"; exit 1; }

say "building pixie-server and relay-bench ($config)"
swift build -c "$config" --product pixie-server >&2
swift build -c "$config" --product relay-bench >&2
bin="$(swift build -c "$config" --show-bin-path)"

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
nats_port="$(free_port)"
nats-server -a 127.0.0.1 -p "$nats_port" 2>"$work/nats.log" &
pids+=($!)

# Starts `pixie-server relay --data-dir DIR ARGS...` logging to LOG; sets started_port to the port it listens on.
start_relay() {
    local dir="$1" log="$2"
    shift 2
    "$bin/pixie-server" relay --data-dir "$dir" --port 0 "$@" >/dev/null 2>"$log" &
    pids+=($!)
    started_port=""
    for _ in $(seq 100); do
        started_port="$(sed -n 's/.*"address":"http:\/\/127.0.0.1:\([0-9]*\)".*"msg":"listening".*/\1/p' "$log" | head -1)"
        [ -n "$started_port" ] && break
        sleep 0.1
    done
    [ -n "$started_port" ] || { cat "$log" >&2; say "pixie-server did not report its address"; exit 1; }
}
start_relay "$work/data" "$work/server.log" --relay-tokens insecure-dev
relay_port="$started_port"
# The same relay with real tokens: each SEND's token is verified under the VOPRF key in its data directory and
# spent once in its store; relay-bench mints them beforehand under that key.
start_relay "$work/credential" "$work/credential.log"
credential_port="$started_port"
for _ in $(seq 50); do
    grep -q "Server is ready" "$work/nats.log" && break
    sleep 0.1
done
start_relay "$work/bus-a" "$work/bus-a.log" --relay-tokens insecure-dev --relay-nats-url "nats://127.0.0.1:$nats_port"
bus_a="$started_port"
start_relay "$work/bus-b" "$work/bus-b.log" --relay-tokens insecure-dev --relay-nats-url "nats://127.0.0.1:$nats_port"
bus_b="$started_port"
grep -q "insecure-dev" "$work/server.log" && say "pixie-server warned: $(grep -o 'DEVELOPMENT ONLY[^"]*' "$work/server.log" | head -1)"
say "nats-server on $nats_port, pixie-server relays on $relay_port (insecure-dev), $credential_port (credential)," \
    "$bus_a and $bus_b (insecure-dev, on the NATS bus)"
for window in ${WINDOWS:-64 1}; do
    echo
    echo "window $window:"
    echo
    "$bin/relay-bench" --relay-port "$relay_port" --nats-port "$nats_port" --count "${COUNT:-20000}" \
        --size "${SIZE:-1024}" --window "$window" --credential-relay-port "$credential_port" \
        --credential-data-dir "$work/credential" --bus-relay-ports "$bus_a,$bus_b"
done
