#!/usr/bin/env bash
# Fuzzes the age parsers (header, armor, payload, key files) with libFuzzer and AddressSanitizer.
#
#   scripts/fuzz-age.sh --smoke        30 seconds (part of scripts/test.sh)
#   scripts/fuzz-age.sh --runs N       N executions on both cores (the recorded run: --runs 10000000)
#   scripts/fuzz-age.sh --time S       S seconds on both cores
#   scripts/fuzz-age.sh --replay FILE  run one input (a finding) through the target and show the trap
#
# The target is Tests/AgeFuzzer, built into .build/fuzz with -sanitize=fuzzer,address. Its seed corpus
# is the C2SP CCTV age vectors (their age files, decompressed), made from ../shared/vectors at run time
# and never committed; the growing corpus stays in .build/fuzz/corpus. A finding (a crash, or an error
# that is not an AgeError) is written to .build/fuzz/findings/ and fails the script.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

mode="${1:---smoke}"
fuzz="$root/.build/fuzz"
vectors="${SIBLINGS_VECTORS:-../shared/vectors}"
case "$vectors" in /*) ;; *) vectors="$root/$vectors" ;; esac
if [ ! -d "$vectors/age" ]; then
    echo "fuzz-age: the age vectors are missing at $vectors/age (they seed the corpus); set SIBLINGS_VECTORS" >&2
    exit 1
fi

echo "== building the age fuzz target (libFuzzer + AddressSanitizer)"
swift build -c release --scratch-path "$fuzz" --product AgeFuzzer \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -use-ld=lld
target="$fuzz/release/AgeFuzzer"

seeds="$fuzz/seeds"
rm -rf "$seeds"
mkdir -p "$seeds" "$fuzz/corpus" "$fuzz/findings"
python3 - "$vectors/age" "$seeds" <<'PY'
import os, sys, zlib
source, out = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(source)):
    if name != name.lower() or "." in name:
        continue  # README.md, LICENSE
    data = open(os.path.join(source, name), "rb").read()
    header, _, body = data.partition(b"\n\n")
    if b"compressed: zlib" in header:
        body = zlib.decompress(body)
    open(os.path.join(out, name), "wb").write(body)
PY

# Swift's lazily initialised globals look like leaks to LeakSanitizer at exit; memory errors are what
# AddressSanitizer is here for.
export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
common=(-max_len=300000 -timeout=30 -rss_limit_mb=4096 -artifact_prefix="$fuzz/findings/" -print_final_stats=1)

case "$mode" in
--smoke)
    "$target" "${common[@]}" -max_total_time=30 "$fuzz/corpus" "$seeds"
    ;;
--runs)
    runs="${2:?--runs needs a number}"
    # Two workers, each with half of the executions.
    "$target" "${common[@]}" -runs=$((runs / 2)) -jobs=2 -workers=2 "$fuzz/corpus" "$seeds"
    cat fuzz-*.log 2>/dev/null | grep -E 'Done [0-9]+ runs|stat::number_of_executed_units' || true
    rm -f fuzz-*.log
    ;;
--time)
    seconds="${2:?--time needs a number of seconds}"
    "$target" "${common[@]}" -max_total_time="$seconds" -jobs=2 -workers=2 "$fuzz/corpus" "$seeds"
    cat fuzz-*.log 2>/dev/null | grep -E 'Done [0-9]+ runs|stat::number_of_executed_units' || true
    rm -f fuzz-*.log
    ;;
--replay)
    "$target" "${common[@]}" "${2:?--replay needs a file}"
    ;;
*)
    echo "usage: scripts/fuzz-age.sh [--smoke | --runs N | --time SECONDS | --replay FILE]" >&2
    exit 64
    ;;
esac
