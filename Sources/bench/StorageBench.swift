import Foundation
import Storage

/// The Storage module on a temporary SQLite file in WAL mode (`synchronous=NORMAL`): what one service call costs
/// in statements. No anchor: the numbers are for sizing pixie-server, not for comparison.
func storageTable(_ options: Bench) throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("storage-bench-\(UUID())")
    defer { try? FileManager.default.removeItem(at: root) }
    let db = try SQLiteDatabase(path: root.appendingPathComponent("bench.sqlite").path)
    try db.migrate(
        component: "bench",
        migrations: [
            Migration(
                version: 1, sql: "CREATE TABLE keys (id INTEGER PRIMARY KEY, pubkey BLOB NOT NULL, expires_at INTEGER)")
        ])
    let pubkey = SQLValue.blob(Data(repeating: 0xAB, count: 32))
    var next: Int64 = 0

    var rows: [(String, Double)] = []
    func best(_ body: () throws -> Void) rethrows -> Double {
        var best = 0.0
        for _ in 0..<options.rounds { best = max(best, try measure(seconds: options.seconds, body)) }
        return best
    }

    rows.append(
        (
            "insert one row (autocommit)",
            try best {
                next += 1
                try db.execute(
                    "INSERT INTO keys (id, pubkey, expires_at) VALUES (?, ?, ?)", [.integer(next), pubkey, 0])
            }
        ))
    let batch = 100
    let batchRate = try best {
        try db.transaction { tx in
            for _ in 0..<batch {
                next += 1
                try tx.execute(
                    "INSERT INTO keys (id, pubkey, expires_at) VALUES (?, ?, ?)", [.integer(next), pubkey, 0])
            }
        }
    }
    rows.append(("insert \(batch) rows in one transaction, per row", batchRate * Double(batch)))
    let stored = next
    var probe: Int64 = 0
    rows.append(
        (
            "read one row by primary key (reader pool)",
            try best {
                probe = probe % stored + 1
                _ = try db.queryOne("SELECT pubkey, expires_at FROM keys WHERE id = ?", [.integer(probe)])?.data(
                    "pubkey")
            }
        ))
    rows.append(
        (
            "read one row by primary key in a transaction (writer)",
            try best {
                probe = probe % stored + 1
                _ = try db.transaction { tx in
                    try tx.queryOne("SELECT pubkey FROM keys WHERE id = ?", [.integer(probe)])?.data("pubkey")
                }
            }
        ))

    say("")
    say(
        "| Storage, SQLite \(try db.queryOne("SELECT sqlite_version() AS v")?.string("v") ?? "?"), WAL | ops/s | µs/op |"
    )
    say("|---|---:|---:|")
    for (name, rate) in rows { say(String(format: "| %@ | %.0f | %.1f |", name, rate, 1e6 / rate)) }
}
