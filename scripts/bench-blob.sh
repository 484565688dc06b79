#!/usr/bin/env bash
# blob-svc through pixie-server on loopback (docs/benchmarks.md, "blob-svc on loopback").
#
# Builds pixie-server (BUILD_CONFIG, default release), starts `pixie-server blob` on a fresh data directory
# with blob_allow_anonymous_uploads (so curl needs no session or rate-limit token), and beside it an anchor:
# Python's http.server (ThreadingHTTPServer) serving the same file for GET and writing POST bodies to disk
# with an fsync, as blob-svc does. Then, RUNS times each, with curl:
#   upload    curl -T FILE -X POST          (streams the file; -T rather than --data-binary @FILE, which
#                                           would load the whole file into curl's memory first)
#   download  curl -o /dev/null
# on a SIZE_MIB file of random bytes, and prints the median GB/s (10^9 bytes/s) of each side and their ratio.
# Last, the peak RSS (VmHWM) of a fresh pixie-server across one BIG_GIB upload and download.
#
# Environment: BUILD_CONFIG (release), SIZE_MIB (1024), RUNS (3), BIG_GIB (4). About 1.5 minutes after the
# build on 2 cores; needs curl, python3 and BIG_GIB × 2 + 2 GiB of free space under $TMPDIR.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
config="${BUILD_CONFIG:-release}"
size_mib="${SIZE_MIB:-1024}"
runs="${RUNS:-3}"
big_gib="${BIG_GIB:-4}"

say() { printf 'bench-blob: %s\n' "$*" >&2; }
command -v curl >/dev/null 2>&1 || { say "curl is not installed"; exit 1; }

say "building pixie-server ($config)"
nice swift build -c "$config" --product pixie-server >&2
binary="$(swift build -c "$config" --show-bin-path)/pixie-server"

work="$(mktemp -d)"
server_pid=""
anchor_pid=""
cleanup() {
    for pid in "$server_pid" "$anchor_pid"; do
        if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    done
    rm -rf "$work"
}
trap cleanup EXIT

start_server() { # starts pixie-server blob (logging at info, as deployed); sets server_pid and server_url
    "$binary" blob --data-dir "$work/data" --port 0 --blob-allow-anonymous-uploads true 2>"$work/server.log" &
    server_pid=$!
    server_url=""
    for _ in $(seq 1 200); do
        server_url="$(sed -n 's/.*"address":"\(http:[^"]*\)".*/\1/p' "$work/server.log" | head -1)"
        [ -n "$server_url" ] && break
        sleep 0.05
    done
    [ -n "$server_url" ] || { say "pixie-server did not start:"; cat "$work/server.log" >&2; exit 1; }
}
stop_server() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""; }

mkdir -p "$work/static" "$work/anchor-uploads"
head -c $((size_mib << 20)) /dev/urandom >"$work/static/blob.bin"
file="$work/static/blob.bin"

cat >"$work/anchor.py" <<'PY'
import http.server, os, sys

class Handler(http.server.SimpleHTTPRequestHandler):
    def do_POST(self):
        left = int(self.headers["Content-Length"])
        path = os.path.join(sys.argv[2], "upload")
        with open(path, "wb") as out:
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 20))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
            out.flush()
            os.fsync(out.fileno())
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

handler = lambda *a, **k: Handler(*a, directory=sys.argv[1], **k)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
print(server.server_address[1], flush=True)
server.serve_forever()
PY
python3 "$work/anchor.py" "$work/static" "$work/anchor-uploads" >"$work/anchor.port" &
anchor_pid=$!
for _ in $(seq 1 100); do [ -s "$work/anchor.port" ] && break; sleep 0.05; done
anchor_url="http://127.0.0.1:$(cat "$work/anchor.port")"

start_server
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), $config build, $(python3 --version), $(curl --version | head -1 | cut -d' ' -f1-2)"

upload() { # URL -> seconds; prints the blob id (if any) to $work/last.json
    curl -sS --fail -o "$work/last.json" -w '%{time_total}' -T "$1" -X POST -H "Expect:" \
        -H "Content-Type: application/x-pixie-sync" "$2"
}
download() { curl -sS --fail -o /dev/null -w '%{time_total}' "$1"; }

: >"$work/times"
for _ in $(seq 1 "$runs"); do
    echo "pixie upload $(upload "$file" "$server_url/v1/blobs")" >>"$work/times"
    blob_id="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["blob_id"])' "$work/last.json")"
    echo "pixie download $(download "$server_url/v1/blobs/$blob_id")" >>"$work/times"
    curl -sS --fail -X DELETE "$server_url/v1/blobs/$blob_id"
    echo "anchor upload $(upload "$file" "$anchor_url/upload")" >>"$work/times"
    echo "anchor download $(download "$anchor_url/blob.bin")" >>"$work/times"
done
rm -f "$work/anchor-uploads/upload"
stop_server
rm -rf "$work/data"

# Peak RSS of a fresh server across one BIG_GIB upload and its download.
big="$work/big.bin"
for _ in $(seq 1 $(((big_gib << 10) / size_mib))); do cat "$file"; done >"$big"
start_server
baseline="$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status")"
big_up="$(upload "$big" "$server_url/v1/blobs")"
blob_id="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["blob_id"])' "$work/last.json")"
big_down="$(download "$server_url/v1/blobs/$blob_id")"
peak="$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status")"
big_size="$(stat -c %s "$big")"

python3 - "$work/times" "$((size_mib << 20))" "$baseline" "$peak" "$big_size" "$big_up" "$big_down" <<'PY'
import statistics, sys

times = {}
for line in open(sys.argv[1]):
    side, op, seconds = line.split()
    times.setdefault((side, op), []).append(float(seconds))
size = int(sys.argv[2])
baseline, peak, big_size = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
big_up, big_down = float(sys.argv[6]), float(sys.argv[7])
print()
print(f"| {size >> 20} MiB over loopback | pixie-server GB/s | anchor GB/s | pixie ÷ anchor |")
print("|---|---:|---:|---:|")
for op in ("upload", "download"):
    pixie = size / statistics.median(times[("pixie", op)]) / 1e9
    anchor = size / statistics.median(times[("anchor", op)]) / 1e9
    print(f"| {op} (median of {len(times[('pixie', op)])}) | {pixie:.2f} | {anchor:.2f} | {pixie / anchor:.2f} |")
print()
print(f"{big_size / 2**30:.0f} GiB: upload {big_size / big_up / 1e9:.2f} GB/s, download {big_size / big_down / 1e9:.2f} GB/s; "
      f"pixie-server peak RSS (VmHWM) {peak / 1024:.1f} MiB (at start {baseline / 1024:.1f} MiB)")
PY
