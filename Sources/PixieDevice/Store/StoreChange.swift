import Foundation
import PixieWire
import Storage

/// One write transaction of a ``DeviceStore`` together with the store's sync state (docs/pixie-sync.md): the
/// device's hybrid logical clock, its arrival counter `seq`, and the eight digests. Every row the transaction
/// stores goes through ``store(_:replacing:)``, which gives it the next `seq` and its item and moves its category's
/// digest by the difference, so the digests are current whenever a transaction commits. ``save()`` writes the
/// state back before the commit.
///
/// When the store has no items under the writer's key yet (after the migration, or when the account's key
/// changed), opening the change computes every item and digest first; a writer with no key leaves items out and
/// marks them stale, for the first writer with a key to compute.
struct StoreChange {
    let transaction: any SQLTransaction
    let writer: StoreWriter
    let now: Date
    var clock: HybridLogicalClock
    var seq: Int64
    /// The digests, or nil when this store keeps no items (its writer has no item key).
    var digests: [StoreCategory: SyncDigest]?
    private var changed: Set<StoreCategory> = []
    /// True once the transaction made a local write (``tick()``): `local_seq` then moves with `seq`.
    private var wroteLocally = false
    /// The clock and counter as read, so that a change that wrote nothing writes no state either.
    private let readHLC: UInt64
    private let readSeq: Int64

    init(_ transaction: any SQLTransaction, writer: StoreWriter, now: Date) throws {
        self.transaction = transaction
        self.writer = writer
        self.now = now
        let state = try transaction.queryOne("SELECT hlc, seq, item_key_id FROM sync_state", [])!
        clock = HybridLogicalClock(reading: UInt64(bitPattern: try state.int64("hlc")))
        seq = try state.int64("seq")
        readHLC = clock.reading
        readSeq = seq
        let storedKey = try state.optionalData("item_key_id")
        guard let itemKey = writer.itemKey else {
            digests = nil
            if storedKey != nil { try transaction.execute("UPDATE sync_state SET item_key_id = NULL", []) }
            return
        }
        if storedKey == itemKey.keyID {
            var digests: [StoreCategory: SyncDigest] = [:]
            for row in try transaction.query("SELECT category, count, sum FROM sync_digests", []) {
                guard let category = StoreCategory(rawValue: try row.string("category")) else { continue }
                digests[category] = try SyncDigest(
                    count: UInt32(truncatingIfNeeded: try row.int64("count")), sumBytes: try row.data("sum"))
            }
            self.digests = digests
        } else {
            digests = try Self.rebuild(in: transaction, itemKey: itemKey)
            changed = Set(StoreCategory.allCases)
        }
    }

    /// Computes every row's item under `itemKey` and every digest from them, and records the key.
    static func rebuild(in transaction: any SQLTransaction, itemKey: SyncItemKey) throws -> [StoreCategory: SyncDigest]
    {
        var digests: [StoreCategory: SyncDigest] = [:]
        for category in StoreCategory.allCases {
            var digest = SyncDigest()
            var items: [(Int64, SyncItem)] = []
            try transaction.forEachRow(
                "SELECT rowid, \(category.idColumn) AS id, hlc, author, deleted FROM \(category.table)", []
            ) { row in
                let author = try row.data("author").reduce(0) { $0 << 8 | UInt64($1) }
                let item = itemKey.item(
                    category: category.snapshotCode, id: try row.string("id"),
                    version: RowVersion(
                        hlc: UInt64(bitPattern: try row.int64("hlc")), author: AuthorTag(rawValue: author)),
                    deleted: try row.bool("deleted"))
                items.append((try row.int64("rowid"), item))
                digest.insert(item)
            }
            for (rowid, item) in items {
                try transaction.execute(
                    "UPDATE \(category.table) SET item = ? WHERE rowid = ?",
                    [.blob(item.rawRepresentation), .integer(rowid)])
            }
            digests[category] = digest
        }
        try transaction.execute("UPDATE sync_state SET item_key_id = ?", [.blob(itemKey.keyID)])
        return digests
    }

    /// A new version of this device's clock, for a local write.
    mutating func tick() -> RowVersion {
        wroteLocally = true
        return RowVersion(hlc: clock.tick(now: now), author: writer.author)
    }

    /// Moves the clock past a received version; false (and nothing moves) when it is too far ahead: the row is held.
    mutating func observe(_ version: RowVersion, maximumLead: Duration) -> Bool {
        clock.observe(version.hlc, now: now, maximumLead: maximumLead)
    }

