import Foundation
import Storage
import Synchronization
import Testing

@Suite("SQLite files: WAL, reopening, bad paths, concurrency")
struct SQLiteFileTests {
    @Test("a file database is in WAL mode with foreign keys on")
    func settings() throws {
        let directory = try TestDirectory()
        let db = try SQLiteDatabase(path: directory.path("data/pixie.sqlite"))
        #expect(try db.queryOne("PRAGMA journal_mode")?.string("journal_mode") == "wal")
        #expect(try db.transaction { try $0.queryOne("PRAGMA foreign_keys")?.int("foreign_keys") } == 1)
        #expect(try db.transaction { try $0.queryOne("PRAGMA synchronous")?.int("synchronous") } == 1)
        #expect(FileManager.default.fileExists(atPath: directory.path("data/pixie.sqlite-wal")))
    }

    @Test(
        "a bulk load writes a new file with no journal, reads back after closeDurably, and leaves attached files alone")
    func bulkLoading() throws {
        let directory = try TestDirectory()
        let live = try SQLiteDatabase(path: directory.path("live.sqlite"))
        try live.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT)")
        try live.execute("INSERT INTO rows VALUES (1, 'live')")

        let bulk = try SQLiteDatabase.bulkLoading(newFileAt: directory.path("new.sqlite"))
        #expect(try bulk.queryOne("PRAGMA main.journal_mode")?.string("journal_mode") == "off")
        try bulk.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT)")
        try bulk.execute("BEGIN")
        for id in 2...100 { try bulk.execute("INSERT INTO rows VALUES (?, 'new')", [.integer(Int64(id))]) }
        try bulk.execute("COMMIT")
        // An attached database keeps its own journal and locking: the live file's writer is not locked out.
        try bulk.execute("ATTACH DATABASE ? AS live", [.text(directory.path("live.sqlite"))])
        try bulk.execute("INSERT INTO main.rows SELECT * FROM live.rows")
        try live.execute("INSERT INTO rows VALUES (101, 'live, while attached')")
        try bulk.execute("DETACH DATABASE live")
        try bulk.closeDurably()
        #expect(!FileManager.default.fileExists(atPath: directory.path("new.sqlite-journal")))

        let reopened = try SQLiteDatabase(path: directory.path("new.sqlite"))
        #expect(try reopened.queryOne("SELECT count(*) AS n FROM rows")?.int("n") == 100)
        #expect(try reopened.queryOne("SELECT body FROM rows WHERE id = 1")?.string("body") == "live")

        // Only a new, empty file: never one that holds a database already.
        let error = try #require(throws: StorageError.self) {
            try SQLiteDatabase.bulkLoading(newFileAt: directory.path("live.sqlite"))
        }
        #expect(error.code == .open && error.reason.contains("is not empty"))
    }

    @Test("foreign keys are enforced")
    func foreignKeys() throws {
        let directory = try TestDirectory()
        let db = try SQLiteDatabase(path: directory.path("db.sqlite"))
        try db.execute("CREATE TABLE a (id INTEGER PRIMARY KEY)")
        try db.execute("CREATE TABLE b (a_id INTEGER NOT NULL REFERENCES a (id))")
        let error = try #require(throws: StorageError.self) { try db.execute("INSERT INTO b VALUES (1)") }
        #expect(error.code == .query)
        #expect(error.reason.contains("FOREIGN KEY"))
    }

    @Test("a read transaction sees one photograph while the writer commits, and does not hold the writer back")
    func readTransaction() throws {
        let directory = try TestDirectory()
        let db = try SQLiteDatabase(path: directory.path("db.sqlite"))
        try db.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY)")
        try db.execute("INSERT INTO rows VALUES (1)")
        let seen = try db.readTransaction { reads in
            let before = try reads.queryOne("SELECT count(*) AS n FROM rows")?.int("n")
            // Committed while the read transaction is open: the writer is not blocked, and the view does not move.
            try db.execute("INSERT INTO rows VALUES (2)")
            try db.transaction { try $0.execute("INSERT INTO rows VALUES (3)") }
            let after = try reads.queryOne("SELECT count(*) AS n FROM rows")?.int("n")
            return (before, after)
        }
        #expect(seen.0 == 1 && seen.1 == 1)
        #expect(try db.queryOne("SELECT count(*) AS n FROM rows")?.int("n") == 3)
        // Its view ends with it: the next one sees everything.
        #expect(try db.readTransaction { try $0.queryOne("SELECT count(*) AS n FROM rows")?.int("n") } == 3)
        // A body that throws ends the transaction too, and the connection is usable again.
        struct Stop: Error {}
        #expect(throws: Stop.self) { try db.readTransaction { _ in throw Stop() } }
        #expect(try db.readTransaction { try $0.queryOne("SELECT max(id) AS m FROM rows")?.int("m") } == 3)
    }

    @Test("forEachRow in a read transaction hands rows over in order from its view, while any statement may run")
    func forEachRowStreams() throws {
        let directory = try TestDirectory()
        let db = try SQLiteDatabase(path: directory.path("db.sqlite"))
        try db.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT)")
        try db.transaction { transaction in
            for id in 1...50 {
                try transaction.execute("INSERT INTO rows VALUES (?, ?)", [.integer(Int64(id)), .text("\(id)")])
            }
        }
        var seen: [Int] = []
        try db.readTransaction { reads in
            try reads.forEachRow("SELECT * FROM rows ORDER BY id", []) { row in
                seen.append(try row.int("id"))
                // The same statement and a write, mid-iteration: neither disturbs the rows still to come.
                #expect(try reads.queryOne("SELECT body FROM rows WHERE id = ?", [.integer(1)])?.string("body") == "1")
                _ = try reads.query("SELECT * FROM rows ORDER BY id", [])
                if seen.count == 10 { try db.execute("INSERT INTO rows VALUES (51, 'late')") }
            }
        }
        #expect(seen == Array(1...50))
        // A body that throws stops the rows, and the connection is usable again.
        struct Stop: Error {}
        var count = 0
        #expect(throws: Stop.self) {
            try db.readTransaction { reads in
                try reads.forEachRow("SELECT * FROM rows", []) { _ in
                    count += 1
                    if count == 3 { throw Stop() }
                }
            }
        }
        #expect(count == 3)
        #expect(try db.readTransaction { try $0.query("SELECT * FROM rows", []).count } == 51)
        let bad = try #require(throws: StorageError.self) {
            try db.readTransaction { try $0.forEachRow("SELECT * FROM nowhere", []) { _ in } }
        }
        #expect(bad.reason.contains("nowhere"), "\(bad.reason)")
    }

    @Test("a reopened file database keeps its data and its migrations")
    func reopen() throws {
        let directory = try TestDirectory()
        let path = directory.path("pixie.sqlite")
        let migrations = [Migration(version: 1, sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body BLOB)")]
        do {
            let db = try SQLiteDatabase(path: path)
            try db.migrate(component: "notes", migrations: migrations)
            try db.execute("INSERT INTO notes (body) VALUES (?)", [.blob(Data([9, 9]))])
            db.close()
        }
        let db = try SQLiteDatabase(path: path)
        #expect(try db.migrate(component: "notes", migrations: migrations) == [])
        #expect(try db.queryOne("SELECT body FROM notes")?.data("body") == Data([9, 9]))
    }

    @Test("a bad path gives a clear .open error")
    func badPath() throws {
        let directory = try TestDirectory()
        let file = directory.path("a-file")
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: file))
        let underFile = try #require(throws: StorageError.self) { try SQLiteDatabase(path: file + "/db.sqlite") }
        #expect(underFile.code == .open)
        #expect(underFile.reason.contains("cannot create the directory"))

        let notDatabase = directory.path("garbage.sqlite")
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: notDatabase))
        let garbage = try #require(throws: StorageError.self) { try SQLiteDatabase(path: notDatabase) }
        #expect(garbage.code == .open)
        #expect(garbage.reason.contains("not a database"))

        let isDirectory = try #require(throws: StorageError.self) { try SQLiteDatabase(path: directory.url.path) }
        #expect(isDirectory.code == .open)
    }

    @Test("8 writer tasks x 500 inserts beside readers end with every row")
    func concurrent() async throws {
        let directory = try TestDirectory()
        let db = try SQLiteDatabase(path: directory.path("db.sqlite"))
        try db.execute("CREATE TABLE events (task INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (task, n))")
        let writers = 8
        let inserts = 500
        let maximumSeen = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<writers {
                group.addTask {
                    for n in 0..<inserts {
                        if n % 50 == 0 {
                            try db.transaction { tx in
                                try tx.execute(
                                    "INSERT INTO events (task, n) VALUES (?, ?)", [SQLValue(task), SQLValue(n)])
                            }
                        } else {
                            try db.execute("INSERT INTO events (task, n) VALUES (?, ?)", [SQLValue(task), SQLValue(n)])
                        }
                    }
                    return 0
                }
            }
            for _ in 0..<4 {
                group.addTask {
                    var seen = 0
                    for _ in 0..<200 {
                        let count = try db.queryOne("SELECT count(*) AS n FROM events")?.int("n") ?? -1
                        // Committed rows only ever grow.
                        #expect(count >= seen)
                        seen = count
                        await Task.yield()
                    }
                    return seen
                }
            }
            return try await group.reduce(0, max)
        }
        #expect(maximumSeen <= writers * inserts)
        #expect(try db.queryOne("SELECT count(*) AS n FROM events")?.int("n") == writers * inserts)
    }
}

