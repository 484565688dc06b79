#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh) and runs every check and test the project has:
#   1. swift format lint --strict
#   2. our own pinned vectors match the script that computes them (Tests/Reference/pinned_vectors.py --check), and
#      the device's modules link no server module (scripts/module-edges.py)
#   3. a release build with -warnings-as-errors (crypto-heavy tests run in release mode)
#   4. a fuzz smoke run: every fuzz target over its committed corpus, then 4 s of new inputs (scripts/fuzz.sh --smoke)
#   5. swift test, in release mode, with -warnings-as-errors, beside a PostgreSQL server on loopback that
#      and a nats-server, which scripts/engines.sh starts first and stops on exit; the service suite runs a
#      second time with every service's store on PostgreSQL and the relay's bus on NATS
#   Each swift test pass has a time limit (SIBLINGS_TEST_PASS_LIMIT seconds, 900 by default, several times what
#   it takes): a pass that hangs is stopped and fails with the tests that started and never ended, and every
#   thread's stack (gdb), instead of running into CI's own limit with nothing said.
# Exits non-zero on the first failure. `.ci/run` runs exactly this.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/setup.sh

echo "== swift format lint --strict"
swift format lint --strict --recursive Package.swift Sources Tests

echo "== pinned vectors (Tests/Reference/pinned_vectors.py --check)"
"$SIBLINGS_PYTHON" Tests/Reference/pinned_vectors.py --check

echo "== module edges: a device links no server code (scripts/module-edges.py)"
"$SIBLINGS_PYTHON" scripts/module-edges.py --self-test

echo "== swift build (release, -warnings-as-errors)"
swift build -c release -Xswiftc -warnings-as-errors --build-tests

echo "== fuzz smoke: every target's corpus, then 4 s of new inputs each (scripts/fuzz.sh --smoke)"
./scripts/fuzz.sh --smoke 4

# `swift test` on the build above with the arguments given, stopped if it runs past the pass limit. Then it
# fails, saying which tests started and never ended and where every thread of the test process was.
pass_limit="${SIBLINGS_TEST_PASS_LIMIT:-900}"
# The pass under way: swift test in a session of its own, so it and everything its tests started stop together.
pass_group=""
swift_test() {
    local log
    log="$(mktemp /tmp/siblings-test.XXXXXX)"
    # setsid does not fork here (a background job leads no group), so $! is the new group's ID; --wait keeps
    # swift test's exit status if it ever had to.
    setsid --wait swift test -c release -Xswiftc -warnings-as-errors --skip-build "$@" >"$log" 2>&1 &
    pass_group=$!
    tail -n +1 -f --pid="$pass_group" "$log" &
    local tailer=$!
    local waited=0
    while kill -0 "$pass_group" 2>/dev/null && [ "$waited" -lt "$pass_limit" ]; do
        sleep 1
        waited=$((waited + 1))
    done
    if kill -0 "$pass_group" 2>/dev/null; then
        hang_report "$log"
    fi
    local rc=0
    wait "$pass_group" || rc=$?
    pass_group=""
    wait "$tailer" || true
    rm -f "$log"
    return "$rc"
}

# Stops the pass under way, if any, with everything it started (on exit, and after a hang's report): every
# process of its session, since SwiftPM puts the test process in a group of its own. (A daemon that left the
# session, a PostgreSQL server a test started, is stopped by scripts/engines.sh's own cleanup or outlives it.)
stop_pass() {
    [ -n "$pass_group" ] || return 0
    pkill -TERM -s "$pass_group" 2>/dev/null || true
    local waited=0
    while kill -0 "$pass_group" 2>/dev/null && [ "$waited" -lt 50 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    pkill -KILL -s "$pass_group" 2>/dev/null || true
}

# What a pass that outlived the limit was doing: the tests that started and never ended, and the stack of every
# thread of its test process (swift test's child); then the pass is stopped.
hang_report() {
    local log=$1 runner
    sleep 1 # the tailer prints the last lines first
    {
        echo
        echo "== swift test ran past its limit of $pass_limit s (SIBLINGS_TEST_PASS_LIMIT) and is stopped."
        echo "== the tests that started and never ended:"
        # Swift Testing prints `◇ Test NAME started.`, then `✔ Test NAME passed after ...`, `✘ ... failed after`,
        # `━ ...` (passed with known issues) or `➜ ... skipped` / `was cancelled`; a parameterized test ends
        # `with N test cases passed after`. Byte patterns (alternations, not brackets) hold in any locale; names
        # are not made unique, so a twin that ended does not hide one that did not.
        comm -23 \
            <(sed -n -e '/^◇ Test case /d' -e '/^◇ Test run started\.$/d' -e 's/^◇ Test \(.*\) started\.$/\1/p' "$log" |
                LC_ALL=C sort) \
            <(sed -n -e 's/^\(✔\|✘\|━\) Test \(.*\) \(passed\|failed\) after .*/\2/p' \
                -e 's/^➜ Test \(.*\) \(skipped\|was cancelled\).*/\1/p' "$log" |
                sed 's/ with [0-9]* test cases\{0,1\}$//' | LC_ALL=C sort) | sed 's/^/   /'
        runner="$(pgrep -P "$pass_group" | head -1 || true)"
        if [ -n "$runner" ] && command -v gdb >/dev/null 2>&1; then
            echo "== every thread of the test process ($runner):"
            timeout 120 gdb -p "$runner" -batch -ex 'thread apply all bt 30' 2>&1 |
                grep -v -e '^\[New LWP' -e '^\[Thread debugging' -e '^Using host libthread_db' |
                swift demangle --simplified || true
        fi
    } >&2
    stop_pass
}

# The engines the storage, service and relay tests run on beside SQLite and the in-process bus, stopped however
# this script ends.
source scripts/engines.sh
trap 'stop_pass; engines_stop' EXIT
engines_start

# Last, so the test runner's summary is the run's closing line.
# Two passes (three with the services on PostgreSQL). Swift Testing runs a target's tests in parallel on the cooperative pool, which has one thread
# per core (two here); tests that block a thread for long (pure-Python reference oracles, child processes,
# scrypt) can hold every thread at once, and a test that counts on its timers firing (a device against a
# real server, a WebSocket timeout) then waits minutes for nothing. So those run on their own, afterwards.
timed='^(PixieDeviceTests|HTTPServerTests)\.'
echo "== swift test (release): everything but the end-to-end and timer-bound suites"
swift_test --skip "$timed"
echo "== swift test (release): the service suite again, every service's store on PostgreSQL, the relay's bus on NATS"
SIBLINGS_SERVICE_DATABASE=postgres SIBLINGS_RELAY_BUS=nats swift_test --filter '^PixieServerTests\.'
echo "== swift test (release): the end-to-end and timer-bound suites ($timed)"
swift_test --filter "$timed"
