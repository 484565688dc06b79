import Foundation
import SiblingsTestSupport
import Storage
import Testing

/// Each test runs on both backends: SQLite in memory, and a scratch schema on the test PostgreSQL server.
@Suite("Statements, constraint errors and transactions")
struct StatementTests {
    static func database(_ backend: TestDatabase = .sqlite) throws -> any SQLDatabase {
        let db = try backend.make()
        try db.execute("CREATE TABLE accounts (phone TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE)")
        return db
    }

    @Test("execute returns the rows changed; 0 for DDL", arguments: TestDatabase.allCases)
    func changes(backend: TestDatabase) throws {
        let db = try Self.database(backend)
        #expect(try db.execute("INSERT INTO accounts (phone, name) VALUES (?, ?)", ["+1", "a"]) == 1)
        #expect(try db.execute("INSERT INTO accounts (phone, name) VALUES (?, ?)", ["+2", "b"]) == 1)
        #expect(try db.execute("UPDATE accounts SET name = 'z'") == 2)
        #expect(try db.execute("CREATE TABLE other (x TEXT)") == 0)
        #expect(try db.execute("DELETE FROM accounts WHERE phone = ?", ["+9"]) == 0)
        #expect(try db.query("SELECT * FROM accounts ORDER BY phone").map { try $0.string("name") } == ["z", "z"])
        #expect(try db.queryOne("SELECT * FROM accounts WHERE phone = ?", ["+9"]) == nil)
    }

