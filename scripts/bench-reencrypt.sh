#!/usr/bin/env bash
# Sempere's Re-encrypt Everything and `sempere ls` after many device changes, with the built `sempere`, each
# beside its anchor in the same run (docs/benchmarks.md, "Re-encrypt Everything"):
#
#   ours    `sempere reencrypt --with-current-kit` on home: NOTES notes of NOTE_KIB KiB (default 10,000 of
#           100 KiB, 1 GiB) decrypted and encrypted again under a new key, hashed, written in batches of 256
#           made durable with one sync(2) each, journaled, then the list and vault.json committed.
#   loop    the passage-style loop over the same note files: `age -d -i epoch.key note | age -r <new> > copy`
#           per file, stock age (Debian's 1.1.1). It neither checks signatures nor syncs anything.
#   ls      `sempere ls` warm (a second run) at NOTES notes with no device removed (before and after the
#           re-encryption; the second is the anchor), and again after 10 devices were joined and removed (10
#           more epochs and records).
#
# The notes go in with `sempere import` (about a minute for 10,000). Needs ~4 x NOTES x NOTE_KIB of free disk
# under BENCH_DIR (/tmp). Everything sits in the page cache (this machine has 24 GiB).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
notes="${NOTES:-10000}"
kib="${NOTE_KIB:-100}"
say() { printf 'bench-reencrypt: %s\n' "$*" >&2; }
now() { date +%s.%N; }
for tool in age age-keygen python3 bc; do
    command -v "$tool" >/dev/null || { say "$tool is missing: run scripts/setup.sh"; exit 1; }
done

say "building sempere (release)"
swift build -c release --product sempere >&2
sempere="$(swift build -c release --show-bin-path)/sempere"

work="$(mktemp -d -p "${BENCH_DIR:-/tmp}" bench-reencrypt.XXXXXX)"
trap 'rm -rf "$work"' EXIT
vault="$work/vault"
run() { SEMPERE_CONFIG="$work/config-$1" "$sempere" "${@:2}"; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

kit="$(run home create "$vault" --name Home --json | json "['recovery_kit']")"
say "writing $notes notes of $kib KiB"
mkdir "$work/plain"
python3 - "$work/plain" "$notes" "$kib" <<'EOF'
import base64, os, sys
folder, count, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(count):
    body = base64.b64encode(os.urandom(kib * 768)).decode()
    lines = "\n".join(body[j:j + 76] for j in range(0, len(body), 76))
    with open(os.path.join(folder, f"note-{i:05d}.md"), "w") as f:
        f.write(f"# Note {i}\n\n{lines}\n")
EOF
(cd "$work/plain" && ls | xargs -n 1000 bash -c 'SEMPERE_CONFIG="$0" "$1" import "${@:2}" >/dev/null' \
    "$work/config-home" "$sempere")
rm -rf "$work/plain"
bytes="$(du -sb "$vault/notes" | cut -f1)"

run home ls >/dev/null
start=$(now); run home ls >/dev/null; ls_none=$(echo "$(now) - $start" | bc)
say "ls warm, no removal: $ls_none s"

# The loop's inputs: the epoch's identity (one age -d of home's wrap, as docs/read-without-sempere.md) and a
# fresh recipient to encrypt to.
python3 - "$vault/vault.json" "$work" <<'EOF'
import json, sys
vault = json.load(open(sys.argv[1])); body = json.loads(vault["body"])
home = body["home"]; wrap = body["epochs"][-1]["wraps"][home]
open(sys.argv[2] + "/wrap.age", "w").write(wrap)
EOF
age -d -i "$work/config-home/keys/device-age-identity.key" -o "$work/epoch.key" "$work/wrap.age" 2>/dev/null \
    || { say "cannot open home's wrap with its identity file"; exit 1; }
age-keygen -o "$work/new.key" 2>/dev/null
recipient="$(age-keygen -y "$work/new.key")"
mkdir "$work/loop"
sync
say "the age loop over $notes files"
start=$(now)
for file in "$vault"/notes/*/*.age; do
    age -d -i "$work/epoch.key" "$file" | age -r "$recipient" > "$work/loop/${file##*/}"
done
loop=$(echo "$(now) - $start" | bc)
say "loop: $loop s"
rm -rf "$work/loop"

sync
start=$(now)
SEMPERE_KIT="$kit" run home reencrypt --with-current-kit --secret-env SEMPERE_KIT --json > "$work/reencrypt.json" 2>/dev/null
ours=$(echo "$(now) - $start" | bc)
count="$(json "['reencrypted']" < "$work/reencrypt.json")"
say "reencrypt: $ours s for $count notes"
run home ls >/dev/null
start=$(now); run home ls >/dev/null; ls_after=$(echo "$(now) - $start" | bc)

# 10 devices joined and removed, then ls warm again.
for i in $(seq 1 10); do
    words="$(run "d$i" join "$vault" --name "Device $i" --json | json "['words']")"
    back="$(run home devices approve --words "$words" --json | json "['words']")"
    run "d$i" join "$vault" --words "$back" >/dev/null
    run home devices remove "Device $i" >/dev/null
done
run home ls >/dev/null
start=$(now); run home ls >/dev/null; ls_ten=$(echo "$(now) - $start" | bc)
epochs="$(python3 -c "import json; print(len(json.loads(json.load(open('$vault/vault.json'))['body'])['epochs']))")"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf 'notes: %s of %s KiB, %s bytes of note files\n' "$notes" "$kib" "$bytes"
printf 'reencrypt (ours): %.2f s  (%.0f MB/s)\n' "$ours" "$(echo "$bytes / $ours / 1000000" | bc -l)"
printf 'age loop (anchor): %.2f s  (%.0f MB/s)\n' "$loop" "$(echo "$bytes / $loop / 1000000" | bc -l)"
printf 'loop / ours: %.1fx\n' "$(echo "$loop / $ours" | bc -l)"
printf 'ls warm, no removal (before the re-encryption): %.3f s\n' "$ls_none"
printf 'ls warm, no removal (after it: the anchor): %.3f s\n' "$ls_after"
printf 'ls warm, after 10 removals (%s epochs): %.3f s  (%.2fx the anchor)\n' "$epochs" "$ls_ten" \
    "$(echo "$ls_ten / $ls_after" | bc -l)"