@Suite("SQLite readers: reads do not wait behind an open transaction")
struct SQLiteReaderTests {
    @Test("a read on another thread finishes while a transaction holds the writer, and sees only committed rows")
    func readDuringTransaction() throws {
        let directory = try TestDirectory()
        let db = try SQLiteDatabase(path: directory.path("db.sqlite"))
        try db.execute("CREATE TABLE t (x INTEGER)")
        try db.execute("INSERT INTO t VALUES (1)")
        let outside = try db.transaction { tx -> Int? in
            try tx.execute("INSERT INTO t VALUES (2)")
            let done = DispatchSemaphore(value: 0)
            let seen = Mutex<Int?>(nil)
            // A thread of its own, not a Dispatch worker the rest of the suite may be holding.
            Thread.detachNewThread {
                let count = try? db.queryOne("SELECT count(*) AS n FROM t")?.int("n")
                seen.withLock { $0 = count }
                done.signal()
            }
            // Were reads queued behind the writer, this would time out (120 s: a hang's limit).
            #expect(done.wait(timeout: .now() + 120) == .success)
            #expect(try tx.queryOne("SELECT count(*) AS n FROM t")?.int("n") == 2)
            return seen.withLock { $0 }
        }
        #expect(outside == 1)
        #expect(try db.queryOne("SELECT count(*) AS n FROM t")?.int("n") == 2)
    }
}

