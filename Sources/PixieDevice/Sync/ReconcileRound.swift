import Foundation
import PixieWire

/// What a reconcile round reads and writes of this device's store (``DeviceStore`` is one; docs/pixie-sync.md).
package protocol ReconcileData {
    /// The digests, arrival counter and clock, read at one moment.
    func syncSummary() throws -> SyncSummary?
    /// Every item of a category.
    func items(_ category: StoreCategory) throws -> [SyncItem]
    /// The rows of a category whose items are `items` (those still held).
    func rows(_ category: StoreCategory, items: [SyncItem]) throws -> [StoreRow]
    /// Every row of a category, tombstones included.
    func rows(_ category: StoreCategory, includingDeleted: Bool) throws -> [StoreRow]
    /// Folds a sibling's rows in.
    func apply(_ rows: [StoreRow], maximumLead: Duration) throws -> DeviceStore.ApplyReport
    /// Records that this device's digest of `category` equalled `sibling`'s when its arrival counter read `seq`.
    func recordAgreement(with sibling: AuthorTag, category: StoreCategory, seq: Int64, at: Date) throws
}

/// One reconcile round with one sibling, from one side (docs/pixie-sync.md, "Rounds"): it takes the sibling's
/// messages and returns the messages to send back, reading and folding into the store as the round goes. The
/// relay, the sealing and the timers are the caller's (``SyncLoop``); this type decides.
///
/// The initiator opens with its digests; the responder answers with its own and a first sketch of each category
/// that differs; the initiator decodes each difference, sends the rows the responder lacks and asks for the ones it
/// lacks (unmatched tombstones neither way); the responder answers with rows; the initiator applies them and
/// closes with the digests the responder should now hold, which the responder's close answer confirms. Every
/// category found equal on both sides is recorded as an agreement.
package struct ReconcileRound {
    package enum Role: Sendable { case initiator, responder }

    /// The first batch of symbols is at least this many (docs/pixie-sync.md, "How many symbols"). Both sides size
    /// the batch alike, so it is the protocol's, not a setting.
    static let minimumSymbols = 48

    /// How far ahead of this device's clock a row may be.
    package struct Configuration: Sendable {
        package var maximumLead: Duration = HybridLogicalClock.defaultMaximumLead
        package init() {}
    }

    /// What the round did, for `pixie sync` and the log.
    package struct Report: Sendable, Equatable {
        /// Categories found equal, so agreed.
        package var agreed: Set<StoreCategory> = []
        /// Categories that differed.
        package var differed: Set<StoreCategory> = []
        package var rowsSent = 0
        package var rowsApplied = 0
        package var rowsHeld = 0
        package var rowsRefused: [String] = []
        /// Rows too large for a frame that could not go through blob-svc either (its upload failed), left out.
        package var rowsTooLarge = 0
        /// The sibling's wall clock minus this device's, when it told us (milliseconds).
        package var clockDifference: Int64?
    }

    package let role: Role
    package private(set) var id: SyncRoundID
    /// This device's inbox, which every message names as its sender.
    let inbox: RelaySubject
    /// The sibling, for agreements.
    package let sibling: AuthorTag
    let configuration: Configuration
    package private(set) var report = Report()
    package private(set) var isFinished = false

    /// The categories still being decoded (initiator), with what is known of each.
    private var decoding: [StoreCategory: Decoding] = [:]
    /// Row batches still expected from the responder (initiator).
    private var awaitingRows = 0
    /// The digest the responder should hold at the close, per category: the unmatched tombstones either way.
    private var unmatched: [StoreCategory: (local: [SyncItem], remote: [SyncItem])] = [:]
    /// The digests this side expects the other to hold (initiator, after the close), and its arrival counter when
    /// it computed them: an agreement the close answer confirms covers what had arrived by then, and nothing later.
    private var expected: (digests: [SyncDigest], seq: Int64)?
    /// The initiator's digests as its opening said them: what the responder compared with and sized its sketches by.
    private var opening: [SyncDigest]?
    private var nextBatch: UInt16 = 0
    private var batchesSeen: Set<UInt16> = []
    /// Rows too large for a frame, waiting for the caller to put them on blob-svc (``takeLargeRows()``), and whether
    /// their blob record's batch is to be the last of an answer.
    private var largeRows: [StoreRow] = []
    private var largeRowsEndAnswer = false
    /// Blob records received, waiting for the caller to fetch them (``takeBlobRecords()``), and how many last
    /// batches (initiator) wait for them before they count as arrived.
    private var blobRecords: [SyncBlobRecord] = []
    private var lastBatchesAwaitingBlobs = 0

    private struct Decoding {
        var decoder: RatelessDecoder?
        var list: [SyncItem] = []
        var remoteTotal: UInt32
        var local: [SyncItem]
        /// The symbols asked for so far (the first batch, then each request): more are asked for only once these
        /// have all come.
        var requested: Int
    }

    private init(role: Role, id: SyncRoundID, inbox: RelaySubject, sibling: AuthorTag, configuration: Configuration) {
        self.role = role
        self.id = id
        self.inbox = inbox
        self.sibling = sibling
        self.configuration = configuration
    }

    private var header: SyncRoundHeader { SyncRoundHeader(round: id, sender: inbox) }

    // MARK: starting

    /// Opens a round as the initiator: the message to send is the opening digest.
    package static func open(
        half: Data, inbox: RelaySubject, sibling: AuthorTag, data: some ReconcileData, now: Date,
        configuration: Configuration = Configuration()
    ) throws -> (ReconcileRound, SiblingMessage) {
        var round = ReconcileRound(
            role: .initiator, id: try SyncRoundID(initiator: half), inbox: inbox, sibling: sibling,
            configuration: configuration)
        let summary = try Self.summary(data)
        round.opening = summary.digests
        return (round, .syncDigest(round.digests(.open, summary.digests, summary, now: now)))
    }

    /// Answers an opening as the responder: records an agreement for each equal category, and returns the answer and
    /// the first sketch of each category that differs.
    package static func answer(
        _ opening: SyncDigests, half: Data, inbox: RelaySubject, sibling: AuthorTag, data: some ReconcileData,
        now: Date, configuration: Configuration = Configuration()
    ) throws -> (ReconcileRound, [SiblingMessage]) {
        guard opening.phase == .open else {
            throw ReconcileError.unexpected("a round starts with an opening digest, not phase \(opening.phase)")
        }
        var round = ReconcileRound(
            role: .responder, id: try opening.header.round.answered(by: half), inbox: inbox, sibling: sibling,
            configuration: configuration)
        round.report.clockDifference = Int64(bitPattern: opening.wallClock) - Self.milliseconds(now)
        let summary = try Self.summary(data)
        var out: [SiblingMessage] = [.syncDigest(round.digests(.answer, summary.digests, summary, now: now))]
        for (index, category) in StoreCategory.allCases.enumerated() {
            let mine = summary.digests[index]
            let theirs = opening.digests[index]
            if mine == theirs {
                try round.agree(category, summary: summary, data: data, now: now)
            } else {
                round.report.differed.insert(category)
                if mine.count > 0, theirs.count > 0 {
                    out += try round.firstSketch(category, mine: mine, theirs: theirs, data: data)
                }
            }
        }
        round.isFinished = round.report.differed.isEmpty
        return (round, out)
    }

    // MARK: the round

    /// Handles one of the sibling's messages for this round; returns what to send back. Throws for a message that
    /// does not belong here (the caller drops it and logs why).
    package mutating func handle(
        _ message: SiblingMessage, data: some ReconcileData, now: Date
    ) throws
        -> [SiblingMessage]
    {
        guard !isFinished else { throw ReconcileError.unexpected("a message for a round that is over") }
        switch (role, message) {
        case (.initiator, .syncDigest(let answer)) where answer.phase == .answer:
            guard id.isOpening, answer.header.round.initiator == id.initiator else {
                throw ReconcileError.unexpected("an answer to another round")
            }
            id = answer.header.round
            return try answered(answer, data: data, now: now)
        case (.initiator, .syncDigest(let closing)) where closing.phase == .closeAnswer:
            try checkRound(closing.header)
            guard let expected else { throw ReconcileError.unexpected("a close answer before the close") }
            for (index, category) in StoreCategory.allCases.enumerated()
            where closing.digests[index] == expected.digests[index] && report.differed.contains(category) {
                try agree(category, seq: expected.seq, data: data, now: now)
            }
            isFinished = true
            return []
        case (.initiator, .syncSketch(let sketch)):
            try checkRound(sketch.header)
            return try sketched(sketch, data: data, now: now)
        case (.initiator, .syncRows(let rows)), (.responder, .syncRows(let rows)):
            try checkRound(rows.header)
            guard batchesSeen.insert(rows.batch).inserted else { return [] }
            let blobs = try applyRows(rows, data: data)
            if role == .initiator, rows.isLast {
                // A last batch that names blobs has arrived only once they are applied (``blobsApplied``).
                guard blobs == 0 else {
                    lastBatchesAwaitingBlobs += 1
                    return []
                }
                awaitingRows -= 1
                return try closeIfDone(data: data, now: now)
            }
            return []
        case (.responder, .syncWant(let want)):
            try checkRound(want.header)
            return try wanted(want, data: data)
        case (.responder, .syncDigest(let closing)) where closing.phase == .close:
            try checkRound(closing.header)
            let summary = try Self.summary(data)
            for (index, category) in StoreCategory.allCases.enumerated()
            where closing.digests[index] == summary.digests[index] && report.differed.contains(category) {
                try agree(category, summary: summary, data: data, now: now)
            }
            isFinished = true
            return [.syncDigest(digests(.closeAnswer, summary.digests, summary, now: now))]
        default:
            throw ReconcileError.unexpected("a \(message.type) message, which the \(role) of a round does not take now")
        }
    }

    private func checkRound(_ header: SyncRoundHeader) throws {
        guard header.round == id, !id.isOpening else { throw ReconcileError.unexpected("a message of another round") }
    }

    /// The initiator reads the answer: equal categories are agreed, and each that differs is reconciled.
    private mutating func answered(
        _ answer: SyncDigests, data: some ReconcileData, now: Date
    ) throws
        -> [SiblingMessage]
    {
        report.clockDifference = Int64(bitPattern: answer.wallClock) - Self.milliseconds(now)
        let summary = try Self.summary(data)
        var out: [SiblingMessage] = []
        for (index, category) in StoreCategory.allCases.enumerated() {
            let theirs = answer.digests[index]
            if summary.digests[index] == theirs {
                try agree(category, summary: summary, data: data, now: now)
                continue
            }
            // The responder compared with the opening, and sized its sketch by it: decide by the opening too. A
            // category that changed here since, and equal then, gets nothing from the responder: the next round.
            let mine = opening?[index] ?? summary.digests[index]
            guard mine != theirs else { continue }
            report.differed.insert(category)
            if mine.count == 0 {
                // Nothing here: every row of theirs is wanted.
                awaitingRows += 1
                out.append(
                    .syncWant(
                        SyncWant(header: header, entries: [.init(category: category.snapshotCode, kind: .everything)])))
            } else if theirs.count == 0 {
                out += try batches(try data.rows(category, includingDeleted: true))
            } else {
                decoding[category] = Decoding(
                    remoteTotal: theirs.count, local: try data.items(category),
                    requested: firstBatch(mine: mine, theirs: theirs))
            }
        }
        if report.differed.isEmpty {
            isFinished = true
        } else if decoding.isEmpty {
            out += try closeIfDone(data: data, now: now)
        }
        return out
    }

    /// The initiator takes a piece of a sketch; once the difference is known it sends rows and wants.
    private mutating func sketched(_ sketch: SyncSketch, data: some ReconcileData, now: Date) throws -> [SiblingMessage]
    {
        // A sketch of a category decoded already (the rest of a batch it did not need) changes nothing.
        guard let category = StoreCategory(snapshotCode: sketch.category), var state = decoding[category] else {
            return []
        }
        var difference: (remote: [SyncItem], local: [SyncItem])?
        var out: [SiblingMessage] = []
        switch sketch.content {
        case .symbols(let symbols):
            var decoder = state.decoder ?? RatelessDecoder(local: state.local)
            guard sketch.first == decoder.symbolCount else { return [] }  // a repeat, or one out of order
            if try decoder.add(symbols) {
                difference = (decoder.remoteOnly, decoder.localOnly)
            } else if decoder.symbolCount >= state.requested {
                // The whole batch came and did not decode: ask for as many again.
                let more = min(decoder.symbolCount, Int(SyncWant.maximumSymbolRequest))
                state.requested += more
                out.append(
                    .syncWant(
                        SyncWant(
                            header: header,
                            entries: [
                                .init(
                                    category: sketch.category,
                                    kind: .moreSymbols(first: UInt32(decoder.symbolCount), count: UInt32(more)))
                            ])))
            }
            state.decoder = decoder
        case .items(let items):
            guard sketch.first == state.list.count else { return [] }
            state.remoteTotal = sketch.total
            state.list += items
            if state.list.count >= Int(state.remoteTotal) {
                let remote = Set(state.list)
                let local = Set(state.local)
                difference = (Array(remote.subtracting(local)), Array(local.subtracting(remote)))
            }
        }
        decoding[category] = state
        guard let difference else { return out }
        decoding[category] = nil
        // Sort the difference (docs/pixie-sync.md, "Rounds", step 3): live rows go both ways; a tombstone only to a
        // side that holds some version of its row.
        let remoteIDs = Set(difference.remote.map(\.idTag))
        let localIDs = Set(difference.local.map(\.idTag))
        let wanted = difference.remote.filter { !$0.isTombstone || localIDs.contains($0.idTag) }
        let sending = difference.local.filter { !$0.isTombstone || remoteIDs.contains($0.idTag) }
        unmatched[category] = (
            difference.local.filter { $0.isTombstone && !remoteIDs.contains($0.idTag) },
            difference.remote.filter { $0.isTombstone && !localIDs.contains($0.idTag) }
        )
        out += try batches(try data.rows(category, items: sending))
        for chunk in stride(from: 0, to: wanted.count, by: SyncWant.maximumItemCount) {
            awaitingRows += 1
            let items = Array(wanted[chunk..<min(chunk + SyncWant.maximumItemCount, wanted.count)])
            out.append(
                .syncWant(SyncWant(header: header, entries: [.init(category: sketch.category, kind: .items(items))])))
        }
        out += try closeIfDone(data: data, now: now)
        return out
    }

    /// Once every category is decoded and every row asked for has come, the initiator closes.
    private mutating func closeIfDone(data: some ReconcileData, now: Date) throws -> [SiblingMessage] {
        guard decoding.isEmpty, awaitingRows == 0, expected == nil else { return [] }
        let summary = try Self.summary(data)
        var expected = summary.digests
        for (index, category) in StoreCategory.allCases.enumerated() {
            guard let (local, remote) = unmatched[category] else { continue }
            for item in local { expected[index].remove(item) }
            for item in remote { expected[index].insert(item) }
        }
        self.expected = (expected, summary.seq)
        return [.syncDigest(digests(.close, expected, summary, now: now))]
    }

    /// The responder answers a want: more symbols, the rows of some items, or every row.
    private mutating func wanted(_ want: SyncWant, data: some ReconcileData) throws -> [SiblingMessage] {
        var out: [SiblingMessage] = []
        for entry in want.entries {
            guard let category = StoreCategory(snapshotCode: entry.category) else { continue }
            switch entry.kind {
            case .moreSymbols(let first, let count):
                let items = try data.items(category)
                out += Self.symbolMessages(
                    header: header, category: category, items: items, range: Int(first)..<(Int(first) + Int(count)))
            case .items(let items):
                out += try batches(try data.rows(category, items: items), last: true)
            case .everything:
                out += try batches(try data.rows(category, includingDeleted: true), last: true)
            }
        }
        return out
    }

    /// The responder's first sketch of a category that differs: the first symbols, or its item list when shorter.
    private func firstSketch(
        _ category: StoreCategory, mine: SyncDigest, theirs: SyncDigest, data: some ReconcileData
    )
        throws -> [SiblingMessage]
    {
        let symbols = firstBatch(mine: mine, theirs: theirs)
        let items = try data.items(category)
        if !items.isEmpty, SyncItem.byteCount * items.count <= CodedSymbol.byteCount * symbols {
            return stride(from: 0, to: max(items.count, 1), by: SyncSketch.maximumItemCount).map { start in
                let page = Array(items[start..<min(start + SyncSketch.maximumItemCount, items.count)])
                return .syncSketch(
                    SyncSketch(
                        header: header, category: category.snapshotCode, first: UInt32(start),
                        total: UInt32(items.count), content: .items(page)))
            }
        }
        return Self.symbolMessages(header: header, category: category, items: items, range: 0..<symbols)
    }

    /// The first batch of symbols for a category whose digests are `mine` and `theirs` (docs/pixie-sync.md, "How
    /// many symbols"): both sides compute it alike, so the initiator knows when the batch is whole.
    private func firstBatch(mine: SyncDigest, theirs: SyncDigest) -> Int {
        let difference = abs(Int(mine.count) - Int(theirs.count))
        return max(Self.minimumSymbols, Int((1.5 * Double(difference)).rounded(.up)) + 16)
    }

    static func symbolMessages(
        header: SyncRoundHeader, category: StoreCategory, items: [SyncItem], range: Range<Int>
    )
        -> [SiblingMessage]
    {
        let symbols = RatelessSketch.encode(items, symbols: range)
        return stride(from: 0, to: symbols.count, by: SyncSketch.maximumSymbolCount).map { start in
            .syncSketch(
                SyncSketch(
                    header: header, category: category.snapshotCode, first: UInt32(range.lowerBound + start),
                    total: UInt32(items.count),
                    content: .symbols(Array(symbols[start..<min(start + SyncSketch.maximumSymbolCount, symbols.count)]))
                ))
        }
    }

    /// `rows` as row batches of at most 48 KiB of records; the last marked when `last` (an answer to a want). A row
    /// whose record alone is larger waits for blob-svc (``takeLargeRows()``); the batch with its blob record is then
    /// the last instead.
    private mutating func batches(_ rows: [StoreRow], last requestedLast: Bool = false) throws -> [SiblingMessage] {
        var records: [Data] = [Data()]
        var large: [StoreRow] = []
        for row in rows {
            var record = Data()
            StoreSnapshot.append(row, to: &record)
            guard record.count <= SyncRows.maximumRecordsByteCount else {
                large.append(row)
                continue
            }
            if records[records.count - 1].count + record.count > SyncRows.maximumRecordsByteCount {
                records.append(Data())
            }
            records[records.count - 1] += record
            report.rowsSent += 1
        }
        largeRows += large
        let last = requestedLast && large.isEmpty
        if requestedLast, !large.isEmpty { largeRowsEndAnswer = true }
        if !last, records == [Data()] { return [] }
        return records.enumerated().map { index, batch in
            defer { nextBatch &+= 1 }
            return .syncRows(
                SyncRows(header: header, batch: nextBatch, isLast: last && index == records.count - 1, records: batch))
        }
    }

    /// Folds a batch of the sibling's rows in; returns how many blob records it named (kept for the caller to fetch).
    private mutating func applyRows(_ batch: SyncRows, data: some ReconcileData) throws -> Int {
        var blobs = 0
        var rows: [StoreRow] = []
        var offset = batch.records.startIndex
        while offset < batch.records.endIndex {
            let code = batch.records[offset]
            let length = Int(batch.records[(offset + 1)..<(offset + 5)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            let body = batch.records[(offset + 5)..<(offset + 5 + length)]
            offset += 5 + length
            if code == SyncBlobRecord.code {
                do {
                    blobRecords.append(try SyncBlobRecord(body: body))
                    blobs += 1
                } catch {
                    report.rowsRefused.append("\(error)")
                }
                continue
            }
            guard let category = StoreCategory(snapshotCode: code) else {
                report.rowsRefused.append("a record of code \(code), which this version does not read")
                continue
            }
            do {
                rows.append(try StoreSnapshot.Reader.decodeRow(Data(body), category, schema: StoreSnapshot.schema))
            } catch {
                report.rowsRefused.append("\(error)")
            }
        }
        try fold(rows, data: data)
        return blobs
    }

    private mutating func fold(_ rows: [StoreRow], data: some ReconcileData) throws {
        let applied = try data.apply(rows, maximumLead: configuration.maximumLead)
        report.rowsApplied += applied.applied.count
        report.rowsHeld += applied.held.count
        report.rowsRefused += applied.refused
    }

    // MARK: rows through blob-svc (the caller's I/O)

    /// The rows too large for a frame that this round's last messages left out, to seal and upload
    /// (``SyncBlobRecord``); then ``largeRowsSent(_:)`` with the record, or nil if the upload failed.
    package mutating func takeLargeRows() -> [StoreRow] {
        defer { largeRows = [] }
        return largeRows
    }

    /// The batches to send for the large rows now on blob-svc (`records`, naming `sent` rows; `failed` rows could
    /// not be put there), the last of them marked when an answer owes its last batch (empty, if nothing went up).
    package mutating func largeRowsSent(_ records: [SyncBlobRecord], sent: Int, failed: Int) -> [SiblingMessage] {
        let last = largeRowsEndAnswer
        largeRowsEndAnswer = false
        report.rowsSent += sent
        report.rowsTooLarge += failed
        // At most 400 records of 106 bytes a batch, within its 48 KiB.
        var chunks = stride(from: 0, to: records.count, by: 400).map {
            Array(records[$0..<min($0 + 400, records.count)])
        }
        if chunks.isEmpty, last { chunks = [[]] }
        return chunks.enumerated().map { index, chunk in
            defer { nextBatch &+= 1 }
            return .syncRows(
                SyncRows(
                    header: header, batch: nextBatch, isLast: last && index == chunks.count - 1,
                    records: chunk.reduce(into: Data()) { $0 += $1.encoded }))
        }
    }

    /// The blob records the sibling's batches named, to fetch, check and open; then ``blobsFetched(_:failures:data:now:)``.
    package mutating func takeBlobRecords() -> [SyncBlobRecord] {
        defer { blobRecords = [] }
        return blobRecords
    }

    /// Folds in the rows of the blobs fetched (and counts those that could not be, as refused); a last batch that
    /// waited for them has now arrived, and the initiator may close.
    package mutating func blobsFetched(
        _ rows: [StoreRow], failures: [String], data: some ReconcileData, now: Date
    ) throws -> [SiblingMessage] {
        report.rowsRefused += failures
        try fold(rows, data: data)
        guard role == .initiator, lastBatchesAwaitingBlobs > 0, blobRecords.isEmpty else { return [] }
        awaitingRows -= lastBatchesAwaitingBlobs
        lastBatchesAwaitingBlobs = 0
        return try closeIfDone(data: data, now: now)
    }

    private mutating func agree(
        _ category: StoreCategory, summary: SyncSummary, data: some ReconcileData, now: Date
    ) throws {
        try agree(category, seq: summary.seq, data: data, now: now)
    }

    /// Records an agreement on `category` covering what had reached this store by arrival `seq`: the counter read
    /// with the digest that was found equal.
    private mutating func agree(_ category: StoreCategory, seq: Int64, data: some ReconcileData, now: Date) throws {
        report.agreed.insert(category)
        try data.recordAgreement(with: sibling, category: category, seq: seq, at: now)
    }

    private func digests(
        _ phase: SyncDigests.Phase, _ digests: [SyncDigest], _ summary: SyncSummary, now: Date
    )
        -> SyncDigests
    {
        SyncDigests(
            header: header, phase: phase, wallClock: UInt64(max(0, Self.milliseconds(now))), hlc: summary.hlc,
            digests: digests)
    }

    static func summary(_ data: some ReconcileData) throws -> SyncSummary {
        guard let summary = try data.syncSummary() else {
            throw ReconcileError.noItemKey
        }
        return summary
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
}

/// Why a round cannot go on.
package enum ReconcileError: Error, Equatable, CustomStringConvertible {
    /// A message that does not fit the round (another round's, a repeat of a finished one, out of turn).
    case unexpected(String)
    /// This device has no account key, so no items: it is not a member yet.
    case noItemKey

    package var description: String {
        switch self {
        case .unexpected(let why): why
        case .noItemKey: "this device holds no account seed, so it cannot reconcile; sign in with a sibling first"
        }
    }
}
