#!/usr/bin/env bash
# Installs everything the project needs on a Debian 12 machine that has the Swift toolchain:
# the Debian packages (C libraries, valgrind, openssl, python3) and a Python venv in .venv with the
# outside reference implementations the tests compare against (requirements.txt).
#
# Safe to run again: it installs only what is missing. Runs as root, or through sudo.
# Prints `export SIBLINGS_PYTHON=...` hints; scripts/test.sh and scripts/run.sh source this file.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages: one per line, with what needs it.
apt_packages=(
    pkg-config     # SwiftPM finds the C libraries through it
    libssl-dev     # COpenSSL: libcrypto and libssl 3.0 (TLSEngine)
    zlib1g-dev     # CZlib: compressed test vectors
    openssl        # `openssl speed`, the anchor for scripts/bench.sh
    valgrind       # the constant-time check (memcheck) and its client-request header
    python3        # the outside reference implementations
    python3-venv
    python3-pip
    age            # the age CLI (1.1.1) and age-keygen, the outside reference for the Age module
    hyperfine      # times Swift beside age in scripts/bench-age.sh
    wrk            # HTTP load for scripts/bench-server.sh
    time           # /usr/bin/time -v: peak RSS in scripts/bench-age.sh
    libqrencode-dev # CQREncode: the join QR code (Sempere.QRCode)
    zbar-tools     # zbarimg, the outside reference that reads back the QR codes in SempereTests
    wamerican-small # /usr/share/dict/american-english-small, the source of scripts/make-wordlist.py
    libmicrohttpd-dev # CMicroHTTPD: the HTTP server under the HTTPServer module (pixie-server)
    libsqlite3-dev # CSQLite: the Storage module's embedded database (pixie-server --data-dir)
    libsodium-dev  # CSodium: the ristretto255 group under the PrivacyPass module (VOPRF tokens)
    libnats-dev    # CNATS: the NATS C client, the relay bus across nodes (NATSRelayBus) and relay-bench
    libpq-dev      # CPostgreSQL: libpq, the Storage module's PostgreSQL backend
    postgresql     # the PostgreSQL server the tests start on loopback (scripts/engines.sh: initdb, pg_ctl)
    nginx          # the front docs/deploy/nginx.conf describes, run on loopback by MultiNodeTests
    nats-server    # the NATS server the tests start on loopback (scripts/engines.sh) and bench-relay.sh runs
    strace         # SIGKILLs `sempere` at each write in SempereTests.CLICrashTests (strace -e inject)
    gdb            # every thread's stack of a test pass that hangs (scripts/test.sh stops it and prints them)
    procps         # pgrep, which finds that pass's test process
)

say() { printf 'setup: %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        say "need root to run '$*': run this script as root, or install sudo"
        exit 1
    fi
}

missing=()
for package in "${apt_packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

if ! command -v swift >/dev/null 2>&1; then
    say "the Swift toolchain is not on PATH: install Swift 6.x from swift.org, then run this again"
    exit 1
fi

# The venv: the reference packages, pinned in requirements.txt. Rebuilt when requirements.txt changes.
venv="$root/.venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$root/requirements.txt" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "creating the Python venv in .venv with requirements.txt"
    # Debian's python3 first: it is the one the apt packages above install on a fresh machine.
    python=/usr/bin/python3
    [ -x "$python" ] || python="$(command -v python3)"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/requirements.txt"
    echo "$want" >"$stamp"
fi

export SIBLINGS_PYTHON="$venv/bin/python"
