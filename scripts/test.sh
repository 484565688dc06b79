#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh) and runs every check and test the project has:
#   1. swift format lint --strict
#   2. our own pinned vectors match the script that computes them (Tests/Reference/pinned_vectors.py --check)
#   3. a release build with -warnings-as-errors (crypto-heavy tests run in release mode)
#   4. a fuzz smoke run: every fuzz target over its committed corpus, then 4 s of new inputs (scripts/fuzz.sh --smoke)
#   5. swift test, in release mode, with -warnings-as-errors, beside a PostgreSQL server on loopback that
#      and a nats-server, which scripts/engines.sh starts first and stops on exit; the service suite runs a
#      second time with every service's store on PostgreSQL and the relay's bus on NATS
# Exits non-zero on the first failure. `.ci/run` runs exactly this.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/setup.sh

echo "== swift format lint --strict"
swift format lint --strict --recursive Package.swift Sources Tests

echo "== pinned vectors (Tests/Reference/pinned_vectors.py --check)"
"$SIBLINGS_PYTHON" Tests/Reference/pinned_vectors.py --check

echo "== swift build (release, -warnings-as-errors)"
swift build -c release -Xswiftc -warnings-as-errors --build-tests

echo "== fuzz smoke: every target's corpus, then 4 s of new inputs each (scripts/fuzz.sh --smoke)"
./scripts/fuzz.sh --smoke 4

# The engines the storage, service and relay tests run on beside SQLite and the in-process bus, stopped however
# this script ends.
source scripts/engines.sh
trap engines_stop EXIT
engines_start

# Last, so the test runner's summary is the run's closing line.
# Two passes (three with the services on PostgreSQL). Swift Testing runs a target's tests in parallel on the cooperative pool, which has one thread
# per core (two here); tests that block a thread for long (pure-Python reference oracles, child processes,
# scrypt) can hold every thread at once, and a test that counts on its timers firing (a device against a
# real server, a WebSocket timeout) then waits minutes for nothing. So those run on their own, afterwards.
timed='^(PixieDeviceTests|HTTPServerTests)\.'
echo "== swift test (release): everything but the end-to-end and timer-bound suites"
swift test -c release -Xswiftc -warnings-as-errors --skip-build --skip "$timed"
echo "== swift test (release): the service suite again, every service's store on PostgreSQL, the relay's bus on NATS"
SIBLINGS_SERVICE_DATABASE=postgres SIBLINGS_RELAY_BUS=nats swift test -c release -Xswiftc -warnings-as-errors --skip-build \
    --filter '^PixieServerTests\.'
echo "== swift test (release): the end-to-end and timer-bound suites ($timed)"
swift test -c release -Xswiftc -warnings-as-errors --skip-build --filter "$timed"
