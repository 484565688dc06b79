#!/usr/bin/env bash
# Fuzzes the parsers of untrusted bytes with libFuzzer and AddressSanitizer (docs/fuzzing.md).
#
#   scripts/fuzz.sh --list                  the targets
#   scripts/fuzz.sh --smoke [SECONDS]       every target: its committed corpus, then SECONDS of new inputs
#                                           (default 4; part of scripts/test.sh)
#   scripts/fuzz.sh TARGET --runs N         N executions on both cores, continuing from the corpus
#   scripts/fuzz.sh TARGET --time S         S seconds on both cores, continuing from the corpus
#   scripts/fuzz.sh TARGET --merge          the committed corpus minimized again with what runs found (-merge=1)
#   scripts/fuzz.sh TARGET --replay FILE    one input (a finding) through the target
#   scripts/fuzz.sh --report                the campaign so far, per target, as a Markdown table
#
# One binary, Tests/Fuzzer, built into .build/fuzz with -sanitize=fuzzer,address; a target is chosen by name.
# Each target reads its seeds (valid inputs from the modules' own encoders, `Fuzzer --seeds`), its committed
# corpus Tests/Fuzzer/Corpus/TARGET, and its working corpus .build/fuzz/corpus/TARGET, where new inputs go. The
# age target also reads the C2SP CCTV vectors from $SIBLINGS_VECTORS (decompressed at run time, never committed).
# --runs and --time append a line to Tests/Fuzzer/campaign.tsv (date, target, executions, coverage, features,
# corpus size, findings), then merge into the committed corpus, so the next campaign continues from there.
# A finding (a crash, a sanitizer report, or an error that is not the module's own) is written to
# .build/fuzz/findings/ and fails the script. Set FUZZ_NICE=19 to run beside other work.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
fuzz="$root/.build/fuzz"
committed="$root/Tests/Fuzzer/Corpus"
campaign="$root/Tests/Fuzzer/campaign.tsv"
nice_level="${FUZZ_NICE:-0}"
say() { printf 'fuzz: %s\n' "$*" >&2; }

build() {
    say "building Tests/Fuzzer (libFuzzer + AddressSanitizer) into .build/fuzz"
    # lld: the gold linker crashes on the fuzzer build.
    swift build -c release --scratch-path "$fuzz" --product Fuzzer \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -use-ld=lld >&2
    binary="$fuzz/release/Fuzzer"
}

# Swift's lazily initialised globals look like leaks to LeakSanitizer at exit; memory errors are what
# AddressSanitizer is here for.
export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
base=(-timeout=30 -rss_limit_mb=4096 -artifact_prefix="$fuzz/findings/" -print_final_stats=1)
common=("${base[@]}")

# The folders a target reads, working corpus first (libFuzzer writes new inputs to the first); sets `folders`
# and adds the target's longest input to `common`.
prepare() {
    local target="$1"
    common=("${base[@]}" -max_len="$("$binary" --list | awk -F'\t' -v t="$target" '$1 == t {print $2}')")
    mkdir -p "$fuzz/corpus/$target" "$fuzz/findings" "$committed/$target"
    rm -rf "$fuzz/seeds/$target"
    "$binary" --seeds "$target" "$fuzz/seeds/$target"
    folders=("$fuzz/corpus/$target" "$committed/$target" "$fuzz/seeds/$target")
    if [ "$target" = age ]; then
        cctv_seeds
        folders+=("$fuzz/seeds/cctv")
    fi
}

