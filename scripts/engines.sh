#!/usr/bin/env bash
# The engines the tests run pixie-server on beside its embedded defaults: a PostgreSQL server and a nats-server,
# each on a free loopback port, in a temporary directory, and stopped afterwards.
#
# Sourced by scripts/test.sh (engines_start, then engines_stop on exit), or run by hand:
#   eval "$(scripts/engines.sh start)"    # prints the export lines (SIBLINGS_POSTGRES_URL, SIBLINGS_NATS_URL)
#   scripts/engines.sh stop DIR
# PostgreSQL refuses to run as root, so as root it runs as the `postgres` user (Debian's package creates it).

engines_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

engines_as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# Starts PostgreSQL and nats-server; sets and exports SIBLINGS_POSTGRES_URL, SIBLINGS_NATS_URL and
# SIBLINGS_ENGINES_DIR.
engines_start() {
    local bin
    bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
    if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
        echo "engines: PostgreSQL is not installed (no /usr/lib/postgresql/<version>/bin/initdb): run scripts/setup.sh" >&2
        return 1
    fi
    SIBLINGS_ENGINES_DIR="$(mktemp -d /tmp/siblings-engines.XXXXXX)"
    chmod 0755 "$SIBLINGS_ENGINES_DIR"
    [ "$(id -u)" -eq 0 ] && chown postgres "$SIBLINGS_ENGINES_DIR"
    local port
    port="$(engines_free_port)"
    if ! engines_as_postgres "$bin/initdb" -D "$SIBLINGS_ENGINES_DIR/pg" -A trust -U postgres -E UTF8 --no-sync \
        >"$SIBLINGS_ENGINES_DIR/initdb.log" 2>&1; then
        echo "engines: initdb failed:" >&2
        cat "$SIBLINGS_ENGINES_DIR/initdb.log" >&2
        return 1
    fi
    # Loopback only, a socket directory of its own, and room for every test's pool. fsync off: a test server's
    # data never has to outlive the machine (a restart still loses nothing committed). SIBLINGS_ENGINES_DURABLE=1
    # keeps PostgreSQL's defaults (fsync, synchronous_commit), as the benchmarks run it.
    local durability="-c fsync=off"
    [ "${SIBLINGS_ENGINES_DURABLE:-0}" = 1 ] && durability=""
    if ! engines_as_postgres "$bin/pg_ctl" -D "$SIBLINGS_ENGINES_DIR/pg" -l "$SIBLINGS_ENGINES_DIR/postgres.log" -w \
        -t 60 -o "-h 127.0.0.1 -p $port -k $SIBLINGS_ENGINES_DIR -c max_connections=400 $durability" start \
        >/dev/null; then
        echo "engines: PostgreSQL did not start:" >&2
        cat "$SIBLINGS_ENGINES_DIR/postgres.log" >&2
        return 1
    fi
    SIBLINGS_POSTGRES_BIN="$bin"
    SIBLINGS_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres"
    export SIBLINGS_ENGINES_DIR SIBLINGS_POSTGRES_BIN SIBLINGS_POSTGRES_URL
    echo "engines: PostgreSQL on 127.0.0.1:$port ($SIBLINGS_ENGINES_DIR)" >&2

    local nats
    nats="$(command -v nats-server || echo /usr/sbin/nats-server)"
    if [ ! -x "$nats" ]; then
        echo "engines: nats-server is not installed: run scripts/setup.sh" >&2
        return 1
    fi
    local nats_port
    nats_port="$(engines_free_port)"
    "$nats" -a 127.0.0.1 -p "$nats_port" -P "$SIBLINGS_ENGINES_DIR/nats.pid" >"$SIBLINGS_ENGINES_DIR/nats.log" 2>&1 &
    local tries=0
    until (exec 3<>"/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -gt 200 ]; then
            echo "engines: nats-server did not start:" >&2
            cat "$SIBLINGS_ENGINES_DIR/nats.log" >&2
            return 1
        fi
        sleep 0.05
    done
    SIBLINGS_NATS_URL="nats://127.0.0.1:$nats_port"
    export SIBLINGS_NATS_URL
    echo "engines: nats-server on 127.0.0.1:$nats_port" >&2
}

# Stops what engines_start started, and removes its directory.
engines_stop() {
    local dir="${1:-${SIBLINGS_ENGINES_DIR:-}}"
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    local bin="${SIBLINGS_POSTGRES_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
    if [ -f "$dir/pg/postmaster.pid" ]; then
        engines_as_postgres "$bin/pg_ctl" -D "$dir/pg" -m fast -w stop >/dev/null 2>&1 || true
    fi
    if [ -f "$dir/nats.pid" ]; then
        kill "$(cat "$dir/nats.pid")" 2>/dev/null || true
    fi
    rm -rf "$dir"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    case "${1:-}" in
        start)
            engines_start
            echo "export SIBLINGS_ENGINES_DIR='$SIBLINGS_ENGINES_DIR' SIBLINGS_POSTGRES_BIN='$SIBLINGS_POSTGRES_BIN'"
            echo "export SIBLINGS_POSTGRES_URL='$SIBLINGS_POSTGRES_URL' SIBLINGS_NATS_URL='$SIBLINGS_NATS_URL'"
            echo "# stop with: scripts/engines.sh stop $SIBLINGS_ENGINES_DIR"
            ;;
        stop) engines_stop "${2:-}" ;;
        *)
            echo "usage: scripts/engines.sh start | stop DIR" >&2
            exit 2
            ;;
    esac
fi
