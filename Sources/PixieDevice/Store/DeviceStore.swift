import Foundation
import PixieWire
import PrivateFiles
import SiblingsCrypto
import Storage

/// The device's store (000_e422bd9a7c930342.txt, "What do I know?"): one SQLite file, `store.sqlite`, in the
/// device's home, with one table per ``StoreCategory``. It holds the account's data as this device knows it: the
/// fold of every change, not a log of them (the seed: "the snapshot is the log's fold, and the fold is all that was
/// ever kept").
///
/// Every row has an id, a version and a tombstone flag (docs/pixie-sync.md, "Versions"). ``put(_:id:fields:)``
/// stamps each write with this device's hybrid logical clock and author tag; ``delete(_:id:)`` leaves a tombstone
/// (a new version with no fields), so a deletion is a row the reconcile loop can ship like any other; and
/// ``apply(_:maximumLead:)`` folds rows from a sibling by each category's rule. In the same transaction as every
/// change the store keeps the row's item and its category's digest (docs/pixie-sync.md, "Digests"), so a digest is
/// always current at constant cost. Fields are checked against the category's ``StoreCategory/columns`` before
/// anything is written: unknown, missing or mistyped fields, keys of the wrong length, a second live contact with
/// the same userIDHash (it would make the channel key ambiguous), a message moved to another conversation, and a
/// write to a row whose deletion is final are refused with the reason.
///
/// The file is created mode 0600 (SQLite gives its `-wal` and `-shm` files the same mode) in the home's 0700
/// directory: it holds provider API keys and every contact's channel key.
public final class DeviceStore: Sendable, ReconcileData {
    let backing: Backing
    /// `store.sqlite` (the name every reader opens; after an import, a link to the store's current file), or nil
    /// for a store in memory.
    public let path: String?
    /// Who stamps this device's writes: its author tag and the account's item key (none before it is a member).
    let writer: StoreWriter
    /// The wall clock writes are stamped by, and held rows judged by.
    let clock: any DeviceClock

    enum Backing: Sendable {
        case memory(SQLiteDatabase)
        case file(StoreFile)
    }

    /// The store's name in a device's home.
    static let fileName = "store.sqlite"

    /// Opens (creating it if needed) `store.sqlite` in `home`, writing as the device set up there (if it is set up
    /// yet) on `clock`'s time.
    ///
    /// Writes are stamped by `clock` corrected by the device's last measured offset from the server's clock
    /// (``CorrectedClock``; docs/pixie-sync.md, "Whose wall clock"), unless `clock` is a corrected one already.
    public convenience init(home: DeviceHome, clock: any DeviceClock = SystemDeviceClock()) throws {
        let state = try? home.state()
        let offset = TimeInterval(state?.serverClockOffset ?? 0) / 1000
        try self.init(
            file: home.directory.appendingPathComponent(Self.fileName),
            writer: state.map(StoreWriter.init(state:)) ?? .unknown,
            clock: clock as? CorrectedClock ?? CorrectedClock(base: clock, offset: offset))
    }

    init(file: URL, writer: StoreWriter, clock: any DeviceClock) throws {
        self.backing = .file(try StoreFile(link: file))
        self.path = file.path
        self.writer = writer
        self.clock = clock
    }

    /// An empty store in memory, for tests: written by `writer` (a random device of a random account unless given).
    @_spi(Testing) public init(writer: StoreWriter? = nil, clock: any DeviceClock = SystemDeviceClock()) throws {
        let database = try SQLiteDatabase.inMemory()
        try Self.migrate(database)
        self.backing = .memory(database)
        self.path = nil
        self.writer =
            try writer
            ?? StoreWriter(
                author: AuthorTag(rawValue: UInt64.random(in: 1...UInt64.max)),
                accountSeed: SystemRandom().bytes(count: 32))
        self.clock = clock
    }

