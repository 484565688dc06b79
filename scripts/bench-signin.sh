#!/usr/bin/env bash
# A sign-in's machine path, and sign-ins per second beside discovery/own per second (docs/benchmarks.md,
# "Sign-in, as devices make it").
#
# Starts pixie-server on a free loopback port with a fresh data directory, once per checkpoint interval in
# INTERVALS (milliseconds; default "1000 50": the default, and a short one), since every binding a sign-in writes
# waits for the next checkpoint. The per-address request limit is raised (every device here is 127.0.0.1), and
# nothing else. Then runs signin-bench against it: COUNT sign-ins one at a time (default 10), then RATE_COUNT
# (default 24) with PARALLEL (default 4) at once, and the discovery lookup's rate. Each sign-in is one account of
# its own (a number gets 5 SMS codes an hour). About a minute after the build.
#
# With REVOCATION="3,10,50" it measures revoking a device instead (docs/benchmarks.md, "Revoking a device"): one
# account per size with that many siblings plus the remover and the removed device, all signed in through the
# account's one number, so that number's code and approval-token limits are raised for the run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
config="${CONFIG:-release}"
say() { printf 'bench-signin: %s\n' "$*" >&2; }

say "building pixie-server and signin-bench ($config)"
swift build -c "$config" --product pixie-server >&2
swift build -c "$config" --product signin-bench >&2
bin="$(swift build -c "$config" --show-bin-path)"

work="$(mktemp -d)"
pid=""
cleanup() {
    [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$work"
}
trap cleanup EXIT

limits=()
if [ -n "${REVOCATION:-}" ]; then
    limits=(PIXIE_CODES_PER_NUMBER_PER_HOUR=1000 PIXIE_APPROVAL_TOKENS_PER_HOUR=100000
        PIXIE_ACCOUNT_TOKENS_PER_HOUR=100000)
fi
for interval in ${INTERVALS:-1000 50}; do
    data="$work/data-$interval"
    "$bin/pixie-server" trust-bundle --data-dir "$data" >"$work/bundle-$interval.json"
    PIXIE_CHECKPOINT_INTERVAL_MS="$interval" PIXIE_CLIENT_REQUESTS_PER_MINUTE=1000000 \
        env "${limits[@]}" "$bin/pixie-server" --data-dir "$data" --port 0 >/dev/null 2>"$work/server-$interval.log" &
    pid=$!
    port=""
    for _ in $(seq 100); do
        port="$(sed -n 's/.*"address":"http:\/\/127.0.0.1:\([0-9]*\)".*"msg":"listening".*/\1/p' "$work/server-$interval.log" | head -1)"
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { cat "$work/server-$interval.log" >&2; say "pixie-server did not report its address"; exit 1; }
    echo
    echo "checkpoint interval $interval ms:"
    echo
    "$bin/signin-bench" --server "http://127.0.0.1:$port" --trust-bundle "$work/bundle-$interval.json" \
        --sms-outbox "$data/sms-outbox.jsonl" --count "${COUNT:-10}" --parallel "${PARALLEL:-4}" \
        --rate-count "${RATE_COUNT:-24}" ${REVOCATION:+--revocation "$REVOCATION"}
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
done