    /// Stores `row` in place of `old` (the version of its row held before, if any): the next `seq`, its item, and its
    /// category's digest moved by the difference.
    mutating func store(_ row: StoreRow, replacing old: DeviceStore.Stored?) throws {
        let category = row.category
        seq += 1
        var item: SyncItem?
        if let itemKey = writer.itemKey, digests != nil {
            let new = itemKey.item(
                category: category.snapshotCode, id: row.id, version: row.version, deleted: row.isDeleted,
                idTag: old?.item?.idTag)
            if let oldItem = old?.item {
                digests![category, default: SyncDigest()].replace(oldItem, with: new)
            } else {
                digests![category, default: SyncDigest()].insert(new)
            }
            changed.insert(category)
            item = new
        }
        let names = [category.idColumn, "hlc", "author", "deleted"] + category.columns.map(\.name) + ["item", "seq"]
        let values: [SQLValue] =
            [
                .text(row.id), .integer(Int64(bitPattern: row.version.hlc)), .blob(row.version.author.bytes),
                .integer(row.isDeleted ? 1 : 0),
            ]
            + category.columns.map { row.isDeleted ? .null : DeviceStore.sql(row.fields[$0.name]!) }
            + [item.map { .blob($0.rawRepresentation) } ?? .null, .integer(seq)]
        let updates = names.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        try transaction.execute(
            """
            INSERT INTO \(category.table) (\(names.joined(separator: ", "))) \
            VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", "))) \
            ON CONFLICT (\(category.idColumn)) DO UPDATE SET \(updates)
            """, values)
    }

    /// Tombstones `old` with a new version of this device's clock; returns the tombstone.
    mutating func tombstone(_ old: DeviceStore.Stored) throws -> StoreRow {
        try tombstone(old.row.id, of: old.row.category, replacing: old)
    }

    /// Tombstones the row `id` of `category`, held before as `old` (a stored row, or one just stored from `row`).
    mutating func tombstone(
        _ id: String, of category: StoreCategory, replacing old: DeviceStore.Stored?
    ) throws
        -> StoreRow
    {
        let row = StoreRow(category: category, id: id, version: tick(), isDeleted: true, fields: [:])
        try store(row, replacing: old)
        return row
    }

    /// Tombstones `row`, which this transaction has just stored.
    mutating func tombstone(_ id: String, of category: StoreCategory, replacing row: StoreRow) throws -> StoreRow {
        try tombstone(id, of: category, replacing: try DeviceStore.stored(category, id: id, in: transaction))
    }

    /// Tombstones every live message of the conversation `id`; returns the tombstones.
    mutating func deleteMessages(ofConversation id: String) throws -> [StoreRow] {
        var tombstones: [StoreRow] = []
        for message in try transaction.query(
            "SELECT id FROM messages WHERE conversation_id = ? AND deleted = 0", [.text(id)])
        {
            let stored = try DeviceStore.stored(.messages, id: try message.string("id"), in: transaction)
            if let stored { tombstones.append(try tombstone(stored)) }
        }
        return tombstones
    }

    /// Deletes the tombstones of `category` with `seq` at most `through`, taking their items out of the digest.
    mutating func collect(_ category: StoreCategory, throughSeq through: Int64) throws -> Int {
        let gone = try transaction.query(
            "SELECT item FROM \(category.table) WHERE deleted = 1 AND seq <= ?", [.integer(through)])
        guard !gone.isEmpty else { return 0 }
        for row in gone {
            if digests != nil, let bytes = try row.optionalData("item") {
                digests![category, default: SyncDigest()].remove(try SyncItem(rawRepresentation: bytes))
                changed.insert(category)
            }
        }
        try transaction.execute("DELETE FROM \(category.table) WHERE deleted = 1 AND seq <= ?", [.integer(through)])
        return gone.count
    }

    /// Writes the clock, the counter and the digests that changed back to the store.
    func save() throws {
        if wroteLocally {
            try transaction.execute(
                "UPDATE sync_state SET hlc = ?, seq = ?, local_seq = ?",
                [.integer(Int64(bitPattern: clock.reading)), .integer(seq), .integer(seq)])
        } else if clock.reading != readHLC || seq != readSeq {
            try transaction.execute(
                "UPDATE sync_state SET hlc = ?, seq = ?", [.integer(Int64(bitPattern: clock.reading)), .integer(seq)])
        }
        guard let digests else { return }
        for category in changed {
            let digest = digests[category] ?? SyncDigest()
            try transaction.execute(
                "INSERT OR REPLACE INTO sync_digests (category, count, sum) VALUES (?, ?, ?)",
                [.text(category.rawValue), .integer(Int64(digest.count)), .blob(digest.sumBytes)])
        }
    }
}

/// What the reconcile loop compares, read at one moment (``DeviceStore/syncSummary()``).
public struct SyncSummary: Sendable, Equatable {
    /// Each category's digest, in ``StoreCategory/allCases`` order (the snapshot codes' order).
    public let digests: [SyncDigest]
    /// The store's arrival counter.
    public let seq: Int64
    /// The store's HLC reading.
    public let hlc: UInt64

    package init(digests: [SyncDigest], seq: Int64, hlc: UInt64) {
        self.digests = digests
        self.seq = seq
        self.hlc = hlc
    }
}

extension AuthorTag {
    /// The tag's 8 bytes, big-endian, as the store keeps it.
    var bytes: Data {
        Data((0..<8).map { UInt8(truncatingIfNeeded: rawValue >> (56 - 8 * UInt64($0))) })
    }
}
