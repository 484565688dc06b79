import Foundation
import SiblingsTestSupport
import Storage
import StoragePostgreSQL
import Testing
import Transparency
import TransparencyLog

@Suite struct SequencerTests {
    /// `append` returns only after a signed checkpoint includes the entry, and that checkpoint proves it.
    @Test func acknowledgesOnlyAfterInclusion() async throws {
        let gate = Gate()
        let sequencer = try makeSequencer(try SQLiteDatabase.inMemory(), sleep: { _ in await gate.wait() })
        let acknowledged = Flag()
        let task = Task {
            let result = try await sequencer.append(label: "account/alice", value: Data("key-1".utf8))
            await acknowledged.set()
            return result
        }
        try await Task.sleep(for: .milliseconds(30))
        #expect(await !acknowledged.isSet)
        #expect(await sequencer.latestCheckpoint().size == 0)
        await gate.open()
        let result = try await task.value
        #expect(await acknowledged.isSet)
        #expect(result.index == 0 && result.entry.version == 1 && result.checkpoint.size == 1)
        let proof = try await sequencer.inclusionProof(index: result.index, size: result.checkpoint.size)
        #expect(proof.verify(leafHash: result.entry.leafHash, root: result.checkpoint.logRoot))
        #expect(try Checkpoint(note: result.checkpoint.note, verifyingWith: testLogKey) == result.checkpoint)
    }

    /// An update to a quiet log waits for nothing; the next batch waits for what remains of the interval.
    @Test func waitsOnlyForWhatRemainsOfTheInterval() async throws {
        let requested = Recorder()
        let sequencer = try makeSequencer(
            try SQLiteDatabase.inMemory(), interval: .seconds(3600), sleep: { await requested.record($0) })
        _ = try await sequencer.append(label: "account/a", value: Data([1]))
        _ = try await sequencer.append(label: "account/a", value: Data([2]))
        let waits = await requested.durations
        #expect(waits.count == 2)
        #expect(waits.first == .zero)
        // What remains of the interval: all of it but the real time between the two appends. The interval is
        // an hour (the sleep is injected and never waits), so however a loaded machine stretches that time,
        // less than a minute of it is gone.
        #expect(waits.last.map { $0 > .seconds(3600 - 60) && $0 < .seconds(3600) } == true, "\(waits)")
    }

    /// `flush()` integrates what is queued at once (shutdown), without waiting for the interval.
    @Test func flushIntegratesAtOnce() async throws {
        let gate = Gate()
        let sequencer = try makeSequencer(try SQLiteDatabase.inMemory(), sleep: { _ in await gate.wait() })
        let task = Task { try await sequencer.append(label: "oprf-keys", value: Data("k".utf8)) }
        while await sequencer.latestCheckpoint().size == 0 {
            await sequencer.flush()
            try await Task.sleep(for: .milliseconds(1))
        }
        let result = try await task.value
        #expect(result.checkpoint.size == 1 && result.entry.label == "oprf-keys")
        await gate.open()
    }

