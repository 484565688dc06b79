#!/usr/bin/env bash
# What TLS costs (docs/benchmarks.md, "TLS"): the relay's 1 KiB send rate and its idle memory per connection over
# TLS, beside the same relay over plain WebSockets and beside nats-server with and without TLS, all in one run;
# then the sign-in's wall time against pixie-server over https:// beside http://.
#
# Makes a certificate for localhost and 127.0.0.1 (openssl, self-signed, its own CA), starts on free loopback ports
# nats-server plain and with TLS (--tls, the same certificate), and pixie-server relay plain and with --tls-cert
# (both with relay_tokens=insecure-dev, DEVELOPMENT ONLY: tokens are free, so the figure is the relay's own).
# 1. relay-bench: one publisher, one subscriber, COUNT (20000) messages of SIZE (1024) bytes, at most WINDOW in
#    flight, for each window in WINDOWS ("64 1").
# 2. connection-bench hold: CONNECTIONS (5000; each TLS connection holds 3 descriptors on the relay) idle
#    connections on each server in turn, every one subscribed (a device holding its inbox); the server's VmRSS
#    before and with them, bytes per connection = (with - before) / N.
# 3. signin-bench against the whole pixie-server, plain and with TLS (checkpoint interval 50 ms, so the checkpoint
#    wait does not hide the rest): COUNT_SIGNIN (10) sign-ins one at a time, RATE_COUNT (24) with 4 at once.
# Environment: CONFIG (release), COUNT, SIZE, WINDOWS, CONNECTIONS, COUNT_SIGNIN, RATE_COUNT. About 3 minutes after
# the build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
config="${CONFIG:-release}"
connections="${CONNECTIONS:-5000}"
say() { printf 'bench-tls: %s\n' "$*" >&2; }
command -v nats-server >/dev/null 2>&1 || { say "nats-server is not installed: run ./scripts/setup.sh"; exit 1; }
command -v openssl >/dev/null 2>&1 || { say "openssl is not installed: run ./scripts/setup.sh"; exit 1; }

hard="$(ulimit -Hn)"
if [ "$hard" = unlimited ]; then ulimit -n 1048576 2>/dev/null || true; else ulimit -n "$hard"; fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((3 * connections + 64)) ]; then
    say "CONNECTIONS=$connections needs $((3 * connections + 64)) descriptors, but ulimit -n is at most $(ulimit -n)"
    exit 1
fi

say "building pixie-server, relay-bench, connection-bench and signin-bench ($config)"
for product in pixie-server relay-bench connection-bench signin-bench; do
    swift build -c "$config" --product "$product" >&2
done
bin="$(swift build -c "$config" --show-bin-path)"

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
status_field() { awk -v field="$2:" '$1 == field { print $2 }' "/proc/$1/status"; }
mib() { awk -v kb="$1" 'BEGIN { printf "%.1f MiB", kb / 1024 }'; }

# start_nats NAME ARGS...: sets started_port and started_pid.
start_nats() {
    local name="$1"
    shift
    started_port="$(free_port)"
    nats-server -a 127.0.0.1 -p "$started_port" "$@" 2>"$work/$name.log" &
    started_pid=$!
    pids+=("$started_pid")
    for _ in $(seq 50); do
        grep -q "Server is ready" "$work/$name.log" && return
        sleep 0.1
    done
    cat "$work/$name.log" >&2
    say "nats-server ($name) did not start"
    exit 1
}

# start_pixie NAME SCHEME ARGS...: `pixie-server ARGS` logging to NAME.log; sets started_port and started_pid.
start_pixie() {
    local name="$1" scheme="$2"
    shift 2
    "$bin/pixie-server" "$@" --port 0 >/dev/null 2>"$work/$name.log" &
    started_pid=$!
    pids+=("$started_pid")
    started_port=""
    for _ in $(seq 100); do
        started_port="$(sed -n "s/.*\"address\":\"$scheme:\/\/127.0.0.1:\([0-9]*\)\".*\"msg\":\"listening\".*/\1/p" \
            "$work/$name.log" | head -1)"
        [ -n "$started_port" ] && return
        sleep 0.1
    done
    cat "$work/$name.log" >&2
    say "pixie-server ($name) did not report its address"
    exit 1
}

start_nats nats
nats_port="$started_port" nats_pid="$started_pid"
start_nats nats-tls --tls --tlscert "$work/cert.pem" --tlskey "$work/key.pem"
nats_tls_port="$started_port" nats_tls_pid="$started_pid"
start_pixie relay http relay --data-dir "$work/relay" --relay-tokens insecure-dev
relay_port="$started_port" relay_pid="$started_pid"
start_pixie relay-tls https relay --data-dir "$work/relay-tls" --relay-tokens insecure-dev \
    --tls-cert "$work/cert.pem" --tls-key "$work/key.pem"