    @Test("a UNIQUE or PRIMARY KEY violation is .constraint; NOT NULL is .query", arguments: TestDatabase.allCases)
    func constraint(backend: TestDatabase) throws {
        let db = try Self.database(backend)
        try db.execute("INSERT INTO accounts (phone, name, email) VALUES (?, ?, ?)", ["+1", "a", "a@x"])
        let primary = try #require(throws: StorageError.self) {
            try db.execute("INSERT INTO accounts (phone, name) VALUES (?, ?)", ["+1", "b"])
        }
        #expect(primary.code == .constraint)
        #expect(
            primary.reason.contains(
                backend == .sqlite ? "UNIQUE constraint failed: accounts.phone" : "accounts_pkey"))
        let unique = try #require(throws: StorageError.self) {
            try db.execute("INSERT INTO accounts (phone, name, email) VALUES (?, ?, ?)", ["+2", "b", "a@x"])
        }
        #expect(unique.code == .constraint)
        let notNull = try #require(throws: StorageError.self) {
            try db.execute("INSERT INTO accounts (phone, name) VALUES (?, ?)", ["+3", nil])
        }
        #expect(notNull.code == .query)
    }

    @Test("misused SQL gives .query with the reason", arguments: TestDatabase.allCases)
    func misuse(backend: TestDatabase) throws {
        let db = try Self.database(backend)
        let count = try #require(throws: StorageError.self) { try db.execute("SELECT ?, ?", [1]) }
        #expect(count.code == .query)
        #expect(count.reason.contains("2 placeholder(s) but 1 parameter(s)"))
        let two = try #require(throws: StorageError.self) { try db.execute("SELECT 1; SELECT 2") }
        #expect(two.reason.contains("more than one statement"))
        let syntax = try #require(throws: StorageError.self) { try db.query("SELEKT 1") }
        #expect(syntax.code == .query)
        #expect(syntax.reason.contains("syntax error"))
        // A trailing semicolon is one statement.
        #expect(try db.query("SELECT 1 AS one;").first?.int("one") == 1)
    }

    @Test(
        "a cached statement works again after it failed, with its old parameters cleared",
        arguments: TestDatabase.allCases)
    func statementReuse(backend: TestDatabase) throws {
        let db = try Self.database(backend)
        let insert = "INSERT INTO accounts (phone, name, email) VALUES (?, ?, ?)"
        try db.execute(insert, ["+1", "a", "a@x"])
        #expect(throws: StorageError.self) { try db.execute(insert, ["+1", "b", "b@x"]) }
        try db.execute(insert, ["+2", "b", nil])
        let rows = try db.query("SELECT phone, email FROM accounts ORDER BY phone")
        #expect(try rows.map { try $0.string("phone") } == ["+1", "+2"])
        #expect(try rows[1].optionalString("email") == nil)
    }

    @Test("a transaction commits when its body returns, and its reads see its writes", arguments: TestDatabase.allCases)
    func commit(backend: TestDatabase) throws {
        let db = try Self.database(backend)
        let seen = try db.transaction { tx in
            try tx.execute("INSERT INTO accounts (phone, name) VALUES (?, ?)", ["+1", "a"])
            return try tx.queryOne("SELECT count(*) AS n FROM accounts")?.int("n")
        }
        #expect(seen == 1)
        #expect(try db.queryOne("SELECT count(*) AS n FROM accounts")?.int("n") == 1)
    }

    struct Refused: Error {}

    @Test(
        "a transaction rolls back when its body throws, and rethrows the body's error", arguments: TestDatabase.allCases
    )
    func rollback(backend: TestDatabase) throws {
        let db = try Self.database(backend)
        #expect(throws: Refused.self) {
            try db.transaction { tx in
                try tx.execute("INSERT INTO accounts (phone, name) VALUES (?, ?)", ["+1", "a"])
                throw Refused()
            }
        }
        #expect(try db.queryOne("SELECT count(*) AS n FROM accounts")?.int("n") == 0)
        // A failing statement inside rolls back the earlier ones too.
        let error = try #require(throws: StorageError.self) {
            try db.transaction { tx in
                try tx.execute("INSERT INTO accounts (phone, name) VALUES (?, ?)", ["+1", "a"])
                try tx.execute("INSERT INTO accounts (phone, name) VALUES (?, ?)", ["+1", "b"])
            }
        }
        #expect(error.code == .constraint)
        #expect(try db.queryOne("SELECT count(*) AS n FROM accounts")?.int("n") == 0)
        // The database is usable afterwards.
        try db.transaction { tx in try tx.execute("INSERT INTO accounts (phone, name) VALUES ('+1', 'a')") }
        #expect(try db.queryOne("SELECT count(*) AS n FROM accounts")?.int("n") == 1)
    }

    @Test(
        "using the database inside its own transaction is refused, not a deadlock",
        arguments: ["memory", "file", "postgres"])
    func nested(kind: String) throws {
        let directory = try TestDirectory()
        let db: any SQLDatabase =
            switch kind {
            case "file": try SQLiteDatabase(path: directory.path("db.sqlite"))
            case "postgres": try TestDatabase.postgres.make()
            default: try SQLiteDatabase.inMemory()
            }
        try db.execute("CREATE TABLE IF NOT EXISTS accounts (phone TEXT PRIMARY KEY, name TEXT)")
        let attempts: [(any SQLDatabase) throws -> Void] = [
            { db in try db.transaction { _ in try db.transaction { _ in } } },
            { db in try db.transaction { _ in _ = try db.execute("INSERT INTO accounts VALUES ('+1', 'a')") } },
            { db in try db.transaction { _ in _ = try db.query("SELECT * FROM accounts") } },
        ]
        for attempt in attempts {
            let error = try #require(throws: StorageError.self) { try attempt(db) }
            #expect(error.code == .nestedTransaction)
        }
        #expect(try db.queryOne("SELECT count(*) AS n FROM accounts")?.int("n") == 0)
    }

    @Test("a transaction used after its body returned throws .closed", arguments: TestDatabase.allCases)
    func escaped(backend: TestDatabase) throws {
        let db = try Self.database(backend)
        let escaped = try db.transaction { tx in tx }
        let error = try #require(throws: StorageError.self) { try escaped.query("SELECT 1") }
        #expect(error.code == .closed)
    }

    @Test("a closed database throws .closed")
    func closed() throws {
        let directory = try TestDirectory()
        let db = try SQLiteDatabase(path: directory.path("db.sqlite"))
        db.close()
        #expect(throws: StorageError.self) { try db.execute("SELECT 1") }
        let error = try #require(throws: StorageError.self) { try db.query("SELECT 1") }
        #expect(error.code == .closed)
    }

    @Test("INSERT ... RETURNING through query goes to the writer")
    func returning() throws {
        let directory = try TestDirectory()
        let db = try SQLiteDatabase(path: directory.path("db.sqlite"))
        try db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT)")
        let row = try db.queryOne("INSERT INTO items (name) VALUES (?) RETURNING id", ["a"])
        #expect(try row?.int64("id") == 1)
        #expect(try db.queryOne("SELECT count(*) AS n FROM items")?.int("n") == 1)
    }
}
