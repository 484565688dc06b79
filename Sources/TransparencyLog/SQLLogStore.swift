import Foundation
import Storage
import Transparency

/// The log's tables in a ``Storage/SQLDatabase`` (component "transparency"; docs/transparency.md, "Log").
///
/// - `transparency_entries(idx, label, version, entry, leaf_hash, map_key)`: every entry, by log index, unique
///   per (label, version).
/// - `transparency_nodes(level, idx, hash)`: the hash of every complete subtree (level 0 = the leaf hashes), as
///   Tessera's tiles hold them: an append writes one row per level it completes (two on average, O(log n) at
///   most), a proof reads O(log n) rows.
/// - `transparency_checkpoints(size, note)`: every checkpoint the sequencer signed.
public enum TransparencySchema {
    public static let component = "transparency"
    public static let migrations = [
        Migration(
            version: 1,
            sql: """
                CREATE TABLE transparency_entries (
                    idx BIGINT PRIMARY KEY,
                    label TEXT NOT NULL,
                    version BIGINT NOT NULL,
                    entry BLOB NOT NULL,
                    leaf_hash BLOB NOT NULL,
                    map_key BLOB NOT NULL
                );
                CREATE UNIQUE INDEX transparency_entries_label_version ON transparency_entries (label, version);
                CREATE TABLE transparency_nodes (
                    level INTEGER NOT NULL,
                    idx BIGINT NOT NULL,
                    hash BLOB NOT NULL,
                    PRIMARY KEY (level, idx)
                );
                CREATE TABLE transparency_checkpoints (
                    size BIGINT PRIMARY KEY,
                    note TEXT NOT NULL
                )
                """)
    ]
}

/// Reads complete-subtree hashes from `transparency_nodes`, through the database or a transaction.
public struct SQLLogStore: MerkleHashReader {
    let sql: any SQLQuerying

    public init(_ sql: any SQLQuerying) { self.sql = sql }

    public func subtreeHash(level: Int, index: UInt64) throws -> Hash256 {
        guard
            let row = try sql.queryOne(
                "SELECT hash FROM transparency_nodes WHERE level = ? AND idx = ?",
                [.integer(Int64(level)), .integer(Int64(index))]),
            let hash = Hash256(try row.data("hash"))
        else {
            throw TransparencyError(.outOfRange, "the log has no complete subtree at level \(level), index \(index)")
        }
        return hash
    }

    /// Writes one complete-subtree hash.
    static func write(_ sql: any SQLQuerying, level: Int, index: UInt64, hash: Hash256) throws {
        try sql.execute(
            "INSERT INTO transparency_nodes (level, idx, hash) VALUES (?, ?, ?)",
            [.integer(Int64(level)), .integer(Int64(index)), .blob(hash.rawRepresentation)])
    }

    /// The entries `range` of the log, in order.
    static func entries(_ sql: any SQLQuerying, _ range: Range<UInt64>) throws -> [Entry] {
        try sql.query(
            "SELECT entry FROM transparency_entries WHERE idx >= ? AND idx < ? ORDER BY idx",
            [.integer(Int64(range.lowerBound)), .integer(Int64(range.upperBound))]
        ).map { try Entry(encoded: try $0.data("entry")) }
    }

    /// The latest version of `label` at or below log size `size`, with its index and entry.
    static func latest(_ sql: any SQLQuerying, label: Label, below size: UInt64) throws -> (UInt64, Entry)? {
        guard
            let row = try sql.queryOne(
                "SELECT idx, entry FROM transparency_entries WHERE label = ? AND idx < ? ORDER BY version DESC LIMIT 1",
                [.text(label.rawValue), .integer(Int64(size))])
        else { return nil }
        return (UInt64(try row.int64("idx")), try Entry(encoded: try row.data("entry")))
    }

    /// The latest version of `label` in the log, 0 if it was never written.
    static func latestVersion(_ sql: any SQLQuerying, label: Label) throws -> UInt64 {
        let row = try sql.queryOne(
            "SELECT MAX(version) AS version FROM transparency_entries WHERE label = ?", [.text(label.rawValue)])
        return UInt64(try row?.optionalInt64("version") ?? 0)
    }

    /// The map keys and leaf hashes of the entries `range`, in order.
    static func mapLeaves(_ sql: any SQLQuerying, _ range: Range<UInt64>) throws -> [(key: Hash256, value: Hash256)] {
        try sql.query(
            "SELECT map_key, leaf_hash FROM transparency_entries WHERE idx >= ? AND idx < ? ORDER BY idx",
            [.integer(Int64(range.lowerBound)), .integer(Int64(range.upperBound))]
        ).map { row in
            guard let key = Hash256(try row.data("map_key")), let value = Hash256(try row.data("leaf_hash")) else {
                throw TransparencyError(.malformed, "a stored map key or leaf hash is not 32 bytes")
            }
            return (key, value)
        }
    }

    /// The map of the first `size` entries, rebuilt from their stored keys and leaf hashes, 100,000 rows a query.
    static func map(_ sql: any SQLQuerying, size: UInt64) throws -> VerifiableMap {
        var leaves: [(key: Hash256, value: Hash256)] = []
        leaves.reserveCapacity(Int(size))
        var start: UInt64 = 0
        while start < size {
            let end = min(size, start + 100_000)
            leaves += try mapLeaves(sql, start..<end)
            start = end
        }
        return try VerifiableMap(leaves: leaves)
    }
}
