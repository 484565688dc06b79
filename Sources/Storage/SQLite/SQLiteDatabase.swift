import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The embedded ``SQLDatabase``: one SQLite file in WAL mode, for pixie-server's `--data-dir`.
///
/// **Connections.** One writer connection behind a `Synchronization.Mutex` takes every write and every
/// transaction, so writes never fail with "database is locked" inside the process. Reads that are not in a
/// transaction go to a pool of read-only connections: WAL lets them read the last committed state while the
/// writer writes, so reads do not wait behind writes. The pool opens a reader when none is idle (it never
/// waits) and keeps up to `readers` idle ones. Each connection is used by one thread at a time (the writer
/// under its lock, a reader while checked out), so connections are opened `SQLITE_OPEN_NOMUTEX`, not
/// `SQLITE_OPEN_FULLMUTEX`.
///
/// **Settings.** `journal_mode=WAL`, `synchronous=NORMAL` (a commit survives a process crash; a power cut
/// may lose the last commits but never corrupts), `foreign_keys=ON`, and a busy timeout for other processes.
///
/// **In memory.** ``inMemory()`` is a private database for tests: one connection for everything (readers
/// could not see a private in-memory database), journal mode `memory` instead of WAL.
public final class SQLiteDatabase: SQLDatabase {
    /// The database file, or nil for an in-memory database.
    public let path: String?
    private let writer: Mutex<SQLiteConnection?>
    private let readers: Mutex<ReaderPool>
    /// The thread that holds the writer lock (0 if none), to refuse nested use instead of deadlocking.
    private let writerThread = Atomic<UInt>(0)
    private let idleReaderLimit: Int
    private let busyTimeoutMilliseconds: Int32
    /// True when every statement runs on the one writer connection (in memory, or a bulk load).
    private let isSingleConnection: Bool

    private struct ReaderPool {
        var idle: [SQLiteConnection] = []
        var isClosed = false
    }

    /// Opens (creating if needed) the database file at `path`, and its parent directory.
    ///
    /// - Parameters:
    ///   - readers: how many idle read connections to keep (more open while many reads run at once).
    ///   - busyTimeout: how long to wait for a lock held by another process before throwing `.busy`.
    ///   - createIfMissing: false to open only a file that exists (one another process may have removed meanwhile
    ///     must not come back empty); it then throws ``StorageError/Code/open`` for a missing file.
    /// - Throws: ``StorageError/Code/open`` if the directory cannot be created, the file cannot be opened, or it is
    ///   not a SQLite database.
    public init(
        path: String, readers: Int = 4, busyTimeout: Duration = .seconds(5), createIfMissing: Bool = true
    ) throws {
        // SQLite reads "" as a private temporary database and ":memory:" as a private in-memory one; readers
        // opening the same name would each get a database of their own.
        guard !path.isEmpty, path != ":memory:" else {
            throw StorageError(
                .open, "the database path is empty or \"\(path)\": give a file path, or use SQLiteDatabase.inMemory()")
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw StorageError(
                .open,
                "cannot create the directory \(directory.path) for the database \(path): "
                    + "\(error.localizedDescription). Check the --data-dir path and its permissions")
        }
        let timeout = Self.milliseconds(busyTimeout)
        let connection = try SQLiteConnection(
            path: path, location: path, readOnly: false, create: createIfMissing, busyTimeoutMilliseconds: timeout)
        try Self.configureWriter(connection, expectWAL: true)
        self.path = path
        self.writer = Mutex(connection)
        self.readers = Mutex(ReaderPool())
        self.idleReaderLimit = max(0, readers)
        self.busyTimeoutMilliseconds = timeout
        self.isSingleConnection = false
    }

    private init(singleConnection connection: SQLiteConnection, path: String?) {
        self.path = path
        self.writer = Mutex(connection)
        self.readers = Mutex(ReaderPool())
        self.idleReaderLimit = 0
        self.busyTimeoutMilliseconds = 0
        self.isSingleConnection = true
    }

    /// A new, empty, private in-memory database (for tests); it is gone when the last reference goes.
    public static func inMemory() throws -> SQLiteDatabase {
        let connection = try SQLiteConnection(
            path: ":memory:", location: "(in memory)", readOnly: false, busyTimeoutMilliseconds: 0)
        try configureWriter(connection, expectWAL: false)
        return SQLiteDatabase(singleConnection: connection, path: nil)
    }

