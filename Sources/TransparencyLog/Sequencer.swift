import Foundation
import SiblingsCrypto
import Storage
import Transparency

/// The log's writer and prover on the server: queues key-binding updates, integrates them in batches (one SQL
/// transaction and one signature per batch, at most one batch per `interval`), and acknowledges each update
/// only once a signed checkpoint includes it. The prover API (``latestCheckpoint()``,
/// ``consistencyProof(from:to:)``, ``lookup(_:withInclusion:)``, ``entries(_:)``) answers from the same state.
///
/// State: the tables of ``TransparencySchema`` and, in memory, the log's right edge and the map (rebuilt from
/// `transparency_entries` at start-up).
public actor Sequencer {
    /// What `append` returns: the update's entry, its log index and the first checkpoint that includes it.
    public struct Appended: Sendable {
        public let entry: Entry
        public let index: UInt64
        public let checkpoint: Checkpoint
    }

    /// Updates queued together, and who waits for them: they are integrated in the same batch.
    private struct Pending {
        let updates: [(Label, Data)]
        let continuation: CheckedContinuation<[Appended], any Error>
    }

    private let database: any SQLDatabase
    private let key: HybridSignature.PrivateKey
    public nonisolated let logKey: LogKey
    private let interval: Duration
    private let sleep: @Sendable (Duration) async throws -> Void
    private let now: @Sendable () -> UInt64

    private var frontier: LogFrontier
    private var map: VerifiableMap
    private var checkpoint: Checkpoint
    private var pending: [Pending] = []
    private var flushing = false
    /// Set when a batch failed and the in-memory state could not be reloaded from the database: the map may hold
    /// leaves that were never stored, so nothing is written or proved until a reload succeeds.
    private var needsReload = false
    /// When the last batch was integrated (for the interval between checkpoints).
    private var lastIntegration: ContinuousClock.Instant?
    /// The number of checkpoints this sequencer has signed since it started.
    public private(set) var checkpointsSigned = 0

    /// Opens (or creates) the log in `database` under `origin`, signing with `key`.
    ///
    /// - Parameters:
    ///   - interval: the least time between checkpoints (one second by default); updates wait up to this long.
    ///     Measured on the continuous clock; `sleep` is handed what remains of it (zero on a quiet log).
    ///   - sleep: how to wait (tests inject a fast one).
    ///   - now: milliseconds since 1970 for entry timestamps.
    public init(
        database: any SQLDatabase, key: HybridSignature.PrivateKey, origin: String,
        interval: Duration = .seconds(1),
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        now: @escaping @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }
    ) throws {
        try database.migrate(component: TransparencySchema.component, migrations: TransparencySchema.migrations)
        let logKey = try LogKey(origin: origin, publicKey: key.publicKey)
        let state = try Sequencer.load(database: database, key: key, logKey: logKey)
        self.database = database
        self.key = key
        self.logKey = logKey
        self.interval = interval
        self.sleep = sleep
        self.now = now
        self.frontier = state.frontier
        self.map = state.map
        self.checkpoint = state.checkpoint
    }

    /// Reads the latest checkpoint, rebuilds the right edge and the map, and checks they agree with it; signs the
    /// empty checkpoint for a new log.
    private static func load(
        database: any SQLDatabase, key: HybridSignature.PrivateKey, logKey: LogKey
    ) throws
        -> (frontier: LogFrontier, map: VerifiableMap, checkpoint: Checkpoint)
    {
        // A new log's empty checkpoint, signed by whichever node gets the writer's lock first.
        try database.transaction(exclusive: writerLock) { sql in
            guard try sql.queryOne("SELECT size FROM transparency_checkpoints LIMIT 1", []) == nil else { return }
            let empty = try Checkpoint.sign(
                size: 0, logRoot: MerkleLog.emptyRoot, mapRoot: .zero, origin: logKey.origin, key: key)
            try sql.execute(
                "INSERT INTO transparency_checkpoints (size, note) VALUES (?, ?)", [.integer(0), .text(empty.note)])
        }
        guard
            let row = try database.queryOne(
                "SELECT note FROM transparency_checkpoints ORDER BY size DESC LIMIT 1", [])
        else {
            throw TransparencyError(
                .logRootMismatch,
                "the log has no checkpoint, not even the empty one: restore the database from a backup")
        }
        let checkpoint = try Checkpoint(note: try row.string("note"), verifyingWith: logKey)
        let frontier = try LogFrontier(size: checkpoint.size, SQLLogStore(database))
        let map = try SQLLogStore.map(database, size: checkpoint.size)
        guard frontier.root == checkpoint.logRoot, map.root == checkpoint.mapRoot else {
            throw TransparencyError(
                .logRootMismatch,
                "the stored log does not match its latest checkpoint (size \(checkpoint.size)): the database is "
                    + "damaged; restore it from a backup")
        }
        return (frontier, map, checkpoint)
    }

    // MARK: - Writing

    /// Queues `value` as the next version of `label` and returns once a signed checkpoint includes it: at once
    /// on a quiet log, otherwise with the next batch, at most one `interval` after the previous one.
    public func append(label: Label, value: Data) async throws -> Appended {
        try await append([(label, value)])[0]
    }

    /// Queues `updates` together, in order, and returns once a signed checkpoint includes them: the same checkpoint
    /// for all of them, so a reader of the log never sees one without the others (an account's new key and the
    /// statement that rotates to it, docs/pixie-protocol.md, "Revoking a device").
    public func append(_ updates: [(Label, Data)]) async throws -> [Appended] {
        guard !updates.isEmpty else { return [] }
        if let (label, value) = updates.first(where: { $0.1.count > Entry.maximumValueByteCount }) {
            throw TransparencyError(
                .malformed,
                "the value for \(label) has \(value.count) bytes; at most \(Entry.maximumValueByteCount) fit an entry")
        }
        return try await withCheckedThrowingContinuation { continuation in
            pending.append(Pending(updates: updates, continuation: continuation))
            if !flushing {
                flushing = true
                Task { await self.flushLoop() }
            }
        }
    }

    /// Waits until one interval has passed since the last checkpoint, integrates everything queued, and repeats
    /// while updates keep arriving. An update to a quiet log is integrated at once.
    private func flushLoop() async {
        while true {
            let elapsed = lastIntegration.map { ContinuousClock.now - $0 } ?? interval
            try? await sleep(max(.zero, interval - elapsed))
            let batch = pending
            pending = []
            integrate(batch)
            if pending.isEmpty {
                flushing = false
                return
            }
        }
    }

    /// Integrates everything queued now, without waiting for the interval (graceful shutdown: call it on
    /// SIGTERM after the server stops taking requests, so no waiting update is lost).
    public func flush() {
        let batch = pending
        pending = []
        integrate(batch)
    }

    /// Integrates `batch` now (also for bulk loading in benchmarks and tests): one transaction, one signature.
    private func integrate(_ batch: [Pending]) {
        guard !batch.isEmpty else { return }
        lastIntegration = .now
        do {
            let results = try integrate(batch.flatMap(\.updates))
            var start = 0
            for pending in batch {
                pending.continuation.resume(returning: Array(results[start..<(start + pending.updates.count)]))
                start += pending.updates.count
            }
        } catch {
            for pending in batch { pending.continuation.resume(throwing: error) }
        }
    }

    /// Integrates `updates` at once, without waiting for the interval, and returns them in order. For loading
    /// many updates (benchmarks, migrations); servers call ``append(label:value:)``.
    @discardableResult
    public func integrate(_ updates: [(Label, Data)]) throws -> [Appended] {
        guard !updates.isEmpty else { return [] }
        try reloadIfNeeded()
        if let (label, value) = updates.first(where: { $0.1.count > Entry.maximumValueByteCount }) {
            throw TransparencyError(
                .malformed,
                "the value for \(label) has \(value.count) bytes; at most \(Entry.maximumValueByteCount) fit an entry")
        }
        let timestamp = now()
        var frontier = self.frontier
        var entries: [(index: UInt64, entry: Entry)] = []
        var mapChanged = false
        do {
            // One writer at a time across every node on the database (the lock), each starting from what the last
            // one committed. PostgreSQL may run this body again after a failure to commit (docs/storage.md): a map
            // that an earlier run changed is rebuilt from what is stored.
            let checkpoint = try database.transaction(exclusive: Self.writerLock) { sql -> Checkpoint in
                if mapChanged { map = try SQLLogStore.map(sql, size: self.frontier.size) }
                mapChanged = true
                (frontier, _) = try catchUp(sql)
                entries = []
                var versions: [Label: UInt64] = [:]
                var leaves: [(key: Hash256, value: Hash256)] = []
                for (label, value) in updates {
                    let previous = try versions[label] ?? SQLLogStore.latestVersion(sql, label: label)
                    let entry = try Entry(label: label, version: previous + 1, value: value, timestamp: timestamp)
                    versions[label] = entry.version
                    let index = frontier.size
                    let encoded = entry.encoded
                    let leafHash = MerkleLog.leafHash(encoded)
                    let mapKey = entry.mapKey
                    try frontier.append(leafHash: leafHash) { level, index, hash in
                        try SQLLogStore.write(sql, level: level, index: index, hash: hash)
                    }
                    try sql.execute(
                        "INSERT INTO transparency_entries (idx, label, version, entry, leaf_hash, map_key) "
                            + "VALUES (?, ?, ?, ?, ?, ?)",
                        [
                            .integer(Int64(index)), .text(label.rawValue), .integer(Int64(entry.version)),
                            .blob(encoded), .blob(leafHash.rawRepresentation), .blob(mapKey.rawRepresentation),
                        ])
                    leaves.append((mapKey, leafHash))
                    entries.append((index, entry))
                }
                try map.insert(leaves)
                let checkpoint = try Checkpoint.sign(
                    size: frontier.size, logRoot: frontier.root, mapRoot: map.root, origin: logKey.origin, key: key)
                try sql.execute(
                    "INSERT INTO transparency_checkpoints (size, note) VALUES (?, ?)",
                    [.integer(Int64(checkpoint.size)), .text(checkpoint.note)])
                return checkpoint
            }
            self.frontier = frontier
            self.checkpoint = checkpoint
            checkpointsSigned += 1
            return entries.map { Appended(entry: $0.entry, index: $0.index, checkpoint: checkpoint) }
        } catch {
            // The map may hold leaves the rolled-back transaction never stored: rebuild it from the database.
            if mapChanged {
                needsReload = true
                try? reloadIfNeeded()
            }
            throw error
        }
    }

    /// The name of the lock every node's sequencer writes under (``Storage/SQLDatabase/transaction(exclusive:_:)``).
    static let writerLock = "transparency_log"

    /// Brings the map up to the log's latest stored checkpoint, which another node on the same database may have
    /// written, and returns the right edge and the checkpoint there (this node's own when nothing is new). Reads
    /// through `sql`, one view; the entries taken up must give the checkpoint's roots.
    private func catchUp(_ sql: any SQLQuerying) throws -> (LogFrontier, Checkpoint) {
        guard
            let row = try sql.queryOne(
                "SELECT size, note FROM transparency_checkpoints ORDER BY size DESC LIMIT 1", [])
        else { throw TransparencyError(.logRootMismatch, "the log's checkpoints are gone: restore the database") }
        let size = UInt64(try row.int64("size"))
        if size == frontier.size { return (frontier, checkpoint) }
        guard size > frontier.size else {
            throw TransparencyError(
                .logRootMismatch,
                "the stored log (size \(size)) is shorter than this node has served (\(frontier.size)): it was rolled "
                    + "back; restore the newest backup")
        }
        let stored = try Checkpoint(note: try row.string("note"), verifyingWith: logKey)
        let edge = try LogFrontier(size: size, SQLLogStore(sql))
        try map.insert(try SQLLogStore.mapLeaves(sql, frontier.size..<size))
        guard edge.root == stored.logRoot, map.root == stored.mapRoot else {
            throw TransparencyError(
                .logRootMismatch,
                "the entries another node stored do not match its checkpoint (size \(size)): the database is damaged")
        }
        return (edge, stored)
    }

    /// Takes up what other nodes on the database logged since this one last looked (a cheap read when nothing is
    /// new), so that every node proves from the latest checkpoint.
    private func follow() throws {
        try reloadIfNeeded()
        guard
            let size = try database.queryOne("SELECT MAX(size) AS size FROM transparency_checkpoints", [])?
                .optionalInt64("size"), UInt64(size) != frontier.size
        else { return }
        do {
            (frontier, checkpoint) = try database.readTransaction { try catchUp($0) }
        } catch {
            needsReload = true
            throw error
        }
    }

    private func reloadIfNeeded() throws {
        guard needsReload else { return }
        let state = try Sequencer.load(database: database, key: key, logKey: logKey)
        frontier = state.frontier
        map = state.map
        checkpoint = state.checkpoint
        needsReload = false
    }

    // MARK: - Prover

    /// The newest signed checkpoint (taking up what other nodes logged, when it can).
    public func latestCheckpoint() -> Checkpoint {
        try? follow()
        return checkpoint
    }

    /// The checkpoint the log signed at `size`.
    public func checkpoint(size: UInt64) throws -> Checkpoint {
        guard
            let row = try database.queryOne(
                "SELECT note FROM transparency_checkpoints WHERE size = ?", [.integer(Int64(size))])
        else { throw TransparencyError(.outOfRange, "the log signed no checkpoint of size \(size)") }
        return try Checkpoint(note: try row.string("note"), verifyingWith: logKey)
    }

    /// The sizes of the signed checkpoints above `size`, oldest first, at most `limit` (for auditors).
    public func checkpointSizes(after size: UInt64, limit: Int = 1000) throws -> [UInt64] {
        try database.query(
            "SELECT size FROM transparency_checkpoints WHERE size > ? ORDER BY size LIMIT ?",
            [.integer(Int64(size)), .integer(Int64(limit))]
        ).map { UInt64(try $0.int64("size")) }
    }

    /// The RFC 9162 consistency proof between two sizes, each at most the latest checkpoint's.
    public func consistencyProof(from oldSize: UInt64, to newSize: UInt64) throws -> ConsistencyProof {
        try follow()
        guard newSize <= checkpoint.size else {
            throw TransparencyError(.outOfRange, "the log has \(checkpoint.size) entries, not \(newSize)")
        }
        return ConsistencyProof(
            oldSize: oldSize, newSize: newSize,
            hashes: try MerkleLog.consistencyProof(from: oldSize, to: newSize, SQLLogStore(database)))
    }

    /// The inclusion proof of entry `index` in the tree of `size` entries.
    public func inclusionProof(index: UInt64, size: UInt64) throws -> InclusionProof {
        try follow()
        guard size <= checkpoint.size else {
            throw TransparencyError(.outOfRange, "the log has \(checkpoint.size) entries, not \(size)")
        }
        return InclusionProof(
            index: index, treeSize: size,
            hashes: try MerkleLog.inclusionProof(index: index, size: size, SQLLogStore(database)))
    }

    /// The lookup proof for `label` at the latest checkpoint, with the entry's log inclusion proof if asked
    /// (about 20 × 32 bytes more at 10^6 entries).
    public func lookup(_ label: Label, withInclusion: Bool = false) throws -> (Checkpoint, LookupProof) {
        try follow()
        let latest = try SQLLogStore.latest(database, label: label, below: checkpoint.size)
        let version = latest?.1.version ?? 0
        let nonMembership = map.proof(for: VerifiableMap.key(label: label, version: version + 1))
        guard let (index, entry) = latest else {
            return (
                checkpoint,
                LookupProof(label: label, entry: nil, membership: nil, nonMembership: nonMembership, inclusion: nil)
            )
        }
        let inclusion = withInclusion ? try inclusionProof(index: index, size: checkpoint.size) : nil
        return (
            checkpoint,
            LookupProof(
                label: label, entry: entry, membership: map.proof(for: entry.mapKey), nonMembership: nonMembership,
                inclusion: inclusion)
        )
    }

    /// Everything a device needs to check one binding, taken at one checkpoint: the latest checkpoint, the
    /// consistency proof from the size the device has pinned (nil when it has pinned nothing or the same size),
    /// and the lookup proof for `label`.
    public func answer(for label: Label, since pinnedSize: UInt64?) throws -> LookupAnswer {
        let (checkpoint, lookup) = try self.lookup(label)
        var consistency: ConsistencyProof?
        if let pinnedSize, pinnedSize != checkpoint.size {
            consistency = try consistencyProof(from: pinnedSize, to: checkpoint.size)
        }
        return LookupAnswer(checkpoint: checkpoint.note, consistencyProof: consistency, lookup: lookup)
    }

    /// The entries `range` of the log (for auditors), at most 10,000 at a time, up to the latest checkpoint.
    public func entries(_ range: Range<UInt64>) throws -> [Entry] {
        try follow()
        guard range.upperBound <= checkpoint.size, range.count <= 10_000 else {
            throw TransparencyError(
                .outOfRange,
                "ask for at most 10000 entries below the log size \(checkpoint.size), not \(range)")
        }
        return try SQLLogStore.entries(database, range)
    }
}

/// The auditor reads the sequencer itself in tests.
extension Sequencer: LogSource {}