    /// Opens the store at `path` (a plain file, or a link an import made) as `writer`, for tests.
    @_spi(Testing) public convenience init(
        path: String, writer: StoreWriter, clock: any DeviceClock = SystemDeviceClock()
    ) throws {
        try self.init(file: URL(fileURLWithPath: path), writer: writer, clock: clock)
    }

    /// The store's migrations, for tests that make a store of an older schema.
    @_spi(Testing) public static var schemaMigrations: [Migration] { migrations }

    /// Opens the SQLite file at `path` as a device store, migrating it.
    static func open(_ path: String) throws -> SQLiteDatabase {
        guard FileManager.default.fileExists(atPath: path) else {
            throw DeviceStoreError.unusable(
                "the device store \(path) is gone (the device signed out, or it was removed by hand): open the "
                    + "device's home again to start with an empty store")
        }
        do {
            let database = try SQLiteDatabase(path: path, readers: 2, createIfMissing: false)
            try migrate(database)
            return database
        } catch let error as StorageError {
            throw DeviceStoreError.unusable(
                "the device store \(path) cannot be opened: \(error.reason). Move it away to start with an empty "
                    + "store (a sibling's snapshot can fill it again)")
        }
    }

    /// The database to read: the store's current file.
    var database: any SQLDatabase {
        get throws {
            switch backing {
            case .memory(let database): database
            case .file(let file): try file.database()
            }
        }
    }

    static let component = "device-store"

    /// Migration 1: one table per category, each `(id, version, deleted, fields...)`; fields are NULL in a
    /// tombstone, so a deletion keeps no content. Migration 2 (``syncMigration``): versions, items and arrival
    /// order for the reconcile loop. Add a migration for a new field; never edit one.
    static var migrations: [Migration] {
        let tables = StoreCategory.allCases.map { category in
            let fields = category.columns.map { "    \($0.name) \($0.sqlType)" }.joined(separator: ",\n")
            return """
                CREATE TABLE \(category.table) (
                    \(category.idColumn) TEXT PRIMARY KEY NOT NULL,
                    version INTEGER NOT NULL,
                    deleted INTEGER NOT NULL DEFAULT 0,
                \(fields)
                );
                """
        }
        let index = "CREATE UNIQUE INDEX contacts_user_id_hash ON contacts (user_id_hash) WHERE deleted = 0;"
        return [
            Migration(version: 1, sql: (tables + [index]).joined(separator: "\n")),
            Migration(version: 2, sql: syncMigration),
            Migration(version: 3, sql: roundsMigration),
            Migration(
                version: 4,
                sql: "ALTER TABLE sync_siblings ADD COLUMN agreed INTEGER NOT NULL DEFAULT 0;"),
        ]
    }

    /// Migration 2 (docs/pixie-sync.md, "How a row stores it"): the per-row counter becomes the HLC reading it sorts
    /// like (1, 2, … come before every real reading), with an author of eight zero bytes; each row gains its item
    /// (computed by the first write under the account's key) and its arrival `seq`; the store gains its clock and
    /// arrival counter (`sync_state`), its digests and its agreements.
    static var syncMigration: String {
        let tables = StoreCategory.allCases.map { category in
            let table = category.table
            return """
                ALTER TABLE \(table) RENAME COLUMN version TO hlc;
                ALTER TABLE \(table) ADD COLUMN author BLOB NOT NULL DEFAULT x'0000000000000000';
                ALTER TABLE \(table) ADD COLUMN item BLOB;
                ALTER TABLE \(table) ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX \(table)_item ON \(table) (item);
                CREATE INDEX \(table)_tombstones ON \(table) (seq) WHERE deleted = 1;
                """
        }
        let state = """
            CREATE TABLE sync_state (
                one INTEGER PRIMARY KEY CHECK (one = 1),
                hlc INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                item_key_id BLOB
            );
            INSERT INTO sync_state (one, hlc, seq) VALUES (1, 0, 0);
            CREATE TABLE sync_digests (category TEXT PRIMARY KEY NOT NULL, count INTEGER NOT NULL, sum BLOB NOT NULL);
            CREATE TABLE sync_agreements (
                sibling BLOB NOT NULL,
                category TEXT NOT NULL,
                seq INTEGER NOT NULL,
                agreed_at INTEGER NOT NULL,
                PRIMARY KEY (sibling, category)
            );
            """
        return (tables + [state]).joined(separator: "\n")
    }