    /// A database for one bulk load into the new, empty file at `path` (created if absent; its mode is the
    /// caller's to set first): one connection holding the file's lock for its whole life, `journal_mode=OFF` and
    /// `synchronous=OFF`, so each page is written once, to the file itself, and nothing is synced until
    /// ``closeDurably()``. A failure or a crash part-way leaves the file damaged: it is only for a file nobody else
    /// reads until it is whole, to be thrown away if the load fails (SQLite's own advice for bulk loads,
    /// <https://sqlite.org/pragma.html#pragma_journal_mode>). Do not roll back a transaction on it: with no journal,
    /// SQLite cannot; discard the file instead.
    ///
    /// - Parameter busyTimeout: how long a statement on a database attached to it waits for another process's lock.
    /// - Throws: ``StorageError/Code/open`` if the file holds anything already, or cannot be opened.
    public static func bulkLoading(newFileAt path: String, busyTimeout: Duration = .seconds(5)) throws -> SQLiteDatabase
    {
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? UInt64) ?? 0
        guard size == 0 else {
            throw StorageError(
                .open, "\(path) is not empty: a bulk load writes a new file only; remove it or choose another name")
        }
        let connection = try SQLiteConnection(
            path: path, location: path, readOnly: false, busyTimeoutMilliseconds: milliseconds(busyTimeout))
        // The first statement reads the file; "off" is echoed back. `main.`: a database attached later (to merge
        // from it) keeps the usual locking and journal.
        _ = try connection.run("PRAGMA main.journal_mode = OFF", [])
        _ = try connection.execute("PRAGMA main.synchronous = OFF", [])
        _ = try connection.run("PRAGMA main.locking_mode = EXCLUSIVE", [])
        _ = try connection.execute("PRAGMA foreign_keys = ON", [])
        return SQLiteDatabase(singleConnection: connection, path: path)
    }

    /// Closes the database and then flushes its file to the disk (`fsync(2)`): after a bulk load, before the file is
    /// moved into place, so that the move never points at pages still in memory.
    public func closeDurably() throws {
        close()
        guard let path else { return }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw StorageError(.open, "cannot open \(path) to sync it: \(String(cString: strerror(errno)))")
        }
        defer { closeDescriptor(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw StorageError(
                .query, "cannot sync \(path) to the disk: \(String(cString: strerror(errno))) (is the disk full?)")
        }
    }

    private static func configureWriter(_ connection: SQLiteConnection, expectWAL: Bool) throws(StorageError) {
        // The first statement reads the file: a file that is not a database fails here with SQLITE_NOTADB.
        let mode = try connection.run("PRAGMA journal_mode = WAL", []).first?.optionalString("journal_mode")
        if expectWAL && mode?.lowercased() != "wal" {
            throw StorageError(
                .open,
                "\(connection.location) did not switch to WAL mode (journal_mode is \(mode ?? "unknown")): the "
                    + "file system may not support the shared memory WAL needs; put --data-dir on a local disk")
        }
        _ = try connection.execute("PRAGMA synchronous = NORMAL", [])
        _ = try connection.execute("PRAGMA foreign_keys = ON", [])
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return Int32(clamping: max(0, milliseconds))
    }

    /// Closes every connection. Calls that are running finish; later calls throw ``StorageError/Code/closed``.
    /// Dropping the last reference closes the database too.
    public func close() {
        writer.withLock { $0 = nil }
        readers.withLock { pool in
            pool.isClosed = true
            pool.idle.removeAll()
        }
    }

    // MARK: SQLQuerying

    @discardableResult
    public func execute(_ sql: String, _ params: [SQLValue]) throws -> Int {
        try withWriter { try $0.execute(sql, params) }
    }

    public func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow] {
        try read(sql, params, limit: .max)
    }

    public func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow? {
        try read(sql, params, limit: 1).first
    }

    /// A read on a reader connection; a statement that writes (`INSERT ... RETURNING`) goes to the writer.
    private func read(_ sql: String, _ params: [SQLValue], limit: Int) throws -> [SQLRow] {
        let rows = try withReader { connection throws(StorageError) -> [SQLRow]? in
            let statement = try connection.statement(sql)
            guard statement.isReadOnly else { return nil }
            return try connection.run(statement, sql, params, limit: limit)
        }
        if let rows { return rows }
        return try withWriter { try $0.run(sql, params, limit: limit) }
    }

    // MARK: SQLDatabase

    @discardableResult
    public func transaction<T>(_ body: (any SQLTransaction) throws -> T) throws -> T {
        try withWriter { connection in
            try connection.executeScript("BEGIN IMMEDIATE")
            let transaction = SQLiteTransaction(connection)
            defer { transaction.end() }
            do {
                let result = try body(transaction)
                transaction.end()
                try connection.executeScript("COMMIT")
                return result
            } catch {
                // SQLite has already rolled back after some errors (SQLITE_FULL, SQLITE_IOERR, ...).
                if connection.isInTransaction { try? connection.executeScript("ROLLBACK") }
                throw error
            }
        }
    }

    /// ``transaction(_:)``: `BEGIN IMMEDIATE` holds SQLite's one write lock, which every process on the file shares.
    @discardableResult
    public func transaction<T>(exclusive name: String, _ body: (any SQLTransaction) throws -> T) throws -> T {
        try transaction(body)
    }

    public func readTransaction<T>(_ body: (any SQLQuerying) throws -> T) throws -> T {
        try withReader { connection in
            // A deferred transaction's view is fixed by its first read and kept until it ends.
            try connection.executeScript("BEGIN DEFERRED")
            let transaction = SQLiteTransaction(connection)
            defer {
                transaction.end()
                if connection.isInTransaction { try? connection.executeScript("ROLLBACK") }
            }
            return try body(transaction)
        }
    }

    // MARK: Connections

    private func withWriter<R>(_ body: (SQLiteConnection) throws -> R) throws -> R {
        let thread = currentThread()
        try refuseNested(thread)
        var result: Result<R, any Error>?
        writer.withLock { connection in
            guard let connection else {
                result = .failure(closedError())
                return
            }
            writerThread.store(thread, ordering: .releasing)
            defer { writerThread.store(0, ordering: .releasing) }
            result = Result { try body(connection) }
        }
        return try result!.get()
    }

    private func withReader<R>(_ body: (SQLiteConnection) throws -> R) throws -> R {
        guard let path, !isSingleConnection else { return try withWriter(body) }
        try refuseNested(currentThread())
        let idle = try readers.withLock { pool throws(StorageError) -> SQLiteConnection? in
            guard !pool.isClosed else { throw closedError() }
            return pool.idle.popLast()
        }
        let connection = try idle ?? openReader(path)
        defer {
            readers.withLock { pool in
                if !pool.isClosed && pool.idle.count < idleReaderLimit { pool.idle.append(connection) }
            }
        }
        return try body(connection)
    }

    private func openReader(_ path: String) throws(StorageError) -> SQLiteConnection {
        try SQLiteConnection(
            path: path, location: path, readOnly: true, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
    }

    private func refuseNested(_ thread: UInt) throws(StorageError) {
        guard writerThread.load(ordering: .acquiring) != thread else {
            throw StorageError(
                .nestedTransaction,
                "the database was used inside one of its own transaction bodies, which would deadlock: inside "
                    + "transaction { tx in ... } run statements on tx, and do not start another transaction")
        }
    }

    private func closedError() -> StorageError {
        StorageError(
            .closed, "the database \(path ?? "(in memory)") was closed: open it again, or stop using it after close()")
    }
}