cctv_seeds() {
    local vectors="${SIBLINGS_VECTORS:-../shared/vectors}"
    case "$vectors" in /*) ;; *) vectors="$root/$vectors" ;; esac
    if [ ! -d "$vectors/age" ]; then
        say "the age vectors are missing at $vectors/age (they seed the age target); set SIBLINGS_VECTORS"
        exit 1
    fi
    rm -rf "$fuzz/seeds/cctv"
    mkdir -p "$fuzz/seeds/cctv"
    python3 - "$vectors/age" "$fuzz/seeds/cctv" <<'PY'
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
}

# Minimizes the committed corpus of `target` with everything runs found (-merge=1); for age, any file that is a
# CCTV vector itself is left out (the vectors are read in place, never copied).
merge() {
    local target="$1"
    local merged="$fuzz/merged/$target"
    rm -rf "$merged"
    mkdir -p "$merged"
    nice -n "$nice_level" "$binary" "$target" "${common[@]}" -merge=1 "$merged" "$committed/$target" \
        "$fuzz/corpus/$target" "$fuzz/seeds/$target" 2>"$fuzz/merge-$target.log" ||
        { cat "$fuzz/merge-$target.log" >&2; say "merging $target's corpus failed"; exit 1; }
    if [ "$target" = age ]; then
        python3 - "$merged" "$fuzz/seeds/cctv" <<'PY'
import hashlib, os, sys
merged, cctv = sys.argv[1], sys.argv[2]
vectors = {hashlib.sha256(open(os.path.join(cctv, n), "rb").read()).digest() for n in os.listdir(cctv)}
for name in os.listdir(merged):
    path = os.path.join(merged, name)
    if hashlib.sha256(open(path, "rb").read()).digest() in vectors:
        os.remove(path)
PY
    fi
    rm -rf "$committed/$target"
    mv "$merged" "$committed/$target"
    say "$target: committed corpus of $(ls "$committed/$target" | wc -l) inputs, $(du -sk "$committed/$target" | cut -f1) KiB"
}

# Runs libFuzzer on both cores with `limit` (-runs=N or -max_total_time=S), then records and merges.
campaign_run() {
    local target="$1" limit="$2"
    prepare "$target"
    rm -f "$fuzz"/fuzz-*.log
    local before
    before="$(ls "$fuzz/findings" | wc -l)"
    local status=0
    (cd "$fuzz" && nice -n "$nice_level" "$binary" "$target" "${common[@]}" "$limit" -jobs=2 -workers=2 \
        "${folders[@]}") || status=$?
    local executions coverage features
    executions="$(cat "$fuzz"/fuzz-*.log 2>/dev/null | sed -n 's/^stat::number_of_executed_units: *//p' |
        awk '{s += $1} END {print s + 0}')"
    coverage="$(cat "$fuzz"/fuzz-*.log 2>/dev/null | grep -o 'cov: [0-9]*' | awk '{print $2}' | sort -n | tail -1)"
    features="$(cat "$fuzz"/fuzz-*.log 2>/dev/null | grep -o 'ft: [0-9]*' | awk '{print $2}' | sort -n | tail -1)"
    local found=$(($(ls "$fuzz/findings" | wc -l) - before))
    merge "$target"
    [ -f "$campaign" ] || printf 'date\ttarget\texecutions\tcoverage\tfeatures\tcorpus\tfindings\n' >"$campaign"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$target" "$executions" "${coverage:-0}" \
        "${features:-0}" "$(ls "$committed/$target" | wc -l)" "$found" >>"$campaign"
    say "$target: $executions executions, coverage ${coverage:-?}, features ${features:-?}, $found findings"
    if [ "$found" -gt 0 ]; then
        say "findings in .build/fuzz/findings/ (replay one: scripts/fuzz.sh $target --replay FILE)"
        exit 1
    elif [ "$status" -ne 0 ]; then
        say "libFuzzer ended with status $status (interrupted?) and wrote no finding; what it ran is recorded"
        exit 1
    fi
}

case "${1:-}" in
--report)
    python3 - "$campaign" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
totals = {}
for row in rows:
    t = totals.setdefault(row["target"], {"runs": 0, "executions": 0, "findings": 0})
    t["runs"] += 1
    t["executions"] += int(row["executions"])
    t["findings"] += int(row["findings"])
    t.update(coverage=row["coverage"], features=row["features"], corpus=row["corpus"], last=row["date"])
print("| target | runs | executions | coverage (edges) | features | corpus | findings | last run |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for name, t in totals.items():
    print(f"| `{name}` | {t['runs']} | {t['executions']:,} | {t['coverage']} | {t['features']} | {t['corpus']} "
          f"| {t['findings']} | {t['last']} |")
PY
    ;;
--list)
    build
    "$binary" --list
    ;;
--smoke)
    seconds="${2:-4}"
    build
    for target in $("$binary" --list | cut -f1); do
        prepare "$target"
        say "smoke: $target, its corpus then $seconds s of new inputs"
        if ! "$binary" "$target" "${common[@]}" -max_total_time="$seconds" "${folders[@]}" \
            >"$fuzz/smoke-$target.log" 2>&1; then
            tail -40 "$fuzz/smoke-$target.log" >&2
            say "smoke: $target has a finding (in .build/fuzz/findings/)"
            exit 1
        fi
        grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$fuzz/smoke-$target.log" | tail -1 >&2 || true
    done
    ;;
"" | -*)
    echo "usage: scripts/fuzz.sh --list | --smoke [SECONDS] | TARGET (--runs N | --time S | --merge | --replay FILE)" >&2
    exit 64
    ;;
*)
    target="$1"
    build
    "$binary" --list | cut -f1 | grep -qx "$target" ||
        { say "no target $target: $("$binary" --list | cut -f1 | tr '\n' ' ')"; exit 64; }
    case "${2:-}" in
    --runs) campaign_run "$target" "-runs=$(( ${3:?--runs needs a number} / 2 ))" ;;
    --time) campaign_run "$target" "-max_total_time=${3:?--time needs a number of seconds}" ;;
    --merge)
        prepare "$target"
        merge "$target"
        ;;
    --replay) "$binary" "$target" "${common[@]}" "${3:?--replay needs a file}" ;;
    *)
        echo "usage: scripts/fuzz.sh TARGET (--runs N | --time S | --merge | --replay FILE)" >&2
        exit 64
        ;;
    esac
    ;;
esac
