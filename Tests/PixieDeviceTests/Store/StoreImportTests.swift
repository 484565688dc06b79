import Foundation
@_spi(Testing) import PixieDevice
import PixieWire
import SiblingsCrypto
import Storage
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("StoreImport: a new store written beside the live one, the live rows merged in, moved into place at once")
struct StoreImportTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID().uuidString)")

    func home() throws -> DeviceHome { try DeviceHome(directory: directory) }
    var link: URL { directory.appendingPathComponent("store.sqlite") }

    func note(_ id: String, _ body: String, version: Int64 = 1) -> StoreRow {
        StoreRow(
            category: .notebookNotes, id: id, version: RowVersion(hlc: UInt64(version), author: .migrated),
            isDeleted: false,
            fields: ["title": .text(id), "body": .text(body)])
    }

    func contact(_ id: String, hash: Data) -> StoreRow {
        StoreRow(
            category: .contacts, id: id, version: RowVersion(hlc: 1, author: .migrated), isDeleted: false,
            fields: [
                "display_name": .text(id), "pubkey": .blob(SecureRandom.bytes(count: 32)), "user_id_hash": .blob(hash),
                "account_signing_pubkey": .blob(SecureRandom.bytes(count: 64)),
                "channel_key": .blob(SecureRandom.bytes(count: 32)),
            ])
    }

    /// The files in the home that belong to the store, other than its two lock files.
    func storeFiles() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasPrefix("store.sqlite") && !$0.hasSuffix("lock") }.sorted()
    }

    @Test(
        "the import becomes the store; rows another process writes meanwhile win over the snapshot's; it finds the new file"
    )
    func merge() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = try home()
        let store = try DeviceStore(home: home)
        let other = try DeviceStore(home: home)  // another pixie on this home: its own connections and locks
        let before = try store.put(.notebookNotes, id: "kept", fields: ["title": .text("live"), "body": .text("mine")])
        let hash = SecureRandom.bytes(count: 32)

        let load = try StoreImport(into: store)
        #expect(try load.insert(note("kept", "theirs", version: 9)))
        #expect(try load.insert(note("new", "from the sibling")))
        #expect(try load.insert(contact("their-ada", hash: hash)))
        #expect(try !load.insert(note("new", "the same id twice")))
        // Written while the import runs: not blocked, and not lost.
        let during = try other.put(.notebookNotes, id: "during", fields: ["title": .text("d"), "body": .text("d")])
        let ada = try other.put(.contacts, id: "my-ada", fields: contact("my-ada", hash: hash).fields)
        #expect(try store.row(.notebookNotes, id: "new") == nil)
        #expect(try load.commit() == 2)  // "kept" by id, "their-ada" by its userIDHash

        for reader in [store, other] {
            #expect(try reader.row(.notebookNotes, id: "kept") == before)
            #expect(try reader.row(.notebookNotes, id: "new") == note("new", "from the sibling"))
            #expect(try reader.row(.notebookNotes, id: "during") == during)
            #expect(try reader.row(.contacts, id: "my-ada") == ada)
            #expect(try reader.row(.contacts, id: "their-ada") == nil)
        }
        let after = try other.put(.notebookNotes, id: "after", fields: ["title": .text("a"), "body": .text("a")])
        #expect(try store.row(.notebookNotes, id: "after") == after)
        // In the order first written here: the device's own rows keep their place, the import's come after them.
        #expect(try store.rows(.notebookNotes).map(\.id) == ["kept", "during", "new", "after"])
        #expect(try DeviceStore(home: home).row(.notebookNotes, id: "after") == after)

        // store.sqlite is now a link to the new file; the old file, its -wal and -shm are gone.
        let target = try FileManager.default.destinationOfSymbolicLink(atPath: link.path)
        #expect(target.range(of: #"^store\.sqlite\.[0-9a-f]{16}$"#, options: .regularExpression) != nil)
        #expect(try storeFiles().allSatisfy { $0 == "store.sqlite" || $0.hasPrefix(target) })
        #expect(try storeFiles().contains(target))

        // A second import replaces the first generation in turn, and removes it.
        let again = try StoreImport(into: other)
        #expect(try again.insert(note("second", "x")))
        #expect(try again.commit() == 0)
        let second = try FileManager.default.destinationOfSymbolicLink(atPath: link.path)
        #expect(second != target)
        #expect(try !storeFiles().contains(target))
        #expect(try store.rows(.notebookNotes).map(\.id).sorted() == ["after", "during", "kept", "new", "second"])
    }

    @Test("an import folds by version: a newer row replaces the live one, an older one does not; digests are summed")
    func folds() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try home()
        let seed = SecureRandom.bytes(count: 32)
        let writer = try StoreWriter(author: AuthorTag(rawValue: 1), accountSeed: seed)
        let store = try DeviceStore(path: link.path, writer: writer)
        let older = try store.put(
            .notebookNotes, id: "older-here", fields: ["title": .text("t"), "body": .text("mine")])
        let newer = try store.put(
            .notebookNotes, id: "newer-here", fields: ["title": .text("t"), "body": .text("mine")])
        try store.put(.conversations, id: "c", fields: ["title": .text("c"), "created_at": .integer(1)])
        let theirs = StoreRow(
            category: .notebookNotes, id: "older-here",
            version: RowVersion(hlc: older.version.hlc + 5, author: AuthorTag(rawValue: 2)), isDeleted: false,
            fields: ["title": .text("t"), "body": .text("theirs, newer")])
        let stale = StoreRow(
            category: .notebookNotes, id: "newer-here", version: RowVersion(hlc: 1, author: AuthorTag(rawValue: 2)),
            isDeleted: false, fields: ["title": .text("t"), "body": .text("theirs, older")])
        let gone = StoreRow(
            category: .conversations, id: "c", version: RowVersion(hlc: 2, author: AuthorTag(rawValue: 2)),
            isDeleted: true, fields: [:])
        let load = try StoreImport(into: store)
        for row in [theirs, stale, gone] { #expect(try load.insert(row)) }
        #expect(try load.commit() == 1)  // the stale note; the conversation's deletion is final, so it wins
        #expect(try store.row(.notebookNotes, id: "older-here") == theirs)
        #expect(try store.row(.notebookNotes, id: "newer-here") == newer)
        #expect(try store.row(.conversations, id: "c") == gone)
        // The digests are the ones the rows give, and the clock went past every version imported.
        let key = try SyncItemKey(accountSeed: seed)
        let expected = try StoreCategory.allCases.map { category in
            SyncDigest(
                items: try store.rows(category, includingDeleted: true).map {
                    key.item(category: category.snapshotCode, id: $0.id, version: $0.version, deleted: $0.isDeleted)
                })
        }
        #expect(try store.syncSummary()?.digests == expected)
        let after = try store.put(.plans, id: "p", fields: ["title": .text("p"), "body": .text("p")])
        #expect(after.version.hlc > theirs.version.hlc)
        #expect(try store.syncSummary()?.digests != expected)
    }

    @Test("an import that fails or is dropped leaves the live store as it was and no file behind")
    func nothingUnlessCommitted() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try DeviceStore(home: try home())
        try store.put(.notebookNotes, id: "live", fields: ["title": .text("l"), "body": .text("l")])
        let filesBefore = try storeFiles()

        let dropped = try StoreImport(into: store)
        #expect(try dropped.insert(note("never", "x")))
        dropped.discard()
        #expect(throws: DeviceStoreError.self) { try dropped.insert(note("late", "x")) }

        struct Cut: Error {}
        #expect(throws: Cut.self) {
            try BackupService(store: store).importRawPayload { feed in
                var bytes = Data()
                StoreSnapshot.append(note("never", "y"), to: &bytes)
                try feed(StoreSnapshot.header(includeSecrets: false) + bytes)
                throw Cut()
            }
        }
        // Never committed, never reached the store; the beside file is gone each time.
        #expect(try store.rows(.notebookNotes).map(\.id) == ["live"])
        #expect(try storeFiles() == filesBefore)
        #expect(!FileManager.default.fileExists(atPath: link.path + ".next"))
    }

    @Test("what a crashed import left beside the store is removed by the next import, and the live store kept")
    func leftovers() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try DeviceStore(home: try home())
        try store.put(.notebookNotes, id: "live", fields: ["title": .text("l"), "body": .text("l")])
        let crashed = directory.appendingPathComponent("store.sqlite.00000000deadbeef")
        try Data(repeating: 7, count: 4096).write(to: crashed)
        try Data(repeating: 7, count: 512).write(to: URL(fileURLWithPath: crashed.path + "-journal"))
        let unrelated = directory.appendingPathComponent("store.sqlite.notes.txt")
        try Data("mine".utf8).write(to: unrelated)

        let load = try StoreImport(into: store)
        #expect(!FileManager.default.fileExists(atPath: crashed.path))
        #expect(!FileManager.default.fileExists(atPath: crashed.path + "-journal"))
        #expect(FileManager.default.fileExists(atPath: unrelated.path))
        _ = try load.insert(note("new", "n"))
        #expect(try load.commit() == 0)
        #expect(try store.rows(.notebookNotes).map(\.id) == ["live", "new"])

        // A move stopped before it removed the plain store's log: the log never meets a later store, and goes.
        let staleLog = URL(fileURLWithPath: link.path + "-wal")
        try Data(repeating: 9, count: 4096).write(to: staleLog)
        let next = try StoreImport(into: store)
        #expect(!FileManager.default.fileExists(atPath: staleLog.path))
        next.discard()
        #expect(try store.rows(.notebookNotes).map(\.id) == ["live", "new"])
    }

    @Test("a second import into one store while the first runs is refused with the reason")
    func oneImportAtATime() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = try home()
        let store = try DeviceStore(home: home)
        let first = try StoreImport(into: store)
        #expect {
            try StoreImport(into: try DeviceStore(home: home))
        } throws: { error in
            guard case DeviceStoreError.conflict(let reason) = error else { return false }
            return reason.contains("another import into this store is running")
        }
        first.discard()
        let next = try StoreImport(into: store)
        #expect(try next.commit() == 0)
    }

    @Test("the move waits for a write that found the old file first: the write is merged in, not left behind")
    func writeRacingTheMove() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try DeviceStore(home: try home())
        try store.put(.notebookNotes, id: "live", fields: ["title": .text("l"), "body": .text("l")])
        let load = try StoreImport(into: store)
        _ = try load.insert(note("new", "n"))

        // Another process's write: it holds the store's lock shared (as DeviceStore.put does), has opened the
        // current file, and has not committed yet.
        let lock = open(link.path + ".lock", O_RDWR | O_CLOEXEC)
        #expect(lock >= 0)
        #expect(flock(lock, LOCK_SH) == 0)
        let old = try SQLiteDatabase(path: link.path)
        let committing = Task.detached { try load.commit() }
        try await Task.sleep(for: .milliseconds(300))
        // The move has not happened: store.sqlite is still the plain file the writer opened.
        #expect(
            try FileManager.default.attributesOfItem(atPath: link.path)[.type] as? FileAttributeType == .typeRegular)
        try old.execute(
            "INSERT INTO notebook_notes (id, hlc, deleted, title, body) VALUES ('racing', 1, 0, 'r', 'r')", [])
        old.close()
        close(lock)
        #expect(try await committing.value == 0)
        #expect(try store.rows(.notebookNotes).map(\.id).sorted() == ["live", "new", "racing"])
    }

    @Test("store.sqlite linking anywhere pixie does not put its stores is refused, with what to do")
    func foreignLink() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = try home()
        let elsewhere = directory.appendingPathComponent("elsewhere.sqlite")
        try Data().write(to: elsewhere)
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: elsewhere.path)
        #expect {
            try DeviceStore(home: home)
        } throws: { error in
            "\(error)".contains("which pixie did not make")
        }
    }

    @Test("signing out erases every file of the store, waits for no import, and a store still open elsewhere says so")
    func erase() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = try home()
        let store = try DeviceStore(home: home)
        let other = try DeviceStore(home: home)
        try store.put(.notebookNotes, id: "live", fields: ["title": .text("l"), "body": .text("l")])
        let load = try StoreImport(into: store)
        _ = try load.insert(note("new", "n"))
        #expect {
            try home.erase()
        } throws: { error in
            guard case DeviceStoreError.conflict(let reason) = error else { return false }
            return reason.contains("an import into this device's store is running")
        }
        #expect(try load.commit() == 0)
        #expect(try other.row(.notebookNotes, id: "new") != nil)

        try home.erase()
        #expect(try storeFiles().isEmpty)
        // The other process's next read and write fail with the reason; neither brings an empty store back.
        for attempt in [
            { _ = try other.row(.notebookNotes, id: "live") },
            { _ = try other.put(.notebookNotes, id: "x", fields: ["title": .text("x"), "body": .text("x")]) },
        ] {
            #expect {
                try attempt()
            } throws: { error in
                "\(error)".contains("is gone")
            }
        }
        #expect(try storeFiles().isEmpty)
    }
}
