import Foundation
import SiblingsTestSupport
import Storage
import StoragePostgreSQL
import Testing

/// What the PostgreSQL backend must do beyond the statements both backends share (StatementTests): our SQL's
/// SQLite spellings, typed columns, SERIALIZABLE transactions that are run again, a transaction that a failed
/// statement ended, and connections the server dropped.
@Suite("PostgreSQL behind SQLDatabase")
struct PostgreSQLTests {
    @Test(
        "? outside literals, BLOB, INTEGER and REAL are rewritten; a ? in a string, an identifier or a comment is not")
    func dialect() throws {
        let db = try TestDatabase.postgres.make()
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, blob_kind TEXT, data BLOB, at INTEGER NOT NULL)")
        // INTEGER is 64 bits, as in SQLite: Unix milliseconds fit.
        try db.execute(
            "INSERT INTO t (id, blob_kind, data, at) VALUES (?, '?', ?, ?) -- a comment with a ?",
            [1, .blob(Data([0, 1, 255])), .integer(1 << 41)])
        let row = try #require(try db.queryOne(#"SELECT id, blob_kind AS "is it?", data, at FROM t WHERE id = ?"#, [1]))
        #expect(try row.int64("id") == 1)
        #expect(try row.string("is it?") == "?")
        #expect(try row.data("data") == Data([0, 1, 255]))
        #expect(try row.int64("at") == 1 << 41)
    }

    @Test(
        "every value type round-trips through a column of its type",
        arguments: [
            ("BIGINT", SQLValue.integer(0)), ("BIGINT", .integer(.max)), ("BIGINT", .integer(.min)),
            ("DOUBLE PRECISION", .real(1.5)), ("DOUBLE PRECISION", .real(-0.25)), ("REAL", .real(0.1)),
            ("REAL", .real(1.0 / 3)),
            ("TEXT", .text("")), ("TEXT", .text("héllo ✓ '\"")), ("BLOB", .blob(Data())),
            ("BLOB", .blob(Data([0, 1, 2, 255]))), ("BLOB", .blob(Data(repeating: 7, count: 100_000))),
            ("TEXT", .null), ("BLOB", .null),
        ])
    func roundTrip(type: String, value: SQLValue) throws {
        let db = try TestDatabase.postgres.make()
        try db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v \(type))")
        try db.execute("INSERT INTO t (id, v) VALUES (1, ?)", [value])
        let row = try #require(try db.queryOne("SELECT v FROM t WHERE id = 1"))
        // REAL too: it is rewritten to DOUBLE PRECISION, 8 bytes as in SQLite, not PostgreSQL's 4.
        #expect(row["v"] == value)
    }

    @Test("aggregates read as integers: count(*) is a bigint, sum of a bigint a numeric, a boolean 0 or 1")
    func aggregates() throws {
        let db = try TestDatabase.postgres.make()
        try db.execute("CREATE TABLE t (n INTEGER)")
        for n in 1...3 { try db.execute("INSERT INTO t (n) VALUES (?)", [.integer(Int64(n))]) }
        let row = try #require(
            try db.queryOne("SELECT count(*) AS c, sum(n) AS s, max(n) AS m, bool_and(n > 0) AS b FROM t"))
        #expect(try row.int("c") == 3)
        #expect(try row.int("s") == 6)
        #expect(try row.int("m") == 3)
        #expect(try row.bool("b"))
        #expect(try row.int("s") == db.queryOne("SELECT coalesce(sum(n), 0) AS s FROM t")?.int("s"))
    }

    /// A grant read and then marked used, by `threads` transactions at once: the read-then-write the services do.
    /// With `meet`, every transaction that read the grant unused waits until all have read it before it writes, so
    /// the race is run, not left to the scheduler (only where transactions can overlap: not SQLite's, which hold the
    /// write lock from BEGIN IMMEDIATE).
    static func redeemConcurrently(_ db: any SQLDatabase, threads: Int, meet: Rendezvous? = nil) async throws -> Int {
        try db.execute("CREATE TABLE grants (id TEXT PRIMARY KEY, used_by BIGINT)")
        try db.execute("INSERT INTO grants (id) VALUES ('g')")
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for thread in 0..<threads {
                group.addTask {
                    try await onThread {
                        try db.transaction { tx -> Bool in
                            let row = try tx.queryOne("SELECT used_by FROM grants WHERE id = ?", ["g"])
                            guard try row?.optionalInt64("used_by") == nil else { return false }
                            if let meet { meet.arrive() } else { usleep(2_000) }
                            try tx.execute(
                                "UPDATE grants SET used_by = ? WHERE id = ?", [.integer(Int64(thread)), "g"])
                            return true
                        }
                    }
                }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        return results.filter { $0 }.count
    }

    @Test(
        "read-then-write transactions racing on one grant: exactly one redeems it, on either backend",
        arguments: TestDatabase.allCases)
    func doubleRedemption(backend: TestDatabase) async throws {
        let db = try backend.make()
        let meet = backend == .postgres ? Rendezvous(count: 8) : nil
        #expect(try await Self.redeemConcurrently(db, threads: 8, meet: meet) == 1)
        if let meet { #expect(meet.everyoneArrived) }
    }

    @Test("the attack the isolation level stops: at READ COMMITTED, the same race redeems the grant several times")
    func readCommittedRedeemsTwice() async throws {
        // The same race through a database whose transactions run at PostgreSQL's default: the reason
        // PostgreSQLDatabase runs them SERIALIZABLE. Every transaction reads the grant unused before any writes.
        let db = ReadCommitted(try TestDatabase.postgres.make())
        let meet = Rendezvous(count: 8)
        #expect(try await Self.redeemConcurrently(db, threads: 8, meet: meet) == 8)
        #expect(meet.everyoneArrived)
    }

    @Test("a statement that failed ends the transaction: a body that goes on anyway commits nothing, and says so")
    func failedStatementEndsTheTransaction() throws {
        let db = try TestDatabase.postgres.make()
        try db.execute("CREATE TABLE accounts (phone TEXT PRIMARY KEY)")
        try db.execute("INSERT INTO accounts VALUES ('+1')")
        let error = try #require(throws: StorageError.self) {
            try db.transaction { tx in
                try tx.execute("INSERT INTO accounts VALUES ('+2')")
                // Caught and ignored, as a body written for SQLite might.
                _ = try? tx.execute("INSERT INTO accounts VALUES ('+1')")
            }
        }
        #expect(error.code == .constraint)
        #expect(try db.query("SELECT phone FROM accounts").count == 1)
        let later = try #require(throws: StorageError.self) {
            try db.transaction { tx in
                _ = try? tx.execute("INSERT INTO accounts VALUES ('+1')")
                try tx.execute("INSERT INTO accounts VALUES ('+3')")
            }
        }
        #expect(later.reason.contains("an earlier statement of this transaction failed"))
        #expect(try db.query("SELECT phone FROM accounts").count == 1)
    }

    @Test("connections the server ended are replaced: the next call opens a new one")
    func droppedConnections() throws {
        let db = try TestDatabase.postgres.make()
        let first = try #require(try db.queryOne("SELECT pg_backend_pid() AS pid")).int64("pid")
        let admin = try PostgreSQLDatabase(url: try TestDatabase.postgresURL())
        defer { admin.close() }
        #expect(try admin.queryOne("SELECT pg_terminate_backend(?) AS done", [.integer(first)])?.bool("done") == true)
        // The server's goodbye reaches the idle connection a moment later.
        usleep(100_000)
        let second = try #require(try db.queryOne("SELECT pg_backend_pid() AS pid")).int64("pid")
        #expect(second != first)
    }

    @Test("a server that cannot be reached is .unavailable; a URL that is not PostgreSQL's is .open")
    func unreachable() throws {
        let refused = try #require(throws: StorageError.self) {
            try PostgreSQLDatabase(url: "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
        }
        #expect(refused.code == .unavailable)
        #expect(refused.reason.contains("127.0.0.1"))
        let wrong = try #require(throws: StorageError.self) { try PostgreSQLDatabase(url: "mysql://x@y/z") }
        #expect(wrong.code == .open)
        // The password never reaches a message.
        let secret = try #require(throws: StorageError.self) {
            try PostgreSQLDatabase(url: "postgres://me:hunter2@127.0.0.1:1/none?connect_timeout=2")
        }
        #expect(!secret.reason.contains("hunter2"))
    }

    @Test("two nodes migrating one database at once apply each migration once")
    func concurrentMigrations() async throws {
        let url = try TestDatabase.scratchPostgresURL()
        let migrations = [
            Migration(version: 1, sql: "CREATE TABLE a (id INTEGER PRIMARY KEY)"),
            Migration(version: 2, sql: "CREATE TABLE b (id INTEGER PRIMARY KEY); CREATE INDEX b_id ON b (id)"),
        ]
        let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await onThread {
                        try PostgreSQLDatabase(url: url).migrate(component: "x", migrations: migrations)
                    }
                }
            }
            return try await group.reduce(into: [[Int]]()) { $0.append($1) }
        }
        #expect(applied.filter { !$0.isEmpty } == [[1, 2]])
    }
}

