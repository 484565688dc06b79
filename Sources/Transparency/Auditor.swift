import Foundation

/// Where an auditor reads a log: the prover API, over HTTP (`PixieServer.HTTPLogSource`, which
/// `pixie-server audit` uses) or, in tests, the sequencer itself (`TransparencyLog.Sequencer`).
public protocol LogSource: Sendable {
    func checkpointSizes(after size: UInt64, limit: Int) async throws -> [UInt64]
    func checkpoint(size: UInt64) async throws -> Checkpoint
    func entries(_ range: Range<UInt64>) async throws -> [Entry]
    func consistencyProof(from oldSize: UInt64, to newSize: UInt64) async throws -> ConsistencyProof
}

/// A check the auditor runs on what the entries say, beside the log's own structure: a service's rule about its
/// values, such as PixieWire's `AccountRotationRule` (every account key after the first comes with a rotation
/// signed by the old key and the new). A rule keeps what it needs of earlier checkpoints itself.
public protocol AuditRule: Sendable {
    /// The entries one checkpoint adds, in log order; throws ``TransparencyError/Code/badValue`` saying what the
    /// log holds that breaks the rule.
    mutating func check(_ entries: [Entry]) throws(TransparencyError)
}

/// The auditor: follows a log from its start, checkpoint by checkpoint, and recomputes everything the log
/// signs: each checkpoint must extend the last (consistency proof), the entries must hash to its log root (an
/// entry rewritten or missing is `.logRootMismatch`), versions of a label must run 1, 2, 3, ... (`.versionGap`),
/// and the map rebuilt from the entries must have its map root (an update withheld from the map is
/// `.mapRootMismatch`); then each ``AuditRule`` reads the checkpoint's entries. After the first failure the auditor
/// refuses to go on: the log is not to be trusted.
public struct Auditor: Sendable {
    public let logKey: LogKey
    /// The last checkpoint that passed every check.
    public private(set) var checkpoint: Checkpoint?
    /// The first failure; every later call rethrows it.
    public private(set) var failure: TransparencyError?
    private var log = MemoryLogStore()
    private var map = VerifiableMap()
    private var versions: [Label: UInt64] = [:]
    private var rules: [any AuditRule]

    public init(logKey: LogKey, rules: [any AuditRule] = []) {
        self.logKey = logKey
        self.rules = rules
    }

    /// The number of entries checked so far.
    public var size: UInt64 { log.size }

    /// Checks the checkpoint `note` given the entries after the last checkpoint and a consistency proof from it.
    @discardableResult
    public mutating func ingest(
        checkpoint note: String, entries: [Entry], consistencyProof: ConsistencyProof?
    )
        throws -> Checkpoint
    {
        if let failure { throw failure }
        do {
            return try check(note: note, entries: entries, consistencyProof: consistencyProof)
        } catch let error as TransparencyError {
            failure = error
            throw error
        }
    }

    private mutating func check(
        note: String, entries: [Entry], consistencyProof: ConsistencyProof?
    ) throws
        -> Checkpoint
    {
        var verifier = TransparencyVerifier(logKey: logKey, pinned: checkpoint)
        let new = try verifier.accept(checkpoint: note, consistencyProof: checkpoint == nil ? nil : consistencyProof)
        guard UInt64(entries.count) == new.size - log.size else {
            throw TransparencyError(
                .logRootMismatch,
                "checkpoint \(new.size) follows \(log.size) entries, but \(entries.count) entries came with it")
        }
        var leaves: [(key: Hash256, value: Hash256)] = []
        for entry in entries {
            let expected = (versions[entry.label] ?? 0) + 1
            guard entry.version == expected else {
                throw TransparencyError(
                    .versionGap,
                    "entry \(log.size) is version \(entry.version) of \(entry.label), but the next version is "
                        + "\(expected)")
            }
            versions[entry.label] = expected
            let leafHash = entry.leafHash
            log.append(leafHash: leafHash)
            leaves.append((entry.mapKey, leafHash))
        }
        guard log.root == new.logRoot else {
            throw TransparencyError(
                .logRootMismatch,
                "the entries do not hash to the log root of checkpoint \(new.size): an entry was rewritten, added or "
                    + "left out")
        }
        try map.insert(leaves)
        guard map.root == new.mapRoot else {
            throw TransparencyError(
                .mapRootMismatch,
                "the map rebuilt from the entries differs from the map root of checkpoint \(new.size): an update "
                    + "was withheld from the map (or a binding was added without an entry)")
        }
        for index in rules.indices { try rules[index].check(entries) }
        checkpoint = new
        return new
    }

    /// Follows `source` from where this auditor stands to its latest checkpoint, at most 10,000 entries per step.
    /// Returns the number of checkpoints checked.
    @discardableResult
    public mutating func follow(_ source: some LogSource) async throws -> Int {
        var checked = 0
        if checkpoint == nil {
            let first = try await source.checkpoint(size: 0)
            try ingest(checkpoint: first.note, entries: [], consistencyProof: nil)
            checked += 1
        }
        while true {
            let from = log.size
            let sizes = try await source.checkpointSizes(after: from, limit: 1000)
            guard !sizes.isEmpty else { return checked }
            for size in sizes {
                let from = log.size
                var entries: [Entry] = []
                var start = from
                while start < size {
                    let end = min(size, start + 10_000)
                    entries += try await source.entries(start..<end)
                    start = end
                }
                let note = try await source.checkpoint(size: size).note
                let proof = try await source.consistencyProof(from: from, to: size)
                try ingest(checkpoint: note, entries: entries, consistencyProof: proof)
                checked += 1
            }
        }
    }
}
