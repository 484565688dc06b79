#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh), builds in release mode and runs the main job: pixie-server with
# its embedded defaults (SQLite store, keys and the development SMS outbox under ./pixie-data, HTTP on
# 127.0.0.1:8080). Stop it with Ctrl-C or SIGTERM; it finishes the requests in flight first.
# Arguments go to pixie-server (try --help; `./scripts/run.sh identity --port 9000` runs one service).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/setup.sh

swift build -c release --product pixie-server
exec .build/release/pixie-server "$@"