    /// Many concurrent appends become few checkpoints; versions of one label run 1, 2, 3, ... without gaps.
    @Test func batchesConcurrentAppends() async throws {
        // 200 ms: the 300 tasks reach the sequencer within a few intervals even when the suite keeps both
        // cores busy.
        let sequencer = try makeSequencer(try SQLiteDatabase.inMemory(), interval: .milliseconds(200))
        let results = try await withThrowingTaskGroup(of: Sequencer.Appended.self) { group in
            for i in 0..<300 {
                group.addTask {
                    try await sequencer.append(
                        label: i % 3 == 0 ? "devices/shared" : try Label("account/\(i)"), value: Data([UInt8(i & 0xFF)])
                    )
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 300)
        let signed = await sequencer.checkpointsSigned
        #expect(signed >= 1 && signed <= 10, "300 appends took \(signed) checkpoints")
        #expect(Set(results.map(\.index)) == Set(0..<300))
        let shared = results.filter { $0.entry.label == "devices/shared" }.map(\.entry.version).sorted()
        #expect(shared == Array(1...100))
        for result in results { #expect(result.index < result.checkpoint.size) }
        let latest = await sequencer.latestCheckpoint()
        #expect(latest.size == 300)

        var verifier = TransparencyVerifier(logKey: testLogKey)
        try verifier.accept(checkpoint: latest.note, consistencyProof: nil)
        let (_, lookup) = try await sequencer.lookup("devices/shared", withInclusion: true)
        let entry = try verifier.verifyLookup(try LookupProof(encoded: lookup.encoded), for: "devices/shared")
        #expect(entry?.version == 100)
        let (_, absent) = try await sequencer.lookup("account/nobody")
        #expect(try verifier.verifyLookup(absent, for: "account/nobody") == nil)

        var auditor = Auditor(logKey: testLogKey)
        let checked = try await auditor.follow(sequencer)
        #expect(checked == signed + 1)
        #expect(auditor.checkpoint == latest)
    }

    /// Updates appended together share one checkpoint, in the order given, among single appends arriving at once; a
    /// batch with one value too large is refused whole.
    @Test func aBatchSharesOneCheckpoint() async throws {
        let sequencer = try makeSequencer(try SQLiteDatabase.inMemory(), interval: .milliseconds(20))
        let batches = try await withThrowingTaskGroup(of: [Sequencer.Appended].self) { group in
            for i in 0..<40 {
                group.addTask {
                    if i.isMultiple(of: 2) {
                        return [try await sequencer.append(label: try Label("devices/\(i)"), value: Data([1]))]
                    }
                    return try await sequencer.append([
                        (try Label("account/\(i)"), Data([2])), (try Label("account-rotation/\(i)"), Data([3])),
                        (try Label("discovery/\(i)"), Data([4])), (try Label("account/\(i)"), Data([5])),
                    ])
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for batch in batches where batch.count == 4 {
            #expect(Set(batch.map(\.checkpoint.size)).count == 1, "a batch straddled checkpoints")
            #expect(batch.map(\.index) == Array(batch[0].index..<(batch[0].index + 4)))
            #expect(batch.map(\.entry.value) == [Data([2]), Data([3]), Data([4]), Data([5])])
            #expect(batch[3].entry.version == 2)
        }
        let before = await sequencer.latestCheckpoint().size
        let tooLarge = Data(count: Entry.maximumValueByteCount + 1)
        await #expect(throws: TransparencyError.self) {
            _ = try await sequencer.append([("account/x", Data([1])), ("account/y", tooLarge)])
        }
        #expect(await sequencer.latestCheckpoint().size == before)
        #expect(try await sequencer.append([]).isEmpty)
    }

    /// The log survives a restart: the right edge and the map are rebuilt and match the stored checkpoint.
    @Test func reopens() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kt-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("kt.sqlite").path
        let first: Checkpoint
        do {
            let database = try SQLiteDatabase(path: path)
            let sequencer = try makeSequencer(database)
            try await sequencer.integrate((0..<50).map { (try Label("account/\($0 % 7)"), Data([UInt8($0)])) })
            _ = try await sequencer.append(label: "account/1", value: Data("x".utf8))
            first = await sequencer.latestCheckpoint()
            database.close()
        }
        let sequencer = try makeSequencer(try SQLiteDatabase(path: path))
        #expect(await sequencer.latestCheckpoint() == first)
        let next = try await sequencer.append(label: "account/1", value: Data("y".utf8))
        #expect(next.entry.version == 9 && next.index == 51)
        let proof = try await sequencer.consistencyProof(from: first.size, to: next.checkpoint.size)
        #expect(proof.verify(oldRoot: first.logRoot, newRoot: next.checkpoint.logRoot))
    }

    /// The SQL store (complete-subtree rows written by the sequencer) gives the same roots and proofs as the
    /// in-memory one, for every checkpoint and every pair of sizes between them.
    @Test func storedSubtreesMatchMemory() async throws {
        let sequencer = try makeSequencer(try SQLiteDatabase.inMemory())
        var next = 0
        for batch in [1, 2, 5, 1, 50, 79, 3] {
            try await sequencer.integrate((next..<next + batch).map { (try Label("account/\($0 % 11)"), Data([1])) })
            next += batch
        }
        let entries = try await sequencer.entries(0..<UInt64(next))
        var memory = MemoryLogStore()
        var roots: [UInt64: Hash256] = [0: MerkleLog.emptyRoot]
        for entry in entries {
            memory.append(leafHash: entry.leafHash)
            roots[memory.size] = memory.root
        }
        let sizes = try await [0] + sequencer.checkpointSizes(after: 0, limit: 100)
        #expect(sizes == [0, 1, 3, 8, 9, 59, 138, 141])
        for size in sizes {
            let checkpoint = try await sequencer.checkpoint(size: size)
            #expect(checkpoint.logRoot == roots[size])
            #expect(
                checkpoint.mapRoot
                    == (try VerifiableMap(leaves: entries.prefix(Int(size)).map { ($0.mapKey, $0.leafHash) }).root))
            for old in sizes where old <= size {
                let proof = try await sequencer.consistencyProof(from: old, to: size)
                #expect(proof.hashes == (try MerkleLog.consistencyProof(from: old, to: size, memory)))
                #expect(proof.verify(oldRoot: roots[old]!, newRoot: checkpoint.logRoot))
            }
            for index in stride(from: 0, to: size, by: 7) {
                let proof = try await sequencer.inclusionProof(index: index, size: size)
                #expect(proof.verify(leafHash: entries[Int(index)].leafHash, root: checkpoint.logRoot))
            }
        }
    }

    /// A batch that cannot be stored fails every append in it; nothing is acknowledged and the state is unchanged.
    @Test func failedBatchFailsEveryAppend() async throws {
        let database = try SQLiteDatabase.inMemory()
        let sequencer = try makeSequencer(database)
        _ = try await sequencer.append(label: "account/a", value: Data([1]))
        let before = await sequencer.latestCheckpoint()
        try database.execute("DROP TABLE transparency_checkpoints")
        let failures = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<10 {
                group.addTask {
                    do {
                        _ = try await sequencer.append(label: try Label("account/\(i)"), value: Data([2]))
                        return false
                    } catch {
                        return true
                    }
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(failures == 10)
        #expect(await sequencer.latestCheckpoint() == before)
        #expect(try database.queryOne("SELECT COUNT(*) AS n FROM transparency_entries")?.int("n") == 1)
        // Until the state can be reloaded, nothing is proved from a map that may hold unstored leaves.
        await #expect(throws: (any Error).self) { try await sequencer.lookup("account/a") }
        // Once the database is whole again, the sequencer reloads and carries on from the last checkpoint.
        try database.execute("CREATE TABLE transparency_checkpoints (size BIGINT PRIMARY KEY, note TEXT NOT NULL)")
        try database.execute(
            "INSERT INTO transparency_checkpoints (size, note) VALUES (?, ?)",
            [.integer(Int64(before.size)), .text(before.note)])
        let next = try await sequencer.append(label: "account/b", value: Data([3]))
        #expect(next.index == 1 && next.checkpoint.size == 2)
        var auditor = Auditor(logKey: testLogKey)
        try auditor.ingest(
            checkpoint: next.checkpoint.note, entries: try await sequencer.entries(0..<2), consistencyProof: nil)
    }

    /// PostgreSQL runs a transaction body again after a serialization failure (docs/storage.md): here every
    /// batch's first run is rolled back after its body finished (as a failed COMMIT is), and the second commits.
    /// The log must come out as if each batch ran once: no gap in the indexes, the map without the rolled-back
    /// run's leaves, each update acknowledged with its own index, and a log that reopens and audits.
    @Test func batchRunTwiceByTheDatabase() async throws {
        let database = try SQLiteDatabase.inMemory()
        let sequencer = try makeSequencer(RunsEveryTransactionTwice(database))
        var appended: [Sequencer.Appended] = []
        for batch in [1, 3, 7] {
            appended += try await sequencer.integrate(
                (0..<batch).map { (try Label("account/\($0 % 4)"), Data([UInt8(batch), UInt8($0)])) })
        }
        #expect(appended.map(\.index) == Array(0..<11))
        #expect(try database.queryOne("SELECT COUNT(*) AS n FROM transparency_entries")?.int("n") == 11)
        let latest = await sequencer.latestCheckpoint()
        #expect(latest.size == 11)
        let entries = try await sequencer.entries(0..<11)
        #expect(entries == appended.map(\.entry))
        var auditor = Auditor(logKey: testLogKey)
        try auditor.ingest(checkpoint: latest.note, entries: entries, consistencyProof: nil)
        // A sequencer opened on what was committed agrees.
        #expect(try await makeSequencer(database).latestCheckpoint() == latest)
    }

    /// Two nodes' sequencers on one database (two connections to one SQLite file, or two pools on one PostgreSQL
    /// schema), appending at once: one writer at a time, each taking up what the other logged, so the log has no
    /// fork or gap, each update is acknowledged with the checkpoint that includes it, and a lookup on either node
    /// proves the other's latest entry.
    @Test(arguments: ["sqlite", "postgres"])
    func twoNodesOneLog(backend: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kt-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let postgresURL = backend == "postgres" ? try TestDatabase.scratchPostgresURL() : nil
        func open() throws -> any SQLDatabase {
            if let postgresURL { return try PostgreSQLDatabase(url: postgresURL) }
            return try SQLiteDatabase(path: directory.appendingPathComponent("kt.sqlite").path)
        }
        let nodes = [try makeSequencer(try open()), try makeSequencer(try open())]
        let appended = try await withThrowingTaskGroup(of: Sequencer.Appended.self) { group in
            for index in 0..<40 {
                group.addTask {
                    try await nodes[index % 2].append(
                        label: try Label("account/\(index % 5)"), value: Data([UInt8(index)]))
                }
            }
            return try await group.reduce(into: [Sequencer.Appended]()) { $0.append($1) }
        }
        #expect(Set(appended.map(\.index)) == Set(0..<40))
        // Each label's versions are 1...8, in some order of the two nodes' writes: no version written twice.
        for label in 0..<5 {
            let versions = appended.filter { $0.entry.label.rawValue == "account/\(label)" }.map(\.entry.version)
            #expect(versions.sorted() == Array(1...8))
        }
        let latest = [await nodes[0].latestCheckpoint(), await nodes[1].latestCheckpoint()]
        #expect(latest[0] == latest[1] && latest[0].size == 40)
        var auditor = Auditor(logKey: testLogKey)
        try auditor.ingest(
            checkpoint: latest[0].note, entries: try await nodes[1].entries(0..<40), consistencyProof: nil)
        for update in appended {
            let proof = try await nodes[0].consistencyProof(from: update.checkpoint.size, to: latest[0].size)
            #expect(proof.verify(oldRoot: update.checkpoint.logRoot, newRoot: latest[0].logRoot))
        }
        // A node that wrote nothing since proves the other's latest write.
        let last = try await nodes[0].append(label: "account/0", value: Data("last".utf8))
        let (checkpoint, lookup) = try await nodes[1].lookup("account/0")
        #expect(checkpoint == last.checkpoint)
        #expect(lookup.entry == last.entry)
    }

    @Test func refusesOversizedValuesAndBadRanges() async throws {
        let sequencer = try makeSequencer(try SQLiteDatabase.inMemory())
        await #expect(throws: TransparencyError.self) {
            try await sequencer.append(label: "a", value: Data(count: Entry.maximumValueByteCount + 1))
        }
        await #expect(throws: TransparencyError.self) {
            try await sequencer.integrate([("a", Data()), ("b", Data(count: Entry.maximumValueByteCount + 1))])
        }
        #expect(await sequencer.latestCheckpoint().size == 0)
        await #expect(throws: TransparencyError.self) { try await sequencer.entries(0..<1) }
        await #expect(throws: TransparencyError.self) { try await sequencer.consistencyProof(from: 0, to: 1) }
    }
}

actor Flag {
    private(set) var isSet = false
    func set() { isSet = true }
}

actor Recorder {
    private(set) var durations: [Duration] = []
    func record(_ duration: Duration) { durations.append(duration) }
}

/// A database whose every write transaction runs its body twice: the first run is rolled back once the body has
/// returned (a serialization failure at COMMIT), the second commits; what PostgreSQLDatabase does on 40001.
private struct RunsEveryTransactionTwice: SQLDatabase {
    let database: SQLiteDatabase
    init(_ database: SQLiteDatabase) { self.database = database }

    private struct RolledBack: Error {}

    func execute(_ sql: String, _ params: [SQLValue]) throws -> Int { try database.execute(sql, params) }
    func query(_ sql: String, _ params: [SQLValue]) throws -> [SQLRow] { try database.query(sql, params) }
    func queryOne(_ sql: String, _ params: [SQLValue]) throws -> SQLRow? { try database.queryOne(sql, params) }
    func readTransaction<T>(_ body: (any SQLQuerying) throws -> T) throws -> T { try database.readTransaction(body) }

    func transaction<T>(_ body: (any SQLTransaction) throws -> T) throws -> T {
        do {
            try database.transaction { transaction in
                _ = try body(transaction)
                throw RolledBack()
            }
        } catch is RolledBack {}
        return try database.transaction(body)
    }

    func transaction<T>(exclusive name: String, _ body: (any SQLTransaction) throws -> T) throws -> T {
        try transaction(body)
    }
}