    /// Migration 3 (docs/pixie-sync.md, "When a round starts" and "pixie sync status"): the arrival of the last local
    /// write (`local_seq`), which the loop watches to push a change to the siblings within a second (from any process
    /// of this home), and each sibling's last round with its clock difference.
    static var roundsMigration: String {
        """
        ALTER TABLE sync_state ADD COLUMN local_seq INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE sync_siblings (
            sibling BLOB PRIMARY KEY NOT NULL,
            round_at INTEGER NOT NULL,
            clock_difference INTEGER
        );
        """
    }

    static func migrate(_ database: any SQLDatabase) throws {
        do {
            try database.migrate(component: component, migrations: migrations)
        } catch let error as StorageError where error.code == .migration {
            throw DeviceStoreError.unusable(
                "the device store was written by a newer pixie, or is damaged: \(error.reason)")
        }
    }

    // MARK: writing

    /// Writes the row `id` of `category` with `fields` (every field of the category, and no other), stamped with a
    /// new version of this device's clock: a new id is inserted, an existing one changed (a tombstone comes back to
    /// life, unless the category's deletion is final). A nil `id` makes a fresh random one. Returns the row as
    /// stored.
    @discardableResult
    public func put(_ category: StoreCategory, id: String? = nil, fields: [String: StoreValue]) throws -> StoreRow {
        let id = id ?? UUID().uuidString.lowercased()
        try Self.check(id: id)
        try Self.check(fields, for: category)
        return try writing { change in
            if category == .contacts, let hash = fields["user_id_hash"],
                let holder = try Self.liveContact(userIDHash: hash, other: id, in: change.transaction)
            {
                throw DeviceStoreError.conflict(
                    "the contact \(holder.row.id) has this user id hash already: two contacts with one hash would "
                        + "make its channel key ambiguous; change that contact instead")
            }
            if category == .messages, let conversation = fields["conversation_id"]?.text {
                guard try Self.stored(.conversations, id: conversation, in: change.transaction)?.row.isDeleted == false
                else {
                    throw DeviceStoreError.notFound(
                        "there is no conversation \(conversation); add it first (`pixie store add conversations`)")
                }
            }
            let old = try Self.stored(category, id: id, in: change.transaction)
            if let old, old.row.isDeleted, category.deletionIsFinal {
                throw DeviceStoreError.conflict(
                    "the \(category.rawValue) row \(id) was deleted, and a deletion there is final (docs/pixie-sync.md, "
                        + "\"The fold\"): write a new row instead")
            }
            if let old, !old.row.isDeleted,
                let changed = category.fixedFields.first(where: { old.row.fields[$0] != fields[$0] })
            {
                throw DeviceStoreError.invalid(
                    "a message's \(changed) never changes once it is sent: edit its body, or write a new message")
            }
            let row = StoreRow(category: category, id: id, version: change.tick(), isDeleted: false, fields: fields)
            try change.store(row, replacing: old)
            return row
        }
    }

    /// Deletes the row `id`: it becomes a tombstone (a new version, no fields). Throws if there is no such live
    /// row. Deleting a conversation deletes its messages too.
    @discardableResult
    public func delete(_ category: StoreCategory, id: String) throws -> StoreRow {
        try writing { change in
            guard let old = try Self.stored(category, id: id, in: change.transaction), !old.row.isDeleted else {
                throw DeviceStoreError.notFound("there is no \(category.rawValue) row \(id) to delete")
            }
            if category == .conversations { _ = try change.deleteMessages(ofConversation: id) }
            return try change.tombstone(old)
        }
    }

