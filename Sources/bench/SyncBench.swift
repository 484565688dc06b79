import Foundation
@_spi(Testing) import PixieDevice
import PixieWire
import SiblingsCrypto
import Storage

/// The reconcile loop's costs (docs/pixie-sync.md; issue 39's benchmark): the bytes and round trips of one round
/// for one category of 10^5 and 10^6 rows with 0 to 10,000 differences, beside sending the full list of (row id,
/// version) pairs (computed in the same run) and negentropy's published figures; the cost of keeping a digest
/// current on one write at two store sizes; and rebuilding every item and digest of 10^6 rows beside reading them.
func syncTable(_ options: Bench) throws {
    say("")
    say("### One round, one category: bytes and round trips")
    say("")
    say(
        "| rows | differences | digests | reconciliation | round trips to the rows | full (id, version) list | negentropy (published, 10^6) |"
    )
    say("|---:|---:|---:|---:|---:|---:|---|")
    let published: [Int: String] = [0: "~330 B, 1", 10: "~20 KB, 3", 1000: "~1.3 MB, 10+"]
    for rows in [100_000, 1_000_000] {
        let shared = (0..<rows).map {
            SyncItem(idTag: UInt64($0) &* 0x9e37_79b9_7f4a_7c15, versionTag: UInt64($0) &* 0xbf58_476d_1ce4_e5b9 >> 1)
        }
        let list = rows * (2 + 36 + 16)
        for differences in [0, 1, 10, 100, 1000, 10_000] {
            let extra = (0..<differences).map { SyncItem(idTag: ~UInt64($0) &* 31, versionTag: UInt64($0) + 7) }
            let outcome = try benchRound(local: shared, remote: shared + extra)
            say(
                "| \(rows) | \(differences) | \(outcome.digestBytes) B | \(bytes(outcome.reconciliationBytes)) | "
                    + "\(outcome.roundTrips) | \(bytes(list)) | \(rows == 1_000_000 ? published[differences] ?? "" : "") |"
            )
        }
    }

    say("")
    say("### Keeping the digest current, and rebuilding it")
    say("")
    say("| case | per operation | anchor | ratio |")
    say("|---|---:|---:|---:|")
    for size in [10_000, 100_000] {
        let seed = SecureRandom.bytes(count: 32)
        let kept = try DeviceStore(writer: try StoreWriter(author: AuthorTag(rawValue: 1), accountSeed: seed))
        let bare = try DeviceStore(writer: try StoreWriter(author: AuthorTag(rawValue: 1), accountSeed: nil))
        for store in [kept, bare] {
            for i in 0..<size {
                try store.put(.notebookNotes, id: "n\(i)", fields: ["title": .text("t"), "body": .text("b\(i)")])
            }
        }
        var next = 0
        func write(_ store: DeviceStore) throws {
            next += 1
            try store.put(
                .notebookNotes, id: "n\(next % size)", fields: ["title": .text("t"), "body": .text("x\(next)")])
        }
        var withDigest = 0.0
        var without = 0.0
        for _ in 0..<options.rounds {
            withDigest = max(withDigest, try measure(seconds: options.seconds) { try write(kept) })
            without = max(without, try measure(seconds: options.seconds) { try write(bare) })
        }
        say(
            "| one write, digest kept, in a store of \(size) rows | \(micro(withDigest)) | \(micro(without)) without items | "
                + String(format: "%.2f", without / withDigest) + " |")
    }
    // Rebuilding: 10^6 rows written straight into a store's file by SQL, then every item and digest computed.
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("sync-bench-\(UUID())")
    defer { try? FileManager.default.removeItem(at: root) }
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    let path = root.appendingPathComponent("store.sqlite").path
    let count = 1_000_000
    do {
        let database = try SQLiteDatabase(path: path)
        try database.migrate(component: "device-store", migrations: DeviceStore.schemaMigrations)
        try database.transaction { transaction in
            for i in 0..<count {
                try transaction.execute(
                    "INSERT INTO notebook_notes (id, hlc, deleted, title, body) VALUES (?, ?, 0, 't', 'b')",
                    [.text(UUID().uuidString.lowercased()), .integer(Int64(i + 1) << 16)])
            }
        }
        database.close()
    }
    let readStart = ContinuousClock.now
    do {
        let database = try SQLiteDatabase(path: path)
        var read = 0
        try database.forEachRow("SELECT id, hlc, author, deleted FROM notebook_notes", []) { _ in read += 1 }
        database.close()
    }
    let readTime = ContinuousClock.now - readStart
    let store = try DeviceStore(
        path: path, writer: try StoreWriter(author: AuthorTag(rawValue: 1), accountSeed: SecureRandom.bytes(count: 32)))
    let rebuildStart = ContinuousClock.now
    _ = try store.syncSummary()
    let rebuildTime = ContinuousClock.now - rebuildStart
    say(
        "| every item and digest of \(count) rows, from scratch | \(seconds(rebuildTime)) | \(seconds(readTime)) reading "
            + "the same columns | " + String(format: "%.1f", rebuildTime / readTime) + " |")
}

