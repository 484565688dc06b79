#!/usr/bin/env bash
# pixie-server under load with wrk (docs/benchmarks.md, "pixie-server under wrk").
#
# Builds pixie-server in release, starts it on a fresh data directory with rate limits out of the way,
# prepares an account and VERIFICATIONS pending phone verifications (scripts/pixie_bench_prepare.py), then
# runs wrk for SECONDS each, 2 threads, CONNECTIONS connections, against:
#   GET  /healthz                         the anchor: the platform's ceiling on this machine
#   POST /v1/discovery/own                a PhoneOwnershipCert check (Ed25519 + ML-DSA-65 verify) and a read
#   POST /v1/phone/verifications/check    a transaction and, on success, a hybrid signature (a new cert)
# and prints requests/s, p50 and p99 for each and its ratio to /healthz, as a Markdown table.
#
# Environment: SECONDS_PER_RUN (default 12), CONNECTIONS (default 16), VERIFICATIONS (default 30000).
# Needs wrk and the venv (./scripts/setup.sh installs both). Takes about 1.5 minutes after the build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${SECONDS_PER_RUN:-12}"
connections="${CONNECTIONS:-16}"
verifications="${VERIFICATIONS:-30000}"
threads=2
python="${SIBLINGS_PYTHON:-$root/.venv/bin/python}"

say() { printf 'bench-server: %s\n' "$*" >&2; }
command -v wrk >/dev/null 2>&1 || { say "wrk is not installed: run ./scripts/setup.sh"; exit 1; }
[ -x "$python" ] || { say "no venv Python at $python: run ./scripts/setup.sh"; exit 1; }

say "building pixie-server (release)"
swift build -c release --product pixie-server >&2
binary="$(swift build -c release --show-bin-path)/pixie-server"

work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

"$binary" --data-dir "$work/data" --port 0 --codes-per-number-per-hour 100000000 \
    --client-requests-per-minute 100000000 2>"$work/server.log" &
server_pid=$!
url=""
for _ in $(seq 100); do
    url="$(sed -n 's/.*"address":"\(http:[^"]*\)".*"msg":"listening".*/\1/p' "$work/server.log" | head -1)"
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; say "pixie-server did not start"; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { say "pixie-server did not report its address"; exit 1; }
say "pixie-server at $url; preparing an account and $verifications pending verifications"
started=$(date +%s)
"$python" scripts/pixie_bench_prepare.py "$url" "$work/data" "$work" "$verifications" >/dev/null
say "prepared in $(($(date +%s) - started)) s"

export PIXIE_BENCH_DIR="$work" PIXIE_BENCH_THREADS="$threads"
run() { # name, path, script
    say "wrk: $1 ($seconds s, $threads threads, $connections connections)"
    wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency -s "$root/scripts/wrk/$3" "$url$2" >"$work/$1.txt"
    cat "$work/$1.txt" >&2
}
run healthz /healthz healthz.lua
run discovery /v1/discovery/own discovery.lua
run otp-check /v1/phone/verifications/check otp-check.lua

# wrk prints latencies as 1.23ms / 456.78us / 1.02s; the table uses milliseconds.
field() { # file, what: rps | p50 | p99 | statuses
    case "$2" in
        rps) awk '/^Requests\/sec:/ {print $2}' "$1" ;;
        p50) awk '$1 == "50%" {print $2}' "$1" ;;
        p99) awk '$1 == "99%" {print $2}' "$1" ;;
        statuses) sed -n 's/^statuses: //p' "$1" ;;
    esac
}
ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.2f", v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.2f", v }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.2f", v * 1000 }
        else printf "?" }'
}
anchor="$(field "$work/healthz.txt" rps)"
echo
echo "| endpoint | requests/s | p50 (ms) | p99 (ms) | requests/s ÷ /healthz | answers |"
echo "|---|---:|---:|---:|---:|---|"
for entry in "healthz|GET /healthz" "discovery|POST /v1/discovery/own" \
    "otp-check|POST /v1/phone/verifications/check"; do
    name="${entry%%|*}"
    label="${entry#*|}"
    rps="$(field "$work/$name.txt" rps)"
    ratio="$(awk -v a="$rps" -v b="$anchor" 'BEGIN {printf "%.3f", a / b}')"
    printf '| %s | %.0f | %s | %s | %s | %s |\n' "$label" "$rps" "$(ms "$(field "$work/$name.txt" p50)")" \
        "$(ms "$(field "$work/$name.txt" p99)")" "$ratio" "$(field "$work/$name.txt" statuses)"
done
