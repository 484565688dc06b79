import Dispatch
import Foundation
import Storage
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The ``SQLDatabase`` for several pixie-server nodes: a PostgreSQL server reached through libpq
/// (`--database postgres://user@host:5432/pixie`; docs/storage.md, "PostgreSQL").
///
/// **Transactions are SERIALIZABLE.** The services were written against SQLite's single writer, where a
/// transaction that reads `used_at` and then sets it cannot interleave with another. PostgreSQL's default, READ
/// COMMITTED, would let two such transactions both read NULL and both redeem; SERIALIZABLE makes one of them
/// fail with a serialization failure (SQLSTATE 40001) or a deadlock (40P01) instead. ``transaction(_:)`` then
/// rolls back and runs the body again, after a short random wait, up to ``Configuration/attempts`` times; past
/// that it throws ``StorageError/Code/conflict``. So a body may run more than once: it must only touch the
/// database (no network, no files, nothing counted outside), which is what ``SQLDatabase`` asks of it already.
///
/// **A failed statement ends the transaction.** In PostgreSQL a statement that fails inside a transaction aborts
/// it: every later statement fails, and COMMIT rolls back. A body that catches such an error and returns
/// normally would lose its writes silently; here the transaction throws instead (the statement's own error,
/// rethrown), so nothing is ever reported committed that was not.
///
/// **Connections** are pooled: up to ``Configuration/maximumConnections`` open at once, idle ones kept and
/// checked before reuse (a server restart leaves them closed, and they are replaced). A call that finds every
/// connection busy waits up to ``Configuration/acquireTimeout`` and then throws ``StorageError/Code/busy``; a
/// server that cannot be reached gives ``StorageError/Code/unavailable``.
///
/// Statements outside a transaction run on their own (autocommit); each is atomic. Reads through
/// ``readTransaction(_:)`` share one REPEATABLE READ snapshot.
public final class PostgreSQLDatabase: SQLDatabase {
    public struct Configuration: Sendable, Equatable {
        /// Connections open at most (PostgreSQL's own `max_connections` is 100 by default, shared by every node).
        public var maximumConnections = 16
        /// How long a call waits for a free connection before ``StorageError/Code/busy``.
        public var acquireTimeout: Duration = .seconds(5)
        /// How many times a transaction runs before a serialization failure is thrown as ``StorageError/Code/conflict``.
        public var attempts = 12

        public init() {}
    }

    /// The URL without its password, for messages and logs.
    public let location: String
    public let configuration: Configuration
    private let url: String
    private let idle = Mutex<[PostgreSQLConnection]>([])
    private let permits: DispatchSemaphore
    private let closed = Atomic(false)
    /// Threads running a transaction body, to refuse nested use instead of deadlocking on the pool or a lock.
    private let inBody = Mutex<Set<UInt>>([])

