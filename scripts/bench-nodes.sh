#!/usr/bin/env bash
# pixie-server on SQLite and PostgreSQL, on one node and two, in one run (docs/benchmarks.md, "Past one machine").
#
# Builds pixie-server in release, starts a PostgreSQL of its own with PostgreSQL's durable defaults
# (scripts/engines.sh with SIBLINGS_ENGINES_DURABLE=1: fsync and synchronous_commit on), and runs
# scripts/bench_nodes.py: GET /healthz, POST /v1/discovery/own and POST /v1/phone/verifications/check under wrk,
# against SQLite on one node, PostgreSQL on one node, and PostgreSQL on two nodes, with the core time per request
# each process took. Prints a Markdown table.
#
# Environment: SECONDS_PER_RUN (default 10), CONNECTIONS (default 16), VERIFICATIONS (default 40000 per run).
# Needs wrk, PostgreSQL and the venv (./scripts/setup.sh installs them). About 4 minutes after the build.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${SIBLINGS_PYTHON:-$root/.venv/bin/python}"
say() { printf 'bench-nodes: %s\n' "$*" >&2; }
command -v wrk >/dev/null 2>&1 || { say "wrk is not installed: run ./scripts/setup.sh"; exit 1; }
[ -x "$python" ] || { say "no venv Python at $python: run ./scripts/setup.sh"; exit 1; }

say "building pixie-server (release)"
swift build -c release --product pixie-server >&2
binary="$(swift build -c release --show-bin-path)/pixie-server"

# shellcheck source=scripts/engines.sh
source "$root/scripts/engines.sh"
trap 'engines_stop' EXIT
SIBLINGS_ENGINES_DURABLE=1 engines_start
"$python" "$root/scripts/bench_nodes.py" "$binary" "$SIBLINGS_POSTGRES_URL"