@Suite("SQLite paths that are not files")
struct SQLitePathTests {
    @Test("an empty path or :memory: is refused with a pointer to inMemory()", arguments: ["", ":memory:"])
    func notAFile(path: String) throws {
        let error = try #require(throws: StorageError.self) { try SQLiteDatabase(path: path) }
        #expect(error.code == .open)
        #expect(error.reason.contains("inMemory()"))
    }
}

@Suite("SQLite locks held by another process")
struct SQLiteBusyTests {
    @Test("a write blocked past the busy timeout by another connection is .busy")
    func busy() throws {
        let directory = try TestDirectory()
        let path = directory.path("db.sqlite")
        let first = try SQLiteDatabase(path: path)
        // A second database object on the same file stands in for a second pixie-server process.
        let second = try SQLiteDatabase(path: path, busyTimeout: .milliseconds(50))
        try first.execute("CREATE TABLE t (x INTEGER)")
        try first.transaction { tx in
            try tx.execute("INSERT INTO t VALUES (1)")
            let error = try #require(throws: StorageError.self) { try second.execute("INSERT INTO t VALUES (2)") }
            #expect(error.code == .busy)
            #expect(error.reason.contains("another pixie-server"))
            // Its readers still read the last commit.
            #expect(try second.queryOne("SELECT count(*) AS n FROM t")?.int("n") == 0)
        }
        #expect(try second.queryOne("SELECT count(*) AS n FROM t")?.int("n") == 1)
    }
}
