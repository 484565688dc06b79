import Foundation
import Storage
import Testing

@Suite("SQLValue and SQLRow: round-trips and typed getters")
struct ValueTests {
    static func database() throws -> SQLiteDatabase {
        let db = try SQLiteDatabase.inMemory()
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v)")
        return db
    }

    @Test(
        "every value type round-trips unchanged",
        arguments: [
            SQLValue.null, .integer(0), .integer(.max), .integer(.min), .real(1.5), .real(-0.25),
            .text(""), .text("héllo ✓"), .text("a\u{0}b"), .blob(Data()), .blob(Data([0, 1, 2, 255])),
            .blob(Data(repeating: 7, count: 100_000)),
        ])
    func roundTrip(value: SQLValue) throws {
        let db = try Self.database()
        try db.execute("INSERT INTO t (id, v) VALUES (1, ?)", [value])
        let row = try #require(try db.queryOne("SELECT v FROM t WHERE id = 1"))
        #expect(row["v"] == value)
        #expect(row.values == [value])
    }

    @Test("an empty blob stays an empty blob, not NULL")
    func emptyBlob() throws {
        let db = try Self.database()
        try db.execute("INSERT INTO t (id, v) VALUES (1, ?)", [.blob(Data())])
        let row = try #require(try db.queryOne("SELECT v, typeof(v) AS kind FROM t"))
        #expect(try row.string("kind") == "blob")
        #expect(try row.data("v") == Data())
    }

    @Test("literals and initializers convert")
    func conversions() {
        let values: [SQLValue] = [nil, 42, 1.5, "text", true, false]
        #expect(values == [.null, .integer(42), .real(1.5), .text("text"), .integer(1), .integer(0)])
        let missing: String? = nil
        #expect(SQLValue(missing) == .null)
        #expect(SQLValue(Optional("x")) == .text("x"))
        #expect(SQLValue(Data([1])) == .blob(Data([1])))
        #expect(SQLValue(7) == .integer(7))
        #expect(SQLValue(Int32(-3)) == .integer(-3))
        #expect(SQLValue(2.0) == .real(2))
    }

    @Test("typed getters read their type")
    func getters() throws {
        let db = try SQLiteDatabase.inMemory()
        let row = try #require(
            try db.queryOne(
                "SELECT 7 AS n, 2.5 AS r, 'x' AS s, x'0102' AS b, 1 AS yes, NULL AS absent, 3 AS whole"))
        #expect(try row.int64("n") == 7)
        #expect(try row.int("n") == 7)
        #expect(try row.double("r") == 2.5)
        #expect(try row.double("whole") == 3)
        #expect(try row.string("s") == "x")
        #expect(try row.data("b") == Data([1, 2]))
        #expect(try row.bool("yes"))
        #expect(try row.optionalInt64("absent") == nil)
        #expect(try row.optionalString("absent") == nil)
        #expect(try row.optionalData("absent") == nil)
        #expect(try row.optionalDouble("absent") == nil)
        #expect(try row.optionalBool("absent") == nil)
        #expect(try row.optionalInt64("n") == 7)
        #expect(row.columns == ["n", "r", "s", "b", "yes", "absent", "whole"])
    }

    @Test("a missing column, a NULL and a wrong type throw .decode naming the column")
    func decodeErrors() throws {
        let db = try SQLiteDatabase.inMemory()
        let row = try #require(try db.queryOne("SELECT 'x' AS expires_at, NULL AS pubkey, 5 AS flag"))
        let checks: [(String, (SQLRow) throws -> Void)] = [
            ("expires_at", { _ = try $0.int64("expires_at") }),
            ("pubkey", { _ = try $0.data("pubkey") }),
            ("missing_column", { _ = try $0.string("missing_column") }),
            ("missing_column", { _ = try $0.optionalString("missing_column") }),
            ("expires_at", { _ = try $0.optionalData("expires_at") }),
            ("flag", { _ = try $0.bool("flag") }),
        ]
        for (column, read) in checks {
            let error = try #require(throws: StorageError.self) { try read(row) }
            #expect(error.code == .decode)
            #expect(error.reason.contains("\"\(column)\""), "\(error.reason)")
        }
        let null = try #require(throws: StorageError.self) { try row.data("pubkey") }
        #expect(null.reason.contains("optionalData"))
    }
}