    /// What ``apply(_:maximumLead:)`` did with a sibling's rows.
    public struct ApplyReport: Sendable, Equatable {
        /// The rows now stored as received.
        public var applied: [StoreRow] = []
        /// How many were not newer than what this store holds (by the category's fold), and so changed nothing.
        public var ignored = 0
        /// Rows more than the allowed lead ahead of this device's clock, left for a later round.
        public var held: [StoreRow] = []
        /// Rows refused, with why.
        public var refused: [String] = []
        /// Writes of this device's own that the fold called for: the loser of two live contacts with one userIDHash,
        /// and messages that arrived for a deleted conversation, tombstoned.
        public var written: [StoreRow] = []

        public init() {}
    }

    /// Folds `rows` from a sibling into the store (docs/pixie-sync.md, "The fold"), in one transaction: each is kept
    /// if it outranks the version of its row held here (or the row is new here), and left otherwise. Conversations
    /// are applied before messages whatever the order given. A row more than `maximumLead` ahead of this device's
    /// wall clock is held, and a row whose id or fields are not the category's is refused; neither changes anything.
    /// Applying the same rows again, or in another order, leaves the same store.
    @discardableResult
    public func apply(
        _ rows: [StoreRow], maximumLead: Duration = HybridLogicalClock.defaultMaximumLead
    ) throws
        -> ApplyReport
    {
        let order = Dictionary(uniqueKeysWithValues: StoreCategory.allCases.enumerated().map { ($1, $0) })
        let sorted = rows.enumerated().sorted { (order[$0.1.category]!, $0.0) < (order[$1.1.category]!, $1.0) }
        return try writing { change in
            var report = ApplyReport()
            for (_, row) in sorted {
                do {
                    try Self.check(id: row.id)
                    if !row.isDeleted { try Self.check(row.fields, for: row.category) }
                } catch {
                    report.refused.append("\(row.category.rawValue) \(row.id): \(error)")
                    continue
                }
                guard change.observe(row.version, maximumLead: maximumLead) else {
                    report.held.append(row)
                    continue
                }
                let old = try Self.stored(row.category, id: row.id, in: change.transaction)
                if let old, !row.outranks(old.row) {
                    report.ignored += 1
                    continue
                }
                if let old, !old.row.isDeleted, !row.isDeleted,
                    let changed = row.category.fixedFields.first(where: { old.row.fields[$0] != row.fields[$0] })
                {
                    report.refused.append(
                        "\(row.category.rawValue) \(row.id): its \(changed) differs from this store's, and never changes"
                    )
                    continue
                }
                if row.category == .contacts, !row.isDeleted, let hash = row.fields["user_id_hash"],
                    let holder = try Self.liveContact(userIDHash: hash, other: row.id, in: change.transaction)
                {
                    // One live contact per userIDHash: the greater version stays; the other is tombstoned here.
                    if holder.row.outranks(row) {
                        report.written.append(try change.tombstone(row.id, of: .contacts, replacing: old))
                        continue
                    }
                    report.written.append(try change.tombstone(holder))
                }
                try change.store(row, replacing: old)
                report.applied.append(row)
                if row.category == .messages, !row.isDeleted, let conversation = row.fields["conversation_id"]?.text,
                    try Self.stored(.conversations, id: conversation, in: change.transaction)?.row.isDeleted == true
                {
                    report.written.append(try change.tombstone(row.id, of: .messages, replacing: row))
                }
                if row.category == .conversations, row.isDeleted {
                    report.written += try change.deleteMessages(ofConversation: row.id)
                }
            }
            return report
        }
    }

    /// Deletes the tombstones of `category` that reached this store at or before arrival `seq` (the agreement
    /// barrier's reach: docs/pixie-sync.md, "The barrier"), and takes their items out of the digest. Returns how
    /// many went.
    @discardableResult
    public func collectTombstones(_ category: StoreCategory, throughSeq seq: Int64) throws -> Int {
        try writing { change in try change.collect(category, throughSeq: seq) }
    }

