#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh), builds in release mode and runs the main job.
#
# Until pixie-server lands, the main job is the crypto core's self-check and its benchmark beside
# `openssl speed` (scripts/bench.sh); arguments are passed to `bench` (try --help).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/setup.sh

swift build -c release --product bench
exec .build/release/bench "$@"
