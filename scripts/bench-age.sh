#!/usr/bin/env bash
# The Age module beside Debian's age 1.1.1 (docs/benchmarks.md, "age vs age 1.1.1"): encrypt and decrypt
# a 1 GiB random file to /dev/null, timed by hyperfine in the same run, then the peak RSS of each side
# (/usr/bin/time -v). Prints a Markdown table with GB/s and the Swift/age ratios.
# Usage: scripts/bench-age.sh [RUNS]   (default 5 timed runs per command, after one warm-up run)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/setup.sh
runs="${1:-5}"

swift build -c release --product age-swift
swift_age="$root/.build/release/age-swift"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
plain="$tmp/plain"
head -c $((1 << 30)) /dev/urandom >"$plain"
age-keygen -o "$tmp/key" 2>/dev/null
recipient="$(age-keygen -y "$tmp/key")"
age -r "$recipient" -o "$plain.age" "$plain"
# Both sides decrypt the same file; check the Swift side's output once before timing it.
"$swift_age" -d -i "$tmp/key" "$plain.age" | cmp -s - "$plain" || { echo "age-swift decrypted wrongly" >&2; exit 1; }
"$swift_age" -r "$recipient" -o "$tmp/swift.age" "$plain"
age -d -i "$tmp/key" "$tmp/swift.age" | cmp -s - "$plain" || { echo "age cannot decrypt age-swift's file" >&2; exit 1; }
rm -f "$tmp/swift.age"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), $(age --version | sed 's/^/age /')"

hyperfine -N --warmup 1 --runs "$runs" --export-json "$tmp/encrypt.json" \
    -n "age encrypt" "age -r $recipient -o /dev/null $plain" \
    -n "Swift encrypt" "$swift_age -r $recipient -o /dev/null $plain"
hyperfine -N --warmup 1 --runs "$runs" --export-json "$tmp/decrypt.json" \
    -n "age decrypt" "age -d -i $tmp/key -o /dev/null $plain.age" \
    -n "Swift decrypt" "$swift_age -d -i $tmp/key -o /dev/null $plain.age"

rss() { # peak RSS in KiB of the command
    /usr/bin/time -v "$@" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p'
}
rss_age_enc="$(rss age -r "$recipient" -o /dev/null "$plain")"
rss_swift_enc="$(rss "$swift_age" -r "$recipient" -o /dev/null "$plain")"
rss_age_dec="$(rss age -d -i "$tmp/key" -o /dev/null "$plain.age")"
rss_swift_dec="$(rss "$swift_age" -d -i "$tmp/key" -o /dev/null "$plain.age")"

python3 - "$tmp/encrypt.json" "$tmp/decrypt.json" "$rss_age_enc" "$rss_swift_enc" "$rss_age_dec" "$rss_swift_dec" <<'EOF'
import json, statistics, sys

size = 1 << 30
enc, dec = (json.load(open(path))["results"] for path in sys.argv[1:3])
rss = [int(value) / 1024 for value in sys.argv[3:7]]
print()
print("| direction | age 1.1.1 GB/s | Swift GB/s | Swift / age | age peak RSS | Swift peak RSS |")
print("|---|---:|---:|---:|---:|---:|")
for name, (age, swift), (age_rss, swift_rss) in (
    ("encrypt 1 GiB", enc, rss[0:2]),
    ("decrypt 1 GiB", dec, rss[2:4]),
):
    age_time, swift_time = statistics.median(age["times"]), statistics.median(swift["times"])
    print(
        f"| {name} | {size / age_time / 1e9:.2f} | {size / swift_time / 1e9:.2f} | {age_time / swift_time:.2f} "
        f"| {age_rss:.1f} MiB | {swift_rss:.1f} MiB |"
    )
print()
print("GB/s = 2^30 bytes / median wall time of the runs; Swift / age = age's time / Swift's (above 1.0: Swift is faster).")
EOF