    /// Runs `body` in one write transaction with the store's sync state (``StoreChange``), saved at its end.
    func writing<T>(_ body: (inout StoreChange) throws -> T) throws -> T {
        try write { transaction in
            var change = try StoreChange(transaction, writer: writer, now: clock.now)
            let result = try body(&change)
            try change.save()
            return result
        }
    }

    /// Runs `body` in one transaction on the store's current file, holding the store's lock shared (``StoreFile``):
    /// an import cannot move a new store into place between finding the file and committing to it.
    func write<T>(_ body: (any SQLTransaction) throws -> T) throws -> T {
        do {
            switch backing {
            case .memory(let database): return try database.transaction(body)
            case .file(let file): return try file.withLock(exclusive: false) { try file.database().transaction(body) }
            }
        } catch let error as StorageError {
            throw DeviceStoreError.unusable("the device store could not be written: \(error.reason)")
        }
    }

    // MARK: reading

    /// The row `id` of `category`, tombstone or not; nil if this store never had it (or collected its tombstone).
    public func row(_ category: StoreCategory, id: String) throws -> StoreRow? {
        try reading { try Self.stored(category, id: id, in: try database)?.row }
    }

    /// Every row of `category` in the order they were first written; tombstones only when asked for.
    public func rows(_ category: StoreCategory, includingDeleted: Bool = false) throws -> [StoreRow] {
        try reading {
            try (try database).query(
                "SELECT * FROM \(category.table)\(includingDeleted ? "" : " WHERE deleted = 0") ORDER BY rowid", []
            ).map { try Self.decode($0, category) }
        }
    }

    /// The live contact whose userIDHash is `userIDHash`, if any.
    public func contact(userIDHash: Data) throws -> StoreRow? {
        try reading {
            try (try database).queryOne(
                "SELECT * FROM contacts WHERE user_id_hash = ? AND deleted = 0", [.blob(userIDHash)]
            ).map { try Self.decode($0, .contacts) }
        }
    }

    /// ChannelKeys over this store's contacts: a frame from a contact is checked under the channel key in their
    /// row, found by userIDHash (000_e422bd9a7c930342.txt, ChannelKeys.resolve).
    public func channelKeys(ownUserIDHash: Data, accountSeed: Data?) throws -> ChannelKeys {
        try ChannelKeys(ownUserIDHash: ownUserIDHash, accountSeed: accountSeed) { [self] hash in
            try contact(userIDHash: hash)?["channel_key"]?.blob.map { SymmetricKey(data: $0) }
        }
    }