relay_tls_port="$started_port" relay_tls_pid="$started_pid"
say "nats-server $nats_port, with TLS $nats_tls_port; pixie-server relay $relay_port, with TLS $relay_tls_port"

echo "## Throughput (relay-bench)"
for window in ${WINDOWS:-64 1}; do
    echo
    echo "window $window:"
    echo
    "$bin/relay-bench" --relay-port "$relay_port" --nats-port "$nats_port" --tls-relay-port "$relay_tls_port" \
        --tls-nats-port "$nats_tls_port" --tls-ca-file "$work/cert.pem" --count "${COUNT:-20000}" \
        --size "${SIZE:-1024}" --window "$window"
done

# hold NAME PROTOCOL PORT PID [--tls-ca-file FILE]: holds CONNECTIONS idle connections, prints a table row.
hold() {
    local name="$1" protocol="$2" port="$3" server="$4"
    shift 4
    local before after ready connected failed
    sleep 1
    before="$(status_field "$server" VmRSS)"
    "$bin/connection-bench" hold --protocol "$protocol" --port "$port" --connections "$connections" "$@" \
        >"$work/hold.out" 2>"$work/hold.err" &
    local client=$!
    pids+=("$client")
    for _ in $(seq 3000); do
        grep -q '^ready ' "$work/hold.out" && break
        kill -0 "$client" 2>/dev/null || { cat "$work/hold.out" "$work/hold.err" >&2; say "$name: connection-bench ended"; exit 1; }
        sleep 0.2
    done
    sleep 2
    after="$(status_field "$server" VmRSS)"
    ready="$(grep '^ready ' "$work/hold.out")"
    grep "^failure " "$work/hold.out" | sed "s|^|bench-tls: $name: |" >&2 || true
    connected="$(sed -n 's/.*connected=\([0-9]*\).*/\1/p' <<<"$ready")"
    failed="$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' <<<"$ready")"
    kill -TERM "$client" 2>/dev/null || true
    wait "$client" 2>/dev/null || true
    printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$connected" "$failed" "$(mib "$before")" "$(mib "$after")" \
        "$(awk -v a="$after" -v b="$before" -v n="$connected" 'BEGIN { printf "%.0f", n ? (a - b) * 1024 / n : 0 }')"
}

echo
echo "## Idle connections (connection-bench hold, $connections each, all subscribed)"
echo
echo "| server | connections | failed | RSS before | RSS with N | bytes per connection |"
echo "|---|---:|---:|---:|---:|---:|"
hold "relay, plain WebSocket" ws "$relay_port" "$relay_pid"
hold "relay, TLS (wss://)" ws "$relay_tls_port" "$relay_tls_pid" --tls-ca-file "$work/cert.pem"
hold "nats-server, plain" nats "$nats_port" "$nats_pid"
hold "nats-server, TLS" nats "$nats_tls_port" "$nats_tls_pid" --tls-ca-file "$work/cert.pem"

echo
echo "## Sign-in (signin-bench, checkpoint interval 50 ms)"
for scheme in http https; do
    data="$work/signin-$scheme"
    "$bin/pixie-server" trust-bundle --data-dir "$data" >"$work/bundle-$scheme.json"
    tls_args=()
    [ "$scheme" = https ] && tls_args=(--tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
    export PIXIE_CHECKPOINT_INTERVAL_MS=50 PIXIE_CLIENT_REQUESTS_PER_MINUTE=1000000
    start_pixie "signin-$scheme" "$scheme" --data-dir "$data" ${tls_args[@]+"${tls_args[@]}"}
    unset PIXIE_CHECKPOINT_INTERVAL_MS PIXIE_CLIENT_REQUESTS_PER_MINUTE
    host=127.0.0.1 ca_args=()
    [ "$scheme" = https ] && host=localhost ca_args=(--ca-file "$work/cert.pem")
    echo
    echo "$scheme://:"
    echo
    "$bin/signin-bench" --server "$scheme://$host:$started_port" --trust-bundle "$work/bundle-$scheme.json" \
        --sms-outbox "$data/sms-outbox.jsonl" --count "${COUNT_SIGNIN:-10}" --parallel 4 \
        --rate-count "${RATE_COUNT:-24}" --prefix "+1628$([ "$scheme" = https ] && echo 556 || echo 555)" \
        ${ca_args[@]+"${ca_args[@]}"}
    kill "$started_pid"; wait "$started_pid" 2>/dev/null || true
done
