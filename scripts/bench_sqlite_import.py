#!/usr/bin/env python3
"""What a one-transaction import of SIZE_MIB rows of 1 MiB costs SQLite in each journal mode, on this machine.

The device's import (docs/benchmarks.md, "Absorbing a store, before the bulk import path") writes a snapshot's
rows in one transaction into a WAL store; this measures the same inserts into a fresh file under WAL, a
rollback journal and no journal, to show what writing the new store beside the live one would save.

    python3 scripts/bench_sqlite_import.py [directory]   # SIZE_MIB (default 256); the directory defaults to /tmp
"""
import base64
import os
import sqlite3
import sys
import tempfile
import time

size = int(os.environ.get("SIZE_MIB", "256"))
rows = [base64.b64encode(os.urandom(786432)).decode() for _ in range(size)]  # 1 MiB of text each


def run(directory, mode, synchronous):
    path = os.path.join(directory, "import.db")
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    database = sqlite3.connect(path, isolation_level=None)
    database.execute(f"PRAGMA journal_mode={mode}")
    database.execute(f"PRAGMA synchronous={synchronous}")
    database.execute(
        "CREATE TABLE notebook_notes (id TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, "
        "deleted INTEGER NOT NULL DEFAULT 0, title TEXT, body TEXT)")
    start = time.monotonic()
    database.execute("BEGIN")
    for index, body in enumerate(rows):
        database.execute(
            "INSERT INTO notebook_notes VALUES (?, 1, 0, ?, ?) ON CONFLICT DO NOTHING",
            (f"bench-{index:05d}", f"note {index}", body))
    database.execute("COMMIT")
    committed = time.monotonic()
    database.close()
    closed = time.monotonic()
    print(f"{mode:>6} synchronous={synchronous:<6} commit {committed - start:5.2f} s, close {closed - committed:5.2f} s")


with tempfile.TemporaryDirectory(dir=sys.argv[1] if len(sys.argv) > 1 else "/tmp") as directory:
    print(f"{size} rows of 1 MiB, one transaction, into a fresh file in {directory}")
    for mode, synchronous in [("wal", "normal"), ("wal", "normal"), ("delete", "normal"), ("off", "off")]:
        run(directory, mode, synchronous)
