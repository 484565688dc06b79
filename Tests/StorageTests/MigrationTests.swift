import Foundation
import Storage
import Testing

@Suite("Migrations: per component, idempotent, refusing newer and gapped databases")
struct MigrationTests {
    static let identity = [
        Migration(version: 1, sql: "CREATE TABLE accounts (phone TEXT PRIMARY KEY)"),
        Migration(
            version: 2,
            sql: """
                ALTER TABLE accounts ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX accounts_created ON accounts (created_at);
                """),
    ]
    static let blob = [Migration(version: 1, sql: "CREATE TABLE blobs (id TEXT PRIMARY KEY, bytes BLOB NOT NULL)")]

    static func versions(_ db: some SQLDatabase, _ component: String) throws -> [Int] {
        try db.query("SELECT version FROM schema_migrations WHERE component = ? ORDER BY version", [.text(component)])
            .map { try $0.int("version") }
    }

    @Test("apply, then re-apply as a no-op")
    func applyTwice() throws {
        let db = try SQLiteDatabase.inMemory()
        #expect(try db.migrate(component: "identity", migrations: Self.identity) == [1, 2])
        #expect(try db.migrate(component: "identity", migrations: Self.identity) == [])
        #expect(try Self.versions(db, "identity") == [1, 2])
        try db.execute("INSERT INTO accounts (phone, created_at) VALUES ('+1', 5)")
        let row = try db.queryOne("SELECT applied_at FROM schema_migrations WHERE component = 'identity'")
        #expect(try row?.int64("applied_at") ?? 0 > 1_700_000_000)
    }

    @Test("a later build applies only the new migrations")
    func upgrade() throws {
        let db = try SQLiteDatabase.inMemory()
        #expect(try db.migrate(component: "identity", migrations: Array(Self.identity.prefix(1))) == [1])
        #expect(try db.migrate(component: "identity", migrations: Self.identity) == [2])
    }

    @Test("two components share one database")
    func twoComponents() throws {
        let db = try SQLiteDatabase.inMemory()
        #expect(try db.migrate(component: "identity", migrations: Self.identity) == [1, 2])
        #expect(try db.migrate(component: "blob", migrations: Self.blob) == [1])
        #expect(try Self.versions(db, "identity") == [1, 2])
        #expect(try Self.versions(db, "blob") == [1])
        try db.execute("INSERT INTO blobs (id, bytes) VALUES ('a', x'00')")
    }

    @Test("a database written by a newer build is refused")
    func newer() throws {
        let db = try SQLiteDatabase.inMemory()
        try db.migrate(component: "identity", migrations: Self.identity)
        let error = try #require(throws: StorageError.self) {
            try db.migrate(component: "identity", migrations: Array(Self.identity.prefix(1)))
        }
        #expect(error.code == .migration)
        #expect(error.reason.contains("this database was written by a newer pixie-server"))
    }

    @Test("a gap in the code's versions, or in the database's, is refused")
    func gaps() throws {
        let db = try SQLiteDatabase.inMemory()
        let gapped = [Self.identity[0], Migration(version: 3, sql: "CREATE TABLE x (y)")]
        let code = try #require(throws: StorageError.self) { try db.migrate(component: "identity", migrations: gapped) }
        #expect(code.code == .migration)
        #expect(code.reason.contains("[1, 3]"))
        let duplicate = [Self.identity[0], Self.identity[0]]
        #expect(throws: StorageError.self) { try db.migrate(component: "identity", migrations: duplicate) }

        try db.migrate(component: "identity", migrations: Self.identity)
        try db.execute("DELETE FROM schema_migrations WHERE component = 'identity' AND version = 1")
        let recorded = try #require(throws: StorageError.self) {
            try db.migrate(component: "identity", migrations: Self.identity)
        }
        #expect(recorded.code == .migration)
        #expect(recorded.reason.contains("gap"))
    }

    @Test("a failing migration rolls back every migration of the run")
    func failedRollsBack() throws {
        let db = try SQLiteDatabase.inMemory()
        let broken = Self.identity + [Migration(version: 3, sql: "CREATE TABLE ok (x); CREATE TABLE broken (")]
        let error = try #require(throws: StorageError.self) {
            try db.migrate(component: "identity", migrations: broken)
        }
        #expect(error.code == .migration)
        #expect(error.reason.contains("migration 3 of \"identity\" failed"))
        let tables = try db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .map { try $0.string("name") }
        // Even schema_migrations, created in the same transaction, is gone.
        #expect(tables.isEmpty)
        // Fixed, it applies.
        #expect(try db.migrate(component: "identity", migrations: Self.identity) == [1, 2])
    }
}