    /// Connects to the database at `url` (`postgres://` or `postgresql://`, libpq's connection URI) and keeps that
    /// first connection for the pool.
    ///
    /// - Throws: ``StorageError/Code/open`` for a URL that is not one, ``StorageError/Code/unavailable`` when the
    ///   server cannot be reached or refuses the login.
    public init(url: String, configuration: Configuration = Configuration()) throws {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme)
        else {
            throw StorageError(
                .open,
                "\(ConnectionURL.redacted(url)) is not a PostgreSQL URL: give "
                    + "postgres://user[:password]@host[:port]/database")
        }
        // Messages and logs show it with its password masked (the URL as given is kept only to connect).
        self.location = ConnectionURL.redacted(url)
        self.url = url
        self.configuration = configuration
        self.permits = DispatchSemaphore(value: max(1, configuration.maximumConnections))
        let first = try PostgreSQLConnection(url: url, location: location)
        idle.withLock { $0.append(first) }
    }

    /// Closes the idle connections; later calls throw ``StorageError/Code/closed``. Calls that are running finish.
    public func close() {
        closed.store(true, ordering: .releasing)
        idle.withLock { $0.removeAll() }
    }

    // MARK: SQLQuerying

    @discardableResult
    public func execute(_ sql: String, _ params: [SQLValue]) throws -> Int {
        try withConnection { try $0.run(sql, params).changed }
    }

    public func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow] {
        try withConnection { try $0.run(sql, params).rows }
    }

    public func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow? {
        try query(sql, params).first
    }

    // MARK: SQLDatabase

    @discardableResult
    public func transaction<T>(_ body: (any SQLTransaction) throws -> T) throws -> T {
        try transaction(begin: "BEGIN ISOLATION LEVEL SERIALIZABLE", body)
    }

    public func readTransaction<T>(_ body: (any SQLQuerying) throws -> T) throws -> T {
        try transaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", body)
    }

    /// READ COMMITTED under `pg_advisory_xact_lock`, keyed by the FNV-1a hash of `name`: the statements after the
    /// lock see what its previous holder committed (at SERIALIZABLE the snapshot would be taken as the lock is
    /// asked for, before the wait).
    @discardableResult
    public func transaction<T>(exclusive name: String, _ body: (any SQLTransaction) throws -> T) throws -> T {
        try transaction(begin: "BEGIN ISOLATION LEVEL READ COMMITTED") { transaction in
            _ = try transaction.query("SELECT pg_advisory_xact_lock(?) AS locked", [.integer(Self.lockKey(name))])
            return try body(transaction)
        }
    }

    /// The advisory lock key of `name`: its FNV-1a 64-bit hash.
    static func lockKey(_ name: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    // MARK: Transactions

    private func transaction<T>(begin: String, _ body: (PostgreSQLTransaction) throws -> T) throws -> T {
        try refuseNested()
        var attempt = 1
        while true {
            do {
                return try withConnection { connection in
                    try connection.executeScript(begin)
                    let transaction = PostgreSQLTransaction(connection)
                    let thread = currentThread()
                    inBody.withLock { _ = $0.insert(thread) }
                    defer {
                        inBody.withLock { _ = $0.remove(thread) }
                        transaction.end()
                    }
                    let result: T
                    do {
                        result = try body(transaction)
                    } catch {
                        try? connection.executeScript("ROLLBACK")
                        // The statement that failed decides: a serialization failure the body wrapped in an error
                        // of its own is still one.
                        if let failure = transaction.failure, failure.code == .conflict { throw failure }
                        throw error
                    }
                    if let failure = transaction.failure {
                        try? connection.executeScript("ROLLBACK")
                        throw failure
                    }
                    transaction.end()
                    try connection.executeScript("COMMIT")
                    return result
                }
            } catch let error as StorageError where error.code == .conflict && attempt < configuration.attempts {
                // A random wait that grows, so that the transactions that collided do not collide again.
                let ceiling = min(50_000, 500 << min(attempt, 7))
                usleep(UInt32.random(in: 100...UInt32(ceiling)))
                attempt += 1
            } catch let error as StorageError where error.code == .conflict {
                throw StorageError(
                    .conflict,
                    "the transaction collided with concurrent ones \(attempt) times in a row, so it was given up: "
                        + "\(error.reason). Try again")
            }
        }
    }

    // MARK: Connections

    private func withConnection<R>(_ body: (PostgreSQLConnection) throws -> R) throws -> R {
        try refuseNested()
        guard !closed.load(ordering: .acquiring) else { throw closedError() }
        let (seconds, attoseconds) = configuration.acquireTimeout.components
        let deadline =
            DispatchTime.now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        guard permits.wait(timeout: deadline) == .success else {
            throw StorageError(
                .busy,
                "every one of the \(configuration.maximumConnections) connections to \(location) stayed busy for "
                    + "\(configuration.acquireTimeout): raise the pool size, or look for slow queries")
        }
        defer { permits.signal() }
        let connection = try takeConnection()
        defer {
            if !connection.isBroken, !closed.load(ordering: .acquiring) { idle.withLock { $0.append(connection) } }
        }
        return try body(connection)
    }

    /// An idle connection that is still good, or a new one.
    private func takeConnection() throws -> PostgreSQLConnection {
        while let connection = idle.withLock({ $0.popLast() }) {
            if connection.isUsable { return connection }
        }
        return try PostgreSQLConnection(url: url, location: location)
    }

    private func refuseNested() throws(StorageError) {
        let thread = currentThread()
        guard !inBody.withLock({ $0.contains(thread) }) else {
            throw StorageError(
                .nestedTransaction,
                "the database was used inside one of its own transaction bodies, which would deadlock: inside "
                    + "transaction { tx in ... } run statements on tx, and do not start another transaction")
        }
    }

    private func closedError() -> StorageError {
        StorageError(.closed, "the database \(location) was closed: open it again, or stop using it after close()")
    }
}

/// The transaction ``PostgreSQLDatabase`` passes to a body: its connection, valid until the body returns. It keeps
/// the first statement that failed, since PostgreSQL has aborted the transaction from then on.
final class PostgreSQLTransaction: SQLTransaction {
    private var connection: PostgreSQLConnection?
    private(set) var failure: StorageError?

    init(_ connection: PostgreSQLConnection) { self.connection = connection }

    func end() { connection = nil }

    private func run<R>(_ body: (PostgreSQLConnection) throws(StorageError) -> R) throws(StorageError) -> R {
        guard let connection else {
            throw StorageError(
                .closed,
                "the transaction was used after its body returned: run its statements inside transaction { tx in ... }")
        }
        if let failure {
            throw StorageError(
                failure.code,
                "an earlier statement of this transaction failed, so PostgreSQL aborted it: \(failure.reason)")
        }
        do {
            return try body(connection)
        } catch {
            failure = error
            throw error
        }
    }

    @discardableResult
    func execute(_ sql: String, _ params: [SQLValue]) throws -> Int {
        try run { connection throws(StorageError) in try connection.run(sql, params).changed }
    }

    func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow] {
        try run { connection throws(StorageError) in try connection.run(sql, params).rows }
    }

    func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow? { try query(sql, params).first }

    func executeScript(_ sql: String) throws {
        try run { connection throws(StorageError) in try connection.executeScript(sql) }
    }
}