    func reading<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as StorageError {
            throw DeviceStoreError.unusable("the device store could not be read: \(error.reason)")
        }
    }

    /// A row as stored, with its item (nil until the store has an item key).
    struct Stored {
        let row: StoreRow
        let item: SyncItem?
    }

    static func stored(_ category: StoreCategory, id: String, in database: any SQLQuerying) throws -> Stored? {
        try database.queryOne("SELECT * FROM \(category.table) WHERE \(category.idColumn) = ?", [.text(id)]).map {
            Stored(
                row: try decode($0, category),
                item: try $0.optionalData("item").flatMap { try? SyncItem(rawRepresentation: $0) })
        }
    }

    static func liveContact(userIDHash: StoreValue, other id: String, in database: any SQLQuerying) throws -> Stored? {
        guard
            let id = try database.queryOne(
                "SELECT id FROM contacts WHERE user_id_hash = ? AND deleted = 0 AND id <> ?",
                [sql(userIDHash), .text(id)])
        else { return nil }
        return try stored(.contacts, id: try id.string("id"), in: database)
    }

    static func decode(_ row: SQLRow, _ category: StoreCategory) throws -> StoreRow {
        let isDeleted = try row.bool("deleted")
        var fields: [String: StoreValue] = [:]
        if !isDeleted {
            for column in category.columns {
                switch column.kind {
                case .text: fields[column.name] = .text(try row.string(column.name))
                case .integer: fields[column.name] = .integer(try row.int64(column.name))
                case .blob: fields[column.name] = .blob(try row.data(column.name))
                }
            }
        }
        let author = try row.data("author")
        return StoreRow(
            category: category, id: try row.string(category.idColumn),
            version: RowVersion(
                hlc: UInt64(bitPattern: try row.int64("hlc")),
                author: AuthorTag(rawValue: author.reduce(0) { $0 << 8 | UInt64($1) })),
            isDeleted: isDeleted, fields: fields)
    }
    // MARK: snapshots

    /// The store's size on disk (its file and write-ahead log): about what a snapshot of it holds, for progress.
    public var byteCount: UInt64 {
        guard case .file(let file) = backing, let path = try? StoreFile.target(of: file.link) else { return 0 }
        return [path, path + "-wal"].reduce(0) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? UInt64) ?? 0)
        }
    }

    /// Calls `body` with every row of `categories`, tombstones included, category by category in the order given
    /// and each in the order its rows were first written, all from one consistent view of the store (the seed's
    /// photograph: writes made meanwhile are not in it, and are not blocked). Rows are read one at a time as SQLite
    /// steps to them, so a store of any size, and of rows of any size, is never whole in memory.
    func forEachRow(of categories: [StoreCategory], _ body: (StoreRow) throws -> Void) throws {
        do {
            try (try database).readTransaction { reads in
                for category in categories {
                    try reads.forEachRow("SELECT * FROM \(category.table) ORDER BY rowid", []) { row in
                        try body(try Self.decode(row, category))
                    }
                }
            }
        } catch let error as StorageError {
            throw DeviceStoreError.unusable("the device store could not be read: \(error.reason)")
        }
    }

    // MARK: checks

    static func check(id: String) throws {
        guard (1...128).contains(id.utf8.count),
            id.unicodeScalars.allSatisfy({ !$0.properties.isWhitespace && !(0..<0x20).contains($0.value) })
        else {
            throw DeviceStoreError.invalid("a row id must be 1 to 128 bytes with no spaces or control characters")
        }
    }

    static func check(_ fields: [String: StoreValue], for category: StoreCategory) throws {
        let columns = category.columns
        if let unknown = fields.keys.sorted().first(where: { name in !columns.contains { $0.name == name } }) {
            throw DeviceStoreError.invalid(
                "\(category.rawValue) has no field \(unknown); its fields are "
                    + columns.map(\.name).joined(separator: ", "))
        }
        for column in columns {
            guard let value = fields[column.name] else {
                throw DeviceStoreError.invalid("\(category.rawValue) needs the field \(column.name)")
            }
            guard value.kind == column.kind else {
                throw DeviceStoreError.invalid(
                    "\(category.rawValue).\(column.name) is \(column.kind.rawValue), not \(value.kind.rawValue)")
            }
            if let byteCount = column.byteCount, let blob = value.blob, blob.count != byteCount {
                throw DeviceStoreError.invalid(
                    "\(category.rawValue).\(column.name) must be \(byteCount) bytes, not \(blob.count)")
            }
        }
    }

    static func sql(_ value: StoreValue) -> SQLValue {
        switch value {
        case .text(let text): .text(text)
        case .integer(let integer): .integer(integer)
        case .blob(let blob): .blob(blob)
        }
    }
}

/// What goes wrong with the ``DeviceStore``, with what to do.
public enum DeviceStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The row's id or fields do not fit the category's schema.
    case invalid(String)
    /// No such row.
    case notFound(String)
    /// The write would contradict a row already there.
    case conflict(String)
    /// The file cannot be opened, read or written.
    case unusable(String)

    public var description: String {
        switch self {
        case .invalid(let reason), .notFound(let reason), .conflict(let reason), .unusable(let reason): reason
        }
    }
}
