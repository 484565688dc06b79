import Foundation
import PixieWire
import PrivateFiles
import Storage
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One import into a ``DeviceStore`` (a sibling's snapshot, or an archive), made a bulk load. Where the seed's
/// import is insert-if-absent by row id (000_e422bd9a7c930342.txt, "What do I know?"), ours folds: of the live row
/// and the snapshot's row of one id, the one the category's rule ranks higher stays (docs/pixie-sync.md, "Why a
/// snapshot can never resurrect"); importing the same snapshot again is still a no-op.
///
/// The rows go into a new store beside the live one, not into the live one: a new file (``StoreFile``) on one
/// connection with no journal and no syncs (``SQLiteDatabase/bulkLoading(newFileAt:)``), its statement prepared
/// once per category, all in one transaction. Each page is written once, where the WAL path wrote it twice (the log,
/// then the checkpoint), and the live store takes no lock meanwhile, so the device goes on writing while a
/// download of any length feeds the import. ``commit()`` then, holding the store's lock exclusive for a moment,
/// copies the live store's rows in (each live row that the fold ranks at least as high as the snapshot's row of its
/// id, and every live contact over a snapshot contact with its userIDHash), carries the store's clock, arrival
/// counter and agreements over, sums the digests, flushes the new file to the disk, and
/// moves it into place with one `rename(2)`. A crash or a failure before that rename leaves the live store as it
/// was; ``discard()``, or the next import, removes the half-written file.
///
/// For a store in memory (tests) the new store is in memory too, and ``commit()`` folds its rows into the live one
/// with ``DeviceStore/apply(_:maximumLead:)``, in one transaction.
///
/// A snapshot's rows are taken as the sibling holds them: none is held for a clock that runs ahead (that sibling
/// applied or wrote them already), and the store's clock is lifted past them all.
///
/// Used by one task at a time; not `Sendable`.
package final class StoreImport {
    private let store: DeviceStore
    private let target: Target
    private var isOpen = true
    /// Flushes the new file to the disk in the background as it grows (file stores only).
    private let writeback: Writeback?
    /// The rowid the next imported row takes in the new file: past every row the live store had when the import
    /// began, by 2^32, so the live rows keep their own (and their order first) when they are merged in, and the
    /// rows the device writes meanwhile still fit below.
    private var nextRowID: Int64 = 0
    /// Bytes of fields written since the last ``Writeback/start()``.
    private var unflushed = 0

    private enum Target {
        /// The new file, and the import lock's descriptor.
        case file(StoreFile, generation: URL, database: SQLiteDatabase, importLock: Int32)
        case memory(live: SQLiteDatabase, side: SQLiteDatabase)
    }

    package init(into store: DeviceStore) throws {
        self.store = store
        switch store.backing {
        case .memory(let live):
            let side = try SQLiteDatabase.inMemory()
            try DeviceStore.migrate(side)
            try Self.storing { try side.execute("BEGIN", []) }
            target = .memory(live: live, side: side)
            writeback = nil
        case .file(let file):
            let importLock = try file.takeImportLock()
            let generation = file.newGeneration()
            do {
                try file.removeLeftovers()
                try StoreFile.io { () throws(PrivateFilesError) in try PrivateFiles.write(Data(), to: generation) }
                let database = try Self.storing { try SQLiteDatabase.bulkLoading(newFileAt: generation.path) }
                try DeviceStore.migrate(database)
                try Self.storing { try database.execute("BEGIN", []) }
                nextRowID = try Self.storing { try Self.largestRowID(in: try store.database) } + (1 << 32)
                target = .file(file, generation: generation, database: database, importLock: importLock)
                writeback = Writeback(path: generation.path)
            } catch {
                unlink(generation.path)
                close(importLock)
                throw error
            }
        }
    }

    deinit { discard() }

    private var side: SQLiteDatabase {
        switch target {
        case .file(_, _, let database, _): database
        case .memory(_, let side): side
        }
    }

    /// Writes `row` unless the import holds a row of its id already (or, for a live contact, one with its
    /// userIDHash): says whether it did. A live row's fields are checked as ``DeviceStore/put(_:id:fields:)`` checks
    /// them.
    package func insert(_ row: StoreRow) throws -> Bool {
        guard isOpen else { throw Self.ended }
        try DeviceStore.check(id: row.id)
        if !row.isDeleted { try DeviceStore.check(row.fields, for: row.category) }
        let item = store.writer.itemKey.map {
            $0.item(category: row.category.snapshotCode, id: row.id, version: row.version, deleted: row.isDeleted)
        }
        let values: [SQLValue] =
            [
                .text(row.id), .integer(Int64(bitPattern: row.version.hlc)), .blob(row.version.author.bytes),
                .integer(row.isDeleted ? 1 : 0),
            ]
            + row.category.columns.map { row.isDeleted ? .null : DeviceStore.sql(row.fields[$0.name]!) }
            + [item.map { .blob($0.rawRepresentation) } ?? .null]
        let inserted = try Self.storing {
            switch target {
            case .memory(_, let side):
                return try side.execute(Self.insertSQL[row.category]!, values) == 1
            case .file(_, _, let database, _):
                defer { nextRowID += 1 }
                return try database.execute(Self.insertWithRowIDSQL[row.category]!, [.integer(nextRowID)] + values) == 1
            }
        }
        if let writeback {
            unflushed += row.fields.values.reduce(row.id.utf8.count) { total, value in
                switch value {
                case .text(let text): total + text.utf8.count
                case .integer: total + 8
                case .blob(let blob): total + blob.count
                }
            }
            if unflushed >= Writeback.every {
                unflushed = 0
                writeback.start()
            }
        }
        return inserted
    }

    /// Makes the import the store: merges the rows written to the live store meanwhile (they win), and moves the
    /// new store into place. Returns how many of the rows the import inserted the live store had already (by id,
    /// or a live contact by userIDHash), and so kept as they were.
    package func commit() throws -> Int {
        guard isOpen else { throw Self.ended }
        isOpen = false
        switch target {
        case .memory(let live, let side):
            _ = live
            let rows = try Self.storing {
                try side.execute("COMMIT", [])
                return try StoreCategory.allCases.flatMap { category in
                    try side.query("SELECT * FROM \(category.table) ORDER BY rowid", []).map {
                        try DeviceStore.decode($0, category)
                    }
                }
            }
            let report = try store.apply(rows, maximumLead: .seconds(Int64.max >> 1))
            return report.ignored + report.written.count
        case .file(let file, let generation, let database, let importLock):
            defer { close(importLock) }
            var moved = false
            do {
                return try Self.storing {
                    try database.execute("COMMIT", [])
                    return try file.withLock(exclusive: true) {
                        let live = try StoreFile.target(of: file.link)
                        let kept = try Self.merge(live: live, into: database, keyID: store.writer.itemKey?.keyID)
                        try database.closeDurably()
                        try file.pointLink(at: generation)
                        moved = true
                        try file.settle(replacing: live)
                        return kept
                    }
                }
            } catch {
                database.close()
                // Before the rename the live store is as it was, and the new file goes. After it, the new file is
                // the store: only making the rename durable, or removing the old file, failed, and the error says so.
                if !moved { unlink(generation.path) }
                throw error
            }
        }
    }

    /// Copies into `database` every row of the store at `live` that the fold ranks at least as high as the import's
    /// row of its id (or that the import lacks), and every live contact over an imported one with its userIDHash;
    /// carries the live store's clock, arrival counter and agreements over; gives the imported rows the next arrival
    /// `seq`; and sums the digests when every row has its item. Returns how many of the import's rows the live
    /// store's replaced.
    private static func merge(live: String, into database: SQLiteDatabase, keyID: Data?) throws -> Int {
        guard FileManager.default.fileExists(atPath: live) else {
            throw DeviceStoreError.unusable(
                "the device store \(live) was removed while the import ran: nothing was imported; open the "
                    + "device's home again and import once more")
        }
        try database.execute("ATTACH DATABASE ? AS live", [.text(live)])
        try database.execute("BEGIN", [])
        var kept = 0
        let liveState = try database.queryOne("SELECT hlc, seq, item_key_id FROM live.sync_state", [])!
        let arrival = try liveState.int64("seq") + 1
        var hlc = try liveState.int64("hlc")
        for category in StoreCategory.allCases {
            let table = category.table
            let id = category.idColumn
            try database.execute("UPDATE main.\(table) SET seq = ?", [.integer(arrival)])
            let liveWins =
                "EXISTS (SELECT 1 FROM live.\(table) AS old WHERE old.\(id) = new.\(id) "
                + "AND NOT \(category.outranksSQL("new", "old")))"
            var overlap = liveWins
            if category == .contacts {
                overlap +=
                    " OR (new.deleted = 0 AND EXISTS (SELECT 1 FROM live.contacts AS old WHERE old.deleted = 0 "
                    + "AND old.user_id_hash = new.user_id_hash AND old.id <> new.id))"
            }
            kept += Int(
                try database.queryOne("SELECT count(*) AS n FROM main.\(table) AS new WHERE \(overlap)", [])!.int64("n")
            )
            let columns = ([id, "hlc", "author", "deleted"] + category.columns.map(\.name) + ["item", "seq"])
                .joined(separator: ", ")
            try database.execute(
                "INSERT OR REPLACE INTO main.\(table) (rowid, \(columns)) SELECT rowid, \(columns) FROM live.\(table) "
                    + "AS old WHERE NOT EXISTS (SELECT 1 FROM main.\(table) AS new WHERE new.\(id) = old.\(id) AND "
                    + "\(category.outranksSQL("new", "old"))) ORDER BY rowid", [])
            hlc = max(
                hlc, try database.queryOne("SELECT coalesce(max(hlc), 0) AS m FROM main.\(table)", [])!.int64("m"))
        }
        try database.execute("INSERT OR REPLACE INTO main.sync_agreements SELECT * FROM live.sync_agreements", [])
        try database.execute("INSERT OR REPLACE INTO main.sync_siblings SELECT * FROM live.sync_siblings", [])
        // The digests are summed here only if every row has its item under this device's key (the live rows under
        // the same key); otherwise the store's next write computes them all.
        let missing = try StoreCategory.allCases.reduce(0) { total, category in
            total
                + (try database.queryOne(
                    "SELECT count(*) AS n FROM main.\(category.table) WHERE item IS NULL", [])!.int64("n"))
        }
        let liveKey = try liveState.optionalData("item_key_id")
        let liveHasRows = try StoreCategory.allCases.contains { category in
            try database.queryOne("SELECT 1 AS one FROM live.\(category.table) LIMIT 1", []) != nil
        }
        var summed: Data?
        if let keyID, missing == 0, liveKey == keyID || !liveHasRows {
            for category in StoreCategory.allCases {
                var digest = SyncDigest()
                try database.forEachRow("SELECT item FROM main.\(category.table)", []) { row in
                    digest.insert(try SyncItem(rawRepresentation: try row.data("item")))
                }
                try database.execute(
                    "INSERT OR REPLACE INTO main.sync_digests (category, count, sum) VALUES (?, ?, ?)",
                    [.text(category.rawValue), .integer(Int64(digest.count)), .blob(digest.sumBytes)])
            }
            summed = keyID
        }
        try database.execute(
            // An import counts as a local write: the loop of a listener on this home pushes what it brought.
            "UPDATE main.sync_state SET hlc = ?, seq = ?, local_seq = ?, item_key_id = ?",
            [.integer(hlc), .integer(arrival), .integer(arrival), summed.map { .blob($0) } ?? .null])
        try database.execute("COMMIT", [])
        try database.execute("DETACH DATABASE live", [])
        return kept
    }

    /// Throws the import away: nothing of it reaches the store. Safe to call more than once.
    package func discard() {
        guard isOpen else { return }
        isOpen = false
        switch target {
        case .memory: break
        case .file(_, let generation, let database, let importLock):
            database.close()
            unlink(generation.path)
            unlink(generation.path + "-journal")
            close(importLock)
        }
    }

    /// Starts the new file's flush to the disk while the import goes on, so that the `fsync(2)` before the move
    /// has only the last pages left to write: every 32 MiB of rows, an `fdatasync(2)` on a thread of its own (one
    /// at a time; none is waited for). Writing the pages is the kernel's work either way; this only starts it
    /// sooner, while the download still runs.
    private final class Writeback: Sendable {
        private let descriptor: Int32
        private let running = Atomic<Bool>(false)
        static let every = 32 << 20

        init?(path: String) {
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return nil }
        }

        deinit { close(descriptor) }

        /// Starts an `fdatasync(2)` unless one is running.
        func start() {
            guard running.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
                return
            }
            DispatchQueue.global(qos: .utility).async { [self] in
                _ = fdatasync(descriptor)
                running.store(false, ordering: .releasing)
            }
        }
    }

    /// The largest rowid in any table of the store, 0 for an empty one.
    private static func largestRowID(in database: any SQLDatabase) throws -> Int64 {
        try StoreCategory.allCases.map { category in
            try database.queryOne("SELECT coalesce(max(rowid), 0) AS m FROM \(category.table)", [])!.int64("m")
        }.max() ?? 0
    }

    /// Each category's insert-if-absent, written once: without a rowid (SQLite picks the next), and with one given
    /// first.
    private static let insertSQL = insertStatements(withRowID: false)
    private static let insertWithRowIDSQL = insertStatements(withRowID: true)

    private static func insertStatements(withRowID: Bool) -> [StoreCategory: String] {
        Dictionary(
            uniqueKeysWithValues: StoreCategory.allCases.map { category in
                let names =
                    (withRowID ? ["rowid"] : []) + [category.idColumn, "hlc", "author", "deleted"]
                    + category.columns.map(\.name) + ["item"]
                let sql =
                    "INSERT INTO \(category.table) (\(names.joined(separator: ", "))) "
                    + "VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", "))) ON CONFLICT DO NOTHING"
                return (category, sql)
            })
    }

    private static let ended = DeviceStoreError.unusable(
        "this import was committed or discarded already: start another one")

    @discardableResult
    private static func storing<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as StorageError {
            throw DeviceStoreError.unusable("the device store could not be written: \(error.reason)")
        }
    }
}
