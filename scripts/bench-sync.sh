#!/usr/bin/env bash
# The onboarding sync of a whole store, end to end through a real pixie-server, beside two anchors in the same
# run (docs/benchmarks.md, "Absorbing a store"):
#
#   ours   `pixie sync` on a new device ("laptop") absorbing the store of `pixie listen` ("phone"): export, seal
#          and upload pipelined on the phone; on the laptop, download, hash, open and import overlapped (the
#          import written beside the live store), then the merge, flush and move into place.
#   stock  the same job with stock tools, one step after another: sqlite3 .backup, age -e, curl up, curl down,
#          sha256sum, age -d, sqlite3 .restore.
#   floor  cp + sha256sum of the same bytes (the store file).
#
# SIZE_MIB (default 1024) notes of 1 MiB each are written straight into the phone's store.sqlite (the
# DeviceStore schema's notebook_notes), so the store is that big plus SQLite's pages. Everything sits in the
# page cache (this machine has 24 GiB), so the figures are CPU and memory-copy bound, as the floor is. Also
# reports each device's peak RSS (VmHWM), and where the time goes from the laptop's progress events.
# About two minutes for 1 GiB after the build; needs ~8 × SIZE_MIB of free disk under BENCH_DIR (/tmp).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
size="${SIZE_MIB:-1024}"
say() { printf 'bench-sync: %s\n' "$*" >&2; }
now() { date +%s.%N; }
for tool in sqlite3 age age-keygen curl sha256sum python3 bc /usr/bin/time; do
    command -v "$tool" >/dev/null || { say "$tool is missing: run scripts/setup.sh"; exit 1; }
done

say "building pixie-server and pixie (release)"
swift build -c release --product pixie-server >&2
swift build -c release --product pixie >&2
bin="$(swift build -c release --show-bin-path)"

