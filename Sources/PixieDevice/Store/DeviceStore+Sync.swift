import Foundation
import PixieWire
import PrivateFiles
import SiblingsCrypto
import Storage

/// What the reconcile loop reads and records of a device store (docs/pixie-sync.md): digests, items and the rows
/// they name, agreements, the last local write, each sibling's last round, and what waits for the barrier. The
/// store's writes and folds are in DeviceStore.swift.
extension DeviceStore {
    /// What the reconcile loop compares (docs/pixie-sync.md, "Digests"), read at one moment: each category's digest
    /// (conversations first, in snapshot-code order), the store's arrival counter and its clock. Computes every item
    /// and digest first if the store has none under this account's key yet. Nil for a device with no item key.
    public func syncSummary() throws -> SyncSummary? {
        guard writer.itemKey != nil else { return nil }
        return try writing { change in
            SyncSummary(
                digests: StoreCategory.allCases.map { change.digests?[$0] ?? SyncDigest() }, seq: change.seq,
                hlc: change.clock.reading)
        }
    }

    /// Every item of `category` (docs/pixie-sync.md, "Items"), computed first if needed; empty for a device with no
    /// item key.
    public func items(_ category: StoreCategory) throws -> [SyncItem] {
        guard try syncSummary() != nil else { return [] }
        return try reading {
            try (try database).query("SELECT item FROM \(category.table)", []).map {
                try SyncItem(rawRepresentation: try $0.data("item"))
            }
        }
    }

    /// The rows of `category` whose items are among `items` (docs/pixie-sync.md, "Items"): what a sibling asked for
    /// in a round. An item whose row has changed since is not found, and is left out.
    public func rows(_ category: StoreCategory, items: [SyncItem]) throws -> [StoreRow] {
        try reading {
            var rows: [StoreRow] = []
            for start in stride(from: 0, to: items.count, by: 500) {
                let chunk = items[start..<min(start + 500, items.count)]
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
                rows += try (try database).query(
                    "SELECT * FROM \(category.table) WHERE item IN (\(marks))",
                    chunk.map { .blob($0.rawRepresentation) }
                ).map { try Self.decode($0, category) }
            }
            return rows
        }
    }

    /// Records that this store's digest of `category` equalled `sibling`'s when its arrival counter read `seq`
    /// (docs/pixie-sync.md, "Agreements"); an older record of the same pair is replaced.
    public func recordAgreement(with sibling: AuthorTag, category: StoreCategory, seq: Int64, at date: Date) throws {
        _ = try write { transaction in
            try transaction.execute(
                "INSERT OR REPLACE INTO sync_agreements (sibling, category, seq, agreed_at) VALUES (?, ?, ?, ?)",
                [
                    .blob(sibling.bytes), .text(category.rawValue), .integer(seq),
                    .integer(Int64(date.timeIntervalSince1970.rounded(.down))),
                ])
        }
    }

    /// The arrival counter's value at this store's last local write (a put, a delete, or an import): the reconcile
    /// loop starts rounds when it moves, whichever process of this home wrote.
    public func lastLocalWrite() throws -> Int64 {
        try reading { try (try database).queryOne("SELECT local_seq FROM sync_state", [])!.int64("local_seq") }
    }

    /// Records that a round with `sibling` ended at `date`, with the sibling's clock `clockDifference` milliseconds
    /// ahead of this device's (negative: behind), if its digest said, and the categories it found equal (migration
    /// 4 keeps them as a bit per snapshot code).
    public func recordRound(
        with sibling: AuthorTag, at date: Date, clockDifference: Int64?, agreed: Set<StoreCategory> = []
    ) throws {
        let mask = agreed.reduce(Int64(0)) { $0 | Int64(1) << Int64($1.snapshotCode) }
        _ = try write { transaction in
            try transaction.execute(
                "INSERT OR REPLACE INTO sync_siblings (sibling, round_at, clock_difference, agreed) VALUES (?, ?, ?, ?)",
                [
                    .blob(sibling.bytes), .integer(Int64((date.timeIntervalSince1970 * 1000).rounded(.down))),
                    clockDifference.map { .integer($0) } ?? .null, .integer(mask),
                ])
        }
    }

    /// A sibling's last round, as ``recordRound(with:at:clockDifference:)`` kept it.
    public struct SiblingRound: Sendable, Equatable {
        public let sibling: AuthorTag
        public let at: Date
        public let clockDifference: Int64?
        /// The categories that round found equal.
        public let agreed: Set<StoreCategory>
    }

    /// Every sibling's last round.
    public func siblingRounds() throws -> [SiblingRound] {
        try reading {
            try (try database).query(
                "SELECT sibling, round_at, clock_difference, agreed FROM sync_siblings", []
            ).map { row in
                let mask = try row.int64("agreed")
                return SiblingRound(
                    sibling: AuthorTag(rawValue: try row.data("sibling").reduce(0) { $0 << 8 | UInt64($1) }),
                    at: Date(timeIntervalSince1970: TimeInterval(try row.int64("round_at")) / 1000),
                    clockDifference: try row.optionalInt64("clock_difference"),
                    agreed: Set(StoreCategory.allCases.filter { mask & (Int64(1) << Int64($0.snapshotCode)) != 0 }))
            }
        }
    }

    /// How many tombstones of `category` this store holds, and the arrival of the newest: what the barrier has not
    /// let it collect yet.
    public func tombstones(_ category: StoreCategory) throws -> (count: Int, newestSeq: Int64) {
        try reading {
            let row = try (try database).queryOne(
                "SELECT count(*) AS n, coalesce(max(seq), 0) AS s FROM \(category.table) WHERE deleted = 1", [])!
            return (Int(try row.int64("n")), try row.int64("s"))
        }
    }

    /// True while the store holds no row (not even a tombstone) and has had no round with a sibling: a device that
    /// has not absorbed a store yet, for which a whole snapshot is the fast way in (`pixie sync`).
    public var isUnsynced: Bool {
        get throws {
            try reading {
                let database = try database
                for category in StoreCategory.allCases
                where try database.queryOne("SELECT 1 AS one FROM \(category.table) LIMIT 1", []) != nil {
                    return false
                }
                return try database.queryOne("SELECT 1 AS one FROM sync_siblings LIMIT 1", []) == nil
            }
        }
    }

    /// One agreement: with which sibling, on which category, at which arrival, and when.
    public struct Agreement: Sendable, Equatable {
        public let sibling: AuthorTag
        public let category: StoreCategory
        public let seq: Int64
        public let at: Date
    }

    /// Every agreement this store has recorded.
    public func agreements() throws -> [Agreement] {
        try reading {
            try (try database).query("SELECT sibling, category, seq, agreed_at FROM sync_agreements", []).compactMap {
                guard let category = StoreCategory(rawValue: try $0.string("category")) else { return nil }
                return Agreement(
                    sibling: AuthorTag(rawValue: try $0.data("sibling").reduce(0) { $0 << 8 | UInt64($1) }),
                    category: category, seq: try $0.int64("seq"),
                    at: Date(timeIntervalSince1970: TimeInterval(try $0.int64("agreed_at"))))
            }
        }
    }
}
