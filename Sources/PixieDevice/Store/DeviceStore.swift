import Foundation
import PrivateFiles
import SiblingsCrypto
import Storage

/// The device's store (000_e422bd9a7c930342.txt, "What do I know?"): one SQLite file, `store.sqlite`, in the
/// device's home, with one table per ``StoreCategory``. It holds the account's data as this device knows it: the
/// fold of every change, not a log of them (the seed: "the snapshot is the log's fold, and the fold is all that was
/// ever kept").
///
/// Every row has an id, a version and a tombstone flag. ``put(_:id:fields:)`` writes version 1, and one more on
/// every change; ``delete(_:id:)`` leaves a tombstone (the next version, with no fields), so a deletion is a row
/// the reconcile loop can ship like any other. Fields are checked against the category's ``StoreCategory/columns``
/// before anything is written: unknown, missing or mistyped fields, keys of the wrong length, and a second live
/// contact with the same userIDHash (it would make the channel key ambiguous) are refused with the reason.
///
/// The file is created mode 0600 (SQLite gives its `-wal` and `-shm` files the same mode) in the home's 0700
/// directory: it holds provider API keys and every contact's channel key.
public final class DeviceStore: Sendable {
    let backing: Backing
    /// `store.sqlite` (the name every reader opens; after an import, a link to the store's current file), or nil
    /// for a store in memory.
    public let path: String?

    enum Backing: Sendable {
        case memory(SQLiteDatabase)
        case file(StoreFile)
    }

    /// The store's name in a device's home.
    static let fileName = "store.sqlite"

    /// Opens (creating it if needed) `store.sqlite` in `home`.
    public convenience init(home: DeviceHome) throws {
        try self.init(file: home.directory.appendingPathComponent(Self.fileName))
    }

    init(file: URL) throws {
        self.backing = .file(try StoreFile(link: file))
        self.path = file.path
    }

    /// An empty store in memory, for tests.
    @_spi(Testing) public init() throws {
        let database = try SQLiteDatabase.inMemory()
        try Self.migrate(database)
        self.backing = .memory(database)
        self.path = nil
    }

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
    /// tombstone, so a deletion keeps no content. Add a migration for a new field; never edit this one.
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
        return [Migration(version: 1, sql: (tables + [index]).joined(separator: "\n"))]
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

    /// Writes the row `id` of `category` with `fields` (every field of the category, and no other): version 1 for a
    /// new id, the next version for an existing one (a tombstone comes back to life). A nil `id` makes a fresh
    /// random one. Returns the row as stored.
    @discardableResult
    public func put(_ category: StoreCategory, id: String? = nil, fields: [String: StoreValue]) throws -> StoreRow {
        let id = id ?? UUID().uuidString.lowercased()
        try Self.check(id: id)
        try Self.check(fields, for: category)
        return try write {
            if category == .contacts, let hash = fields["user_id_hash"] {
                let holder = try $0.queryOne(
                    "SELECT id FROM contacts WHERE user_id_hash = ? AND deleted = 0 AND id <> ?",
                    [Self.sql(hash), .text(id)])
                if let holder {
                    throw DeviceStoreError.conflict(
                        "the contact \(try holder.string("id")) has this user id hash already: two contacts with one "
                            + "hash would make its channel key ambiguous; change that contact instead")
                }
            }
            if category == .messages, let conversation = fields["conversation_id"]?.text {
                guard try Self.live(.conversations, id: conversation, in: $0) != nil else {
                    throw DeviceStoreError.notFound(
                        "there is no conversation \(conversation); add it first (`pixie store add conversations`)")
                }
            }
            let version = (try Self.read(category, id: id, in: $0)?.version ?? 0) + 1
            let names = [category.idColumn, "version", "deleted"] + category.columns.map(\.name)
            let values: [SQLValue] =
                [.text(id), .integer(version), .integer(0)] + category.columns.map { Self.sql(fields[$0.name]!) }
            let updates = names.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
            try $0.execute(
                """
                INSERT INTO \(category.table) (\(names.joined(separator: ", "))) \
                VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", "))) \
                ON CONFLICT (\(category.idColumn)) DO UPDATE SET \(updates)
                """, values)
            return StoreRow(category: category, id: id, version: version, isDeleted: false, fields: fields)
        }
    }

    /// Deletes the row `id`: it becomes a tombstone (the next version, no fields). Throws if there is no such
    /// live row. Deleting a conversation deletes its messages too.
    @discardableResult
    public func delete(_ category: StoreCategory, id: String) throws -> StoreRow {
        try write {
            guard let row = try Self.live(category, id: id, in: $0) else {
                throw DeviceStoreError.notFound("there is no \(category.rawValue) row \(id) to delete")
            }
            if category == .conversations {
                for message in try $0.query(
                    "SELECT id FROM messages WHERE conversation_id = ? AND deleted = 0", [.text(id)])
                {
                    try Self.tombstone(.messages, id: try message.string("id"), in: $0)
                }
            }
            return try Self.tombstone(category, id: id, version: row.version + 1, in: $0)
        }
    }

    @discardableResult
    private static func tombstone(
        _ category: StoreCategory, id: String, version: Int64? = nil, in transaction: any SQLTransaction
    ) throws -> StoreRow {
        let version = try version ?? ((try read(category, id: id, in: transaction)?.version ?? 0) + 1)
        let blanks = category.columns.map { "\($0.name) = NULL" }.joined(separator: ", ")
        try transaction.execute(
            "UPDATE \(category.table) SET version = ?, deleted = 1, \(blanks) WHERE \(category.idColumn) = ?",
            [.integer(version), .text(id)])
        return StoreRow(category: category, id: id, version: version, isDeleted: true, fields: [:])
    }

    /// Runs `body` in one transaction on the store's current file, holding the store's lock shared (``StoreFile``):
    /// an import cannot move a new store into place between finding the file and committing to it.
    private func write<T>(_ body: (any SQLTransaction) throws -> T) throws -> T {
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

    /// The row `id` of `category`, tombstone or not; nil if this store never had it.
    public func row(_ category: StoreCategory, id: String) throws -> StoreRow? {
        try reading { try Self.read(category, id: id, in: try database) }
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

    private func reading<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as StorageError {
            throw DeviceStoreError.unusable("the device store could not be read: \(error.reason)")
        }
    }

    private static func read(_ category: StoreCategory, id: String, in database: any SQLQuerying) throws -> StoreRow? {
        try database.queryOne("SELECT * FROM \(category.table) WHERE \(category.idColumn) = ?", [.text(id)]).map {
            try decode($0, category)
        }
    }

    private static func live(_ category: StoreCategory, id: String, in database: any SQLQuerying) throws -> StoreRow? {
        try read(category, id: id, in: database).flatMap { $0.isDeleted ? nil : $0 }
    }

    private static func decode(_ row: SQLRow, _ category: StoreCategory) throws -> StoreRow {
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
        return StoreRow(
            category: category, id: try row.string(category.idColumn), version: try row.int64("version"),
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
