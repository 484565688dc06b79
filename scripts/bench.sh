#!/usr/bin/env bash
# The benchmarks recorded in docs/benchmarks.md, each beside its anchor in the same run.
# Usage: scripts/bench.sh [bench arguments]   (default: --seconds 1 --rounds 3)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/setup.sh

swift build -c release --product bench
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(openssl version)"
if [ "$#" -eq 0 ]; then set -- --seconds 1 --rounds 3; fi
exec .build/release/bench "$@"