/// The transaction ``SQLiteDatabase/transaction(_:)`` passes to its body: the writer connection, valid until
/// the body returns.
final class SQLiteTransaction: SQLTransaction {
    private var connection: SQLiteConnection?

    init(_ connection: SQLiteConnection) { self.connection = connection }

    func end() { connection = nil }

    private func open() throws(StorageError) -> SQLiteConnection {
        guard let connection else {
            throw StorageError(
                .closed,
                "the transaction was used after its body returned: run its statements inside transaction { tx in ... }")
        }
        return connection
    }

    @discardableResult
    func execute(_ sql: String, _ params: [SQLValue]) throws -> Int {
        try open().execute(sql, params)
    }

    func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow] {
        try open().run(sql, params)
    }

    func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow? {
        try open().run(sql, params, limit: 1).first
    }

    func forEachRow(_ sql: String, _ params: [SQLValue], _ body: (SQLRow) throws -> Void) throws {
        try open().each(sql, params, body)
    }

    func executeScript(_ sql: String) throws {
        try open().executeScript(sql)
    }
}

/// close(2), which the class's own `close()` hides inside it.
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}

/// An identifier of the calling thread, unique among live threads (each backend's check for nested use).
package func currentThread() -> UInt {
    #if os(Linux)
        UInt(pthread_self())
    #else
        UInt(bitPattern: pthread_self())
    #endif
}