/// What one round cost, counted as docs/pixie-sync.md counts it.
private struct BenchOutcome {
    var digestBytes = 0
    var reconciliationBytes = 0
    var roundTrips = 0
}

/// One round between two sides that hold `local` and `remote` items of one category (the other categories empty),
/// run by ReconcileRound itself, counting the bytes of every message as encoded.
private func benchRound(local: [SyncItem], remote: [SyncItem]) throws -> BenchOutcome {
    let phone = BenchData(items: local)
    let laptop = BenchData(items: remote)
    let phoneInbox = try RelaySubject(rawRepresentation: Data(repeating: 1, count: 32))
    let laptopInbox = try RelaySubject(rawRepresentation: Data(repeating: 2, count: 32))
    let now = Date()
    let (opened, opening) = try ReconcileRound.open(
        half: Data(repeating: 1, count: 16), inbox: phoneInbox, sibling: AuthorTag(rawValue: 2), data: phone, now: now)
    var round = opened
    var other: ReconcileRound?
    var outcome = BenchOutcome()
    var queue: [(SiblingMessage, Bool, Int)] = [(opening, true, 1)]
    while !queue.isEmpty {
        let (message, toResponder, leg) = queue.removeFirst()
        let size = try message.encoded.count
        switch message {
        case .syncRows: outcome.roundTrips = max(outcome.roundTrips, (leg + 1) / 2)
        case .syncDigest(let digests) where digests.phase == .open || digests.phase == .answer:
            outcome.digestBytes += size
            outcome.roundTrips = max(outcome.roundTrips, 1)
        case .syncDigest: break
        default: outcome.reconciliationBytes += size
        }
        var replies: [SiblingMessage] = []
        if toResponder {
            if other == nil, case .syncDigest(let digests) = message {
                let (answer, out) = try ReconcileRound.answer(
                    digests, half: Data(repeating: 2, count: 16), inbox: laptopInbox, sibling: AuthorTag(rawValue: 1),
                    data: laptop, now: now)
                other = answer
                replies = out
            } else if var responder = other {
                replies = try responder.handle(message, data: laptop, now: now)
                other = responder
            }
        } else {
            replies = try round.handle(message, data: phone, now: now)
        }
        queue += replies.map { ($0, !toResponder, leg + 1) }
    }
    return outcome
}

/// One side's items of the notebook, standing in for a store: rows are small notes, applying them changes nothing.
private struct BenchData: ReconcileData {
    let items: [SyncItem]

    func syncSummary() throws -> SyncSummary? {
        SyncSummary(
            digests: StoreCategory.allCases.map { $0 == .notebookNotes ? SyncDigest(items: items) : SyncDigest() },
            seq: 1, hlc: 1)
    }
    func items(_ category: StoreCategory) throws -> [SyncItem] { category == .notebookNotes ? items : [] }
    func rows(_ category: StoreCategory, items: [SyncItem]) throws -> [StoreRow] {
        items.map { Self.row($0) }
    }
    func rows(_ category: StoreCategory, includingDeleted: Bool) throws -> [StoreRow] { [] }
    func apply(_ rows: [StoreRow], maximumLead: Duration) throws -> DeviceStore.ApplyReport { .init() }
    func recordAgreement(with sibling: AuthorTag, category: StoreCategory, seq: Int64, at: Date) throws {}

    static func row(_ item: SyncItem) -> StoreRow {
        StoreRow(
            category: .notebookNotes, id: item.description, version: RowVersion(hlc: 1 << 40, author: .migrated),
            isDeleted: false, fields: ["title": .text("t"), "body": .text("b")])
    }
}

private func bytes(_ count: Int) -> String {
    count < 10_000
        ? "\(count) B"
        : count < 10_000_000
            ? String(format: "%.1f KB", Double(count) / 1000) : String(format: "%.1f MB", Double(count) / 1e6)
}

private func micro(_ perSecond: Double) -> String { String(format: "%.1f µs", 1e6 / perSecond) }

private func seconds(_ duration: Duration) -> String {
    let (s, atto) = duration.components
    return String(format: "%.2f s", Double(s) + Double(atto) / 1e18)
}