/// A PostgreSQL database whose transactions run at READ COMMITTED, PostgreSQL's default: the attack's setting.
private struct ReadCommitted: SQLDatabase {
    let db: any SQLDatabase
    init(_ db: any SQLDatabase) { self.db = db }

    func execute(_ sql: String, _ params: [SQLValue]) throws -> Int { try db.execute(sql, params) }
    func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow] { try db.query(sql, params) }
    func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow? { try db.queryOne(sql, params) }
    func readTransaction<T>(_ body: (any SQLQuerying) throws -> T) throws -> T { try db.readTransaction(body) }

    func transaction<T>(_ body: (any SQLTransaction) throws -> T) throws -> T {
        try db.transaction { tx in
            try tx.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            return try body(tx)
        }
    }

    func transaction<T>(exclusive name: String, _ body: (any SQLTransaction) throws -> T) throws -> T {
        try db.transaction(exclusive: name, body)
    }
}

/// Runs `body` on a thread of its own, off the cooperative pool (it blocks on the database).
/// A meeting point for threads: `arrive()` returns once `count` threads have arrived, or after `timeout` (so a test
/// that cannot gather them fails on its expectations instead of hanging).
final class Rendezvous: @unchecked Sendable {
    private let condition = NSCondition()
    private let count: Int
    private let timeout: TimeInterval
    private var arrived = 0

    init(count: Int, timeout: TimeInterval = 10) {
        self.count = count
        self.timeout = timeout
    }

    var everyoneArrived: Bool {
        condition.withLock { arrived >= count }
    }

    func arrive() {
        condition.lock()
        defer { condition.unlock() }
        arrived += 1
        if arrived >= count { condition.broadcast() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while arrived < count, condition.wait(until: deadline) {}
    }
}

func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