work="$(mktemp -d -p "${BENCH_DIR:-/tmp}" bench-sync.XXXXXX)"
server=""
listener=""
cleanup() {
    exec 3>&- 2>/dev/null || true
    for pid in $listener $server; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
cd "$work"

"$bin/pixie-server" trust-bundle --data-dir data >bundle.json
PIXIE_BLOB_ALLOW_ANONYMOUS_UPLOADS=true PIXIE_CLIENT_REQUESTS_PER_MINUTE=1000000 \
    "$bin/pixie-server" --data-dir data --port 0 >/dev/null 2>server.log &
server=$!
port=""
for _ in $(seq 100); do
    port="$(sed -n 's/.*"address":"http:\/\/127.0.0.1:\([0-9]*\)".*"msg":"listening".*/\1/p' server.log | head -1)"
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { cat server.log >&2; say "pixie-server did not report its address"; exit 1; }
url="http://127.0.0.1:$port"
device() { echo --home "$1" --server "$url" --trust-bundle bundle.json --phone +14155550100 --name "$1" \
    --sms-outbox data/sms-outbox.jsonl; }

say "creating the phone's account and a $size MiB store"
# shellcheck disable=SC2046
"$bin/pixie" init $(device phone) >/dev/null
"$bin/pixie" store add notebook_notes title=first body=made --home phone >/dev/null  # creates store.sqlite
python3 - phone/store.sqlite "$size" <<'PY'
import base64, os, sqlite3, sys
database = sqlite3.connect(sys.argv[1])
with database:
    for index in range(int(sys.argv[2])):
        body = base64.b64encode(os.urandom(786432)).decode()  # 1 MiB of text
        database.execute(
            "INSERT INTO notebook_notes (id, hlc, deleted, title, body) VALUES (?, 1, 0, ?, ?)",
            (f"bench-{index:05d}", f"note {index}", body))
database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
PY
store_bytes="$(stat -c %s phone/store.sqlite)"

say "signing the laptop in"
mkfifo approvals
"$bin/pixie" listen --home phone --json <approvals >listen.log 2>&1 &
listener=$!
exec 3>approvals
for _ in $(seq 100); do grep -q '"listening"' listen.log && break; sleep 0.1; done
# shellcheck disable=SC2046
"$bin/pixie" signin $(device laptop) --no-sync --json >signin.log 2>&1 &
signin=$!
code=""
for _ in $(seq 300); do
    code="$(sed -n 's/.*"check_code":"\([0-9]*\)".*/\1/p' signin.log | head -1)"
    [ -n "$code" ] && break
    sleep 0.1
done
[ -n "$code" ] || { cat signin.log listen.log >&2; say "the sign-in showed no check code"; exit 1; }
for _ in $(seq 100); do grep -q '"prompt"' listen.log && break; sleep 0.1; done
echo "$code" >&3
wait "$signin" || { cat signin.log listen.log >&2; say "the sign-in failed"; exit 1; }

phone_rss_before="$(awk '/VmHWM/ {print $2}' "/proc/$listener/status")"
say "ours: pixie sync"
start="$(now)"
sync_start="$start"
"$bin/pixie" sync --home laptop --foreground --json 2>&1 | while IFS= read -r line; do printf '%s %s\n' "$(now)" "$line"; done \
    >sync.log
end="$(now)"
grep -q '"absorbed"' sync.log || { cat sync.log listen.log >&2; say "the sync did not absorb the store"; exit 1; }
phone_rss="$(awk '/VmHWM/ {print $2}' "/proc/$listener/status")"
ours="$(echo "$end - $start" | bc)"
first() { awk -v pattern="$1" '$0 ~ pattern {print $1; exit}' sync.log; }
preparing="$(first '"preparing"')"
downloading="$(first '"downloading"')"
importing="$(first '"importing"')"
absorbed="$(first '"absorbed"')"

say "the laptop's peak RSS: the same sync into a fresh home, under /usr/bin/time"
rm -rf laptop2
cp -a laptop laptop2
rm -f laptop2/store.sqlite*
/usr/bin/time -f '%M' -o laptop-rss "$bin/pixie" sync --home laptop2 --foreground --json >sync2.log 2>&1 \
    || { cat sync2.log >&2; say "the second sync failed"; exit 1; }
laptop_rss="$(tail -1 laptop-rss)"
say "ours took $ours s"

say "stock: sqlite3 .backup, age, curl up and down, sha256sum, age -d, sqlite3 .restore"
age-keygen -o key.txt 2>/dev/null
recipient="$(age-keygen -y key.txt)"
mkdir stock
start="$(now)"
sqlite3 phone/store.sqlite ".backup stock/backup.db"
age -r "$recipient" -o stock/backup.age stock/backup.db
# -T streams the file (--data-binary would read it into memory first).
blob="$(curl -sS --fail -X POST -H 'Content-Type: application/x-pixie-sync' -T stock/backup.age "$url/v1/blobs" \
    | sed -n 's/.*"blob_id":"\([^"]*\)".*/\1/p')"
curl -sS --fail -o stock/down.age "$url/v1/blobs/$blob"
sha256sum stock/down.age >/dev/null
age -d -i key.txt -o stock/restored-backup.db stock/down.age
sqlite3 stock/restored.db ".restore stock/restored-backup.db"
end="$(now)"
stock="$(echo "$end - $start" | bc)"

say "floor: cp + sha256sum"
start="$(now)"
cp phone/store.sqlite floor.db
sha256sum floor.db >/dev/null
end="$(now)"
floor="$(echo "$end - $start" | bc)"

mib="$(echo "scale=1; $store_bytes / 1048576" | bc)"
printf '\nstore: %s MiB (%s bytes), %s notes of 1 MiB\n' "$mib" "$store_bytes" "$size"
printf '%-7s %8.2f s\n' ours "$ours" stock "$stock" floor "$floor"
printf 'ours / stock = %.2f, ours / floor = %.2f\n' "$(echo "$ours / $stock" | bc -l)" "$(echo "$ours / $floor" | bc -l)"
printf 'peak RSS: phone (pixie listen) %s MiB (%s MiB before the sync), laptop (pixie sync) %s MiB\n' \
    "$((phone_rss / 1024))" "$((phone_rss_before / 1024))" "$((laptop_rss / 1024))"
printf 'where the time went (the laptop'"'"'s events): to the first SyncPreparing %.2f s; export, seal and upload, to the first download progress %.2f s; download, hash, open and import %.2f s; merge, flush and move into place %.2f s\n' \
    "$(echo "$preparing - $sync_start" | bc)" "$(echo "$downloading - $preparing" | bc)" \
    "$(echo "$importing - $downloading" | bc)" "$(echo "$absorbed - $importing" | bc)"
