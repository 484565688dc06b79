import Foundation
import PixieWire
import SiblingsCrypto
import Synchronization

/// The steady digest reconcile (000_e422bd9a7c930342.txt: "the background loop that compares per-category summaries
/// between devices and pulls whatever differs"; docs/pixie-sync.md): rounds (``ReconcileRound``) with every sibling
/// of the logged roster, carried on the relay, and the agreement barrier's tombstone collection after them.
///
/// One loop per relay connection. ``InboxListener`` makes it when it connects, hands it every round message that
/// reaches this device's inbox (after ``SyncService`` opened it: the envelope, the SenderCert, the MAC and
/// isSameAccount), and runs it (``run()``): a round with every sibling at once (to catch what happened while this
/// device was away) and then every ``Configuration/interval``, jittered. A message is taken only from a device of
/// the logged roster whose inbox is the one the message names, and only for a round this loop holds or an opening;
/// a round of another process on this home (`pixie sync` beside `pixie listen`) is not this loop's, and its
/// messages are left to that process.
public final class SyncLoop: Sendable {
    public struct Configuration: Sendable {
        /// Between rounds with every sibling: 10 minutes, jittered by ±10% (docs/pixie-sync.md, "When a round
        /// starts"). The safety net for frames the relay dropped, not the normal path.
        public var interval: Duration = .seconds(600)
        /// How often the loop looks for a local write to push (docs/pixie-sync.md, "When a round starts"): a write on
        /// this home, from this process or another (`pixie store`), starts a round with every sibling within this.
        public var pushDelay: Duration = .seconds(1)
        /// A round that has heard nothing for this long is given up (the relay keeps no frames to re-send).
        public var roundTimeout: Duration = .seconds(60)
        /// How far ahead of this device's clock a received row may be before it is held.
        public var maximumLead: Duration = HybridLogicalClock.defaultMaximumLead

        public init() {}
    }

    /// What the loop did, for the person's log (`pixie listen`).
    public enum Event: Sendable, Equatable {
        /// A round with a sibling ended.
        case round(Summary)
        /// Tombstones the agreement barrier let this device collect.
        case collected(category: StoreCategory, count: Int)
        /// A message not taken, and why (for this device's log only).
        case dropped(String)
        /// A message for a round this process does not hold: another process of this home (`pixie sync` beside
        /// `pixie listen`) may hold it, or the relay replayed it. It was left alone and changed nothing.
        case passed(String)
        /// A round could not go on (the store, the relay, the roster); the reason says what.
        case failed(String)
        /// This device's wall clock is off the server's by this many seconds (2 or more; positive: behind): the
        /// loop stamps and judges by the server's time instead (docs/pixie-sync.md, "Whose wall clock").
        case clockCorrected(TimeInterval)
    }

    /// One round, as it ended.
    public struct Summary: Sendable, Equatable {
        /// The sibling's author tag (docs/pixie-sync.md, "Versions").
        public let sibling: AuthorTag
        /// True if this device started the round.
        public let started: Bool
        /// How many categories were found equal (``agreedCategories``), and how many differed.
        public var agreed: Int { agreedCategories.count }
        public let differed: Int
        public let rowsSent: Int
        public let rowsApplied: Int
        /// Rows held because they were too far ahead of this device's clock.
        public let rowsHeld: Int
        /// Rows too large for a frame that could not go through blob-svc either (its upload failed), left out for
        /// the next round.
        public let rowsTooLarge: Int
        /// Rows of the sibling's not taken (not the category's, or in a blob that did not arrive), each said in a
        /// ``Event/failed(_:)`` or the store's refusal.
        public let rowsRefused: Int
        /// The sibling's clock minus this device's, in milliseconds, as its digest said.
        public let clockDifference: Int64?
        /// The categories found equal in this round (``agreed`` of them).
        public let agreedCategories: Set<StoreCategory>
    }

    struct Sibling: Sendable {
        let pubkey: Data
        let author: AuthorTag
        let inbox: RelaySubject
        let key: XWing.PublicKey
    }

    struct State {
        /// Open rounds, by this device's half of their id.
        var rounds = RoundTable<Sibling>()
        /// The siblings a round can reach (the logged roster, without this device, with an inbox and a sealing
        /// key); nil until the roster was fetched and checked.
        var siblings: [Sibling]?
        /// When the roster was last fetched for a sender it did not hold (at most once every 10 seconds).
        var lastUnknownSenderFetch: Date?
        /// The rounds this device started that have ended, by its half of their id, while ``roundOnce(patience:)``
        /// waits for them.
        var ended: [Data: Summary] = [:]
        var keepingEnded = false
        /// Rounds taken out of the table while they are handled (their rows going to or coming from blob-svc
        /// too), by this device's half.
        var working: Set<Data> = []
        /// False while ``roundOnce(patience:)`` runs: a sibling's opening is left to a listener.
        var answersOpenings = true
        /// When the clock was last measured against the server's.
        var clockMeasured: Date?
        /// Siblings owed a follow-up round: a round this device started with them ended with a category still
        /// different (docs/pixie-sync.md, "Rounds", step 5).
        var followUpsDue: Set<AuthorTag> = []
        /// This device's halves of the follow-up rounds it has open: one that ends unsettled is not followed up.
        var followUps: Set<Data> = []
    }

    let context: DeviceContext
    let configuration: Configuration
    let send: @Sendable (SiblingMessage, RelaySubject, XWing.PublicKey) async throws -> Void
    let events: @Sendable (Event) -> Void
    let inbox: RelaySubject
    private let state = Mutex(State())
    /// Round messages in the order they reached the inbox, handled one at a time by ``run()``.
    private let incoming: AsyncStream<(SenderCert, SiblingMessage)>
    private let arrive: AsyncStream<(SenderCert, SiblingMessage)>.Continuation

    /// A loop for the device of `context`, sending through `send` (a ``SyncService``'s sealing and relay).
    init(
        context: DeviceContext, configuration: Configuration,
        send: @escaping @Sendable (SiblingMessage, RelaySubject, XWing.PublicKey) async throws -> Void,
        events: @escaping @Sendable (Event) -> Void
    ) throws {
        self.context = context
        self.configuration = configuration
        self.send = send
        self.events = events
        self.inbox = try context.state.inbox.subject
        (incoming, arrive) = AsyncStream.makeStream(of: (SenderCert, SiblingMessage).self)
    }

    deinit { arrive.finish() }

    /// Queues a round message that reached this device's inbox, opened and checked (``SyncService``); ``run()``
    /// handles the queue in order.
    func deliver(sender: SenderCert, message: SiblingMessage) {
        arrive.yield((sender, message))
    }

    /// The device's clock, corrected by its offset from the server's (``DeviceContext/correctedClock``): rounds
    /// judge rows and date digests by it.
    var clock: any DeviceClock { context.clock }

    /// Runs until cancelled: handles round messages in the order they came, and starts a round with every sibling
    /// now and then every ``Configuration/interval`` (jittered), giving up rounds that went quiet.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                for await (sender, message) in incoming { await handle(sender: sender, message: message) }
            }
            group.addTask { [self] in await periodically() }
            await group.next()
            group.cancelAll()
        }
    }

    /// A round with every sibling now, then whenever a local write moved the store's ``DeviceStore/lastLocalWrite()``
    /// (looked at every ``Configuration/pushDelay``), and at the latest every ``Configuration/interval``, jittered.
    private func periodically() async {
        while !Task.isCancelled {
            // Measured again every interval: a clock stepped meanwhile (NTP after a bad start) is not left with
            // an offset that no longer holds.
            let measured = state.withLock { $0.clockMeasured }
            if measured.map({ clock.now.timeIntervalSince($0) >= configuration.interval.timeInterval * 0.8 }) ?? true {
                await correctClock()
            }
            var pushed = try? context.store.lastLocalWrite()
            await startRounds()
            let wait = configuration.interval * context.environment.randomFraction(in: 0.9...1.1)
            var waited = Duration.zero
            while waited < wait, !Task.isCancelled {
                let step = min(wait - waited, configuration.pushDelay, configuration.roundTimeout)
                guard (try? await clock.sleep(for: step)) != nil else { return }
                waited += step
                expireQuietRounds()
                let due = state.withLock { state in
                    defer { state.followUpsDue = [] }
                    return state.followUpsDue
                }
                if !due.isEmpty { _ = await openRounds(with: due) }
                let mark = try? context.store.lastLocalWrite()
                if mark != pushed, mark != nil {
                    pushed = mark
                    break
                }
            }
        }
    }

    /// What ``roundOnce(patience:)`` found: the rounds that ended, and the siblings whose rounds did not.
    public struct Rounds: Sendable, Equatable {
        public let ended: [Summary]
        /// Siblings a round was opened with that did not finish it in time (offline, or not listening).
        public let unanswered: [AuthorTag]
        /// Devices of the logged roster no round can reach yet (no inbox or sealing key: still joining).
        public let unreached: Int
        /// What kept rounds from starting (the roster could not be fetched or checked, a send failed), one reason
        /// each; the same as the ``Event/failed(_:)`` events said.
        public let failures: [String]
    }

    /// One round with every sibling of the logged roster (`pixie sync`), waiting up to `patience` for them to end;
    /// round messages from siblings are taken meanwhile (``deliver(sender:message:)``).
    public func roundOnce(patience: Duration) async -> Rounds {
        await correctClock()
        state.withLock {
            $0.keepingEnded = true
            $0.answersOpenings = false
            $0.ended = [:]
        }
        return await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                for await (sender, message) in incoming { await handle(sender: sender, message: message) }
            }
            let first = await openRounds()
            var (opened, failures) = (first.opened, first.failures)
            let deadline = clock.now.addingTimeInterval(patience.timeInterval)
            func waitForOpened() async {
                while clock.now < deadline,
                    state.withLock({ state in
                        opened.contains { state.rounds.isOpen($0.half) || state.working.contains($0.half) }
                    })
                {
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            await waitForOpened()
            // A round that ended with a category still different is followed by one more, as in the loop.
            let due = state.withLock { state in
                defer { state.followUpsDue = [] }
                return state.followUpsDue
            }
            if !due.isEmpty, clock.now < deadline {
                let more = await openRounds(with: due)
                opened += more.opened
                failures += more.failures
                await waitForOpened()
            }
            group.cancelAll()
            return state.withLock { state in
                for (half, _) in opened { state.rounds.remove(half) }
                state.keepingEnded = false
                let ended = opened.compactMap { state.ended[$0.half] }
                let unanswered = Array(Set(opened.filter { state.ended[$0.half] == nil }.map(\.author)))
                state.followUps = []
                state.ended = [:]
                return Rounds(ended: ended, unanswered: unanswered, unreached: first.unreached, failures: failures)
            }
        }
    }

    /// Measures this device's clock against the server's, and says so when it is off.
    private func correctClock() async {
        let offset = await context.correctClock()
        state.withLock { $0.clockMeasured = clock.now }
        if let offset, offset != 0 { events(.clockCorrected(offset)) }
    }

    /// Opens a round with every sibling of the logged roster; returns how many were opened.
    @discardableResult
    public func startRounds() async -> Int {
        await openRounds().opened.count
    }

    /// Opens a round with every sibling of the logged roster, or a follow-up round with each of `followingUp`
    /// only: this device's half of each round's id and the sibling, how many devices of the roster have no inbox
    /// yet, and why rounds could not start.
    private func openRounds(
        with followingUp: Set<AuthorTag>? = nil
    ) async -> (opened: [(half: Data, author: AuthorTag)], unreached: Int, failures: [String]) {
        let siblings: [Sibling]
        let others: Int
        do {
            let roster = try await fetchRoster()
            (siblings, others) = (roster.siblings, roster.others.count)
        } catch {
            let reason = "the roster could not be fetched and checked, so no round started: \(error)"
            events(.failed(reason))
            return ([], 0, [reason])
        }
        var opened: [(half: Data, author: AuthorTag)] = []
        var failures: [String] = []
        for sibling in siblings where followingUp?.contains(sibling.author) ?? true {
            do {
                let half = context.environment.random.bytes(count: SyncRoundID.halfByteCount)
                let (round, opening) = try ReconcileRound.open(
                    half: half, inbox: inbox, sibling: sibling.author, data: context.store, now: clock.now,
                    configuration: roundConfiguration)
                state.withLock { state in
                    state.rounds.keep(round, peer: sibling, peerKey: sibling.pubkey, now: clock.now)
                    if followingUp != nil { state.followUps.insert(half) }
                }
                do {
                    try await send(opening, sibling.inbox, sibling.key)
                } catch {
                    state.withLock { state in
                        state.rounds.remove(half)
                        state.followUps.remove(half)
                    }
                    throw error
                }
                opened.append((half, sibling.author))
            } catch {
                let reason = "a round with \(sibling.author) could not start: \(error)"
                events(.failed(reason))
                failures.append(reason)
            }
        }
        return (opened, others - siblings.count, failures)
    }

    var roundConfiguration: ReconcileRound.Configuration {
        var round = ReconcileRound.Configuration()
        round.maximumLead = configuration.maximumLead
        return round
    }

    /// Takes one round message from `sender` (its verified SenderCert), and sends what the round answers.
    func handle(sender: SenderCert, message: SiblingMessage) async {
        guard let header = Self.header(of: message) else { return }
        let sibling: Sibling
        do {
            guard let known = try await self.sibling(pubkey: sender.deviceKey), known.inbox == header.sender else {
                events(.dropped("a round message from a device that is not in the account's logged roster"))
                return
            }
            sibling = known
        } catch {
            events(.failed("the roster could not be checked, so a round message was not taken: \(error)"))
            return
        }
        let now = clock.now
        var outgoing: [SiblingMessage] = []
        var finished: Summary?
        do {
            if case .syncDigest(let digests) = message, digests.phase == .open {
                // `pixie sync` (``roundOnce(patience:)``) ends after its own rounds: an opening is left to a
                // listener on this home, which stays to finish it.
                guard state.withLock({ $0.answersOpenings }) else {
                    events(.passed("an opening from \(sibling.author), left to a listener on this home"))
                    return
                }
                let half = context.environment.random.bytes(count: SyncRoundID.halfByteCount)
                let (round, answer) = try ReconcileRound.answer(
                    digests, half: half, inbox: inbox, sibling: sibling.author, data: context.store, now: now,
                    configuration: roundConfiguration)
                outgoing = answer
                if round.isFinished {
                    finished = Self.summary(round, sibling)
                } else {
                    state.withLock { $0.rounds.keep(round, peer: sibling, peerKey: sibling.pubkey, now: now) }
                }
            } else {
                // Taken and marked as worked on in one lock, so that ``roundOnce(patience:)`` never sees the round
                // neither open nor in hand while it is handled.
                let taken = state.withLock { state -> RoundTable<Sibling>.Entry? in
                    guard let entry = state.rounds.take(header, from: sibling.pubkey) else { return nil }
                    state.working.insert(RoundTable<Sibling>.key(of: entry.round))
                    return entry
                }
                guard var open = taken else {
                    events(.passed("a \(message.type) for a round this process does not hold (another's, or over)"))
                    return
                }
                let key = RoundTable<Sibling>.key(of: open.round)
                defer { state.withLock { _ = $0.working.remove(key) } }
                do {
                    outgoing = try open.round.handle(message, data: context.store, now: now)
                } catch let error as ReconcileError {
                    // A message out of place (a replay, a duplicate) leaves the round as it was.
                    state.withLock { $0.rounds.putBack(open) }
                    throw error
                }
                outgoing = try await throughBlobs(&open.round, outgoing)
                if open.round.isFinished {
                    let summary = Self.summary(open.round, open.peer)
                    finished = summary
                    if open.round.role == .initiator {
                        state.withLock { state in
                            if state.keepingEnded { state.ended[open.round.id.initiator] = summary }
                            // Something changed on one side while the round ran (a write, a tombstone the
                            // sibling collected through another round): one more round settles it now rather
                            // than at the interval; a follow-up that ends unsettled is left to the interval.
                            let wasFollowUp = state.followUps.remove(open.round.id.initiator) != nil
                            if summary.agreed < StoreCategory.allCases.count, !wasFollowUp {
                                state.followUpsDue.insert(open.peer.author)
                            }
                        }
                    }
                } else {
                    // Heard from now, after any blob went up or came down: a long transfer is not quiet.
                    open.lastHeard = clock.now
                    state.withLock { $0.rounds.putBack(open) }
                }
            }
        } catch let error as ReconcileError {
            events(.dropped("\(error)"))
            return
        } catch {
            events(.failed("a round with \(sibling.author) stopped: \(error)"))
            return
        }
        for message in outgoing {
            do {
                try await send(message, sibling.inbox, sibling.key)
            } catch {
                events(.failed("a round message to \(sibling.author) could not be sent: \(error)"))
                return
            }
        }
        if let finished {
            do {
                try context.store.recordRound(
                    with: sibling.author, at: clock.now, clockDifference: finished.clockDifference,
                    agreed: finished.agreedCategories)
            } catch {
                events(.failed("the round with \(sibling.author) ended, but it could not be recorded: \(error)"))
            }
            events(.round(finished))
            await collect()
        }
    }

    // MARK: rows too large for a frame

    /// The largest blob of rows fetched: a sender puts at most ``largestRowsBlobPlaintext`` of records (each at most
    /// 64 MiB, ``StoreSnapshot``) in one.
    static let largestRowsBlob: UInt64 = 256 << 20
    /// The records one blob holds at most, well under ``largestRowsBlob`` once sealed.
    static let largestRowsBlobPlaintext = 192 << 20

    /// Does the round's blob-svc work, which ``ReconcileRound`` leaves to its caller: puts the rows too large for a
    /// frame on blob-svc and sends their blob record (before any close), and fetches, checks and folds in the blobs
    /// the sibling named. Returns the messages to send.
    private func throughBlobs(
        _ round: inout ReconcileRound, _ outgoing: [SiblingMessage]
    ) async throws
        -> [SiblingMessage]
    {
        var outgoing = outgoing
        let large = round.takeLargeRows()
        if !large.isEmpty {
            // One blob per at most 192 MiB of records (a record is at most 64 MiB), so none is past what a receiver
            // fetches (``largestRowsBlob``).
            var groups: [[StoreRow]] = [[]]
            var size = 0
            for row in large {
                var record = Data()
                StoreSnapshot.append(row, to: &record)
                if size + record.count > Self.largestRowsBlobPlaintext, !groups[groups.count - 1].isEmpty {
                    groups.append([])
                    size = 0
                }
                groups[groups.count - 1].append(row)
                size += record.count
            }
            var records: [SyncBlobRecord] = []
            var sent = 0
            for group in groups {
                guard let record = await upload(group, for: round.sibling) else { continue }
                records.append(record)
                sent += group.count
            }
            let messages = round.largeRowsSent(records, sent: sent, failed: large.count - sent)
            let close = outgoing.firstIndex { if case .syncDigest = $0 { true } else { false } }
            outgoing.insert(contentsOf: messages, at: close ?? outgoing.endIndex)
        }
        let records = round.takeBlobRecords()
        guard !records.isEmpty else { return outgoing }
        var rows: [StoreRow] = []
        var failures: [String] = []
        for record in records {
            do {
                rows += try await fetch(record)
            } catch {
                let reason = "rows too large for a frame from \(round.sibling) did not arrive: \(error)"
                failures.append(reason)
                events(.failed(reason))
                // A blob that cannot be used is not left on blob-svc (it holds sealed rows, secrets among them).
                try? await context.client.deleteBlob(record.blobName)
            }
        }
        return outgoing + (try round.blobsFetched(rows, failures: failures, data: context.store, now: clock.now))
    }

    /// Seals `rows` under a fresh key and puts them on blob-svc (paid with upload tokens, like a snapshot); the
    /// record naming them, or nil (and said) if that failed.
    private func upload(_ rows: [StoreRow], for sibling: AuthorTag) async -> SyncBlobRecord? {
        do {
            let key = context.environment.random.bytes(count: 32)
            let nonce = context.environment.random.bytes(count: 12)
            let sealed = try SyncBlobRecord.seal(rows, key: SymmetricKey(data: key), nonce: nonce)
            let tokens = try await context.wallet.uploadTokens(
                count: Int(Int64(sealed.count) / BlobAPI.bytesPerUploadToken) + 1,
                verifier: UploadKeyListVerifier(bindings: context.bindings))
            let pipe = PipedBody(capacity: max(sealed.count, 1))
            try pipe.write(sealed)
            pipe.finish()
            let uploaded = try await context.client.uploadBlob(pipe, mime: "application/x-pixie-sync", tokens: tokens)
            let sha256 = Data(SHA256.hash(data: sealed))
            guard let blobID = Data(base64URLEncoded: uploaded.blobID), blobID.count == SyncOffer.blobIDByteCount,
                uploaded.sizeBytes == Int64(sealed.count), Data(base64URLEncoded: uploaded.sha256) == sha256
            else {
                try? await context.client.deleteBlob(uploaded.blobID)
                throw SyncBlobError.tampered("blob-svc stored something else than the rows sent (size or SHA-256)")
            }
            return SyncBlobRecord(
                blobID: blobID, key: key, nonce: nonce, sha256: sha256, sizeBytes: UInt64(sealed.count))
        } catch {
            events(
                .failed(
                    "\(rows.count) row\(rows.count == 1 ? "" : "s") too large for a frame could not be put on blob-svc "
                        + "for \(sibling), so the round leaves them out: \(error)"))
            return nil
        }
    }

    /// Downloads the blob `record` names, checks its size and SHA-256, opens it, and deletes it from blob-svc.
    private func fetch(_ record: SyncBlobRecord) async throws -> [StoreRow] {
        guard record.sizeBytes <= Self.largestRowsBlob else {
            throw SyncBlobError.malformed("a blob of \(record.sizeBytes) bytes, more than rows of a round may take")
        }
        var sealed = Data()
        while UInt64(sealed.count) < record.sizeBytes {
            let (bytes, size) = try await context.client.blobRange(
                record.blobName, from: UInt64(sealed.count),
                count: Int(min(4 << 20, record.sizeBytes - UInt64(sealed.count))))
            guard size == record.sizeBytes, !bytes.isEmpty else {
                throw SyncBlobError.tampered(
                    "blob-svc holds \(size) bytes where the sibling sealed \(record.sizeBytes)")
            }
            sealed += bytes
        }
        let rows = try record.open(sealed)
        try? await context.client.deleteBlob(record.blobName)
        return rows
    }

    /// Gives up rounds that have heard nothing for ``Configuration/roundTimeout``.
    func expireQuietRounds() {
        let now = clock.now
        let gone = state.withLock { state in
            let gone = state.rounds.expire(now: now, timeout: configuration.roundTimeout.timeInterval)
            state.followUps = state.followUps.filter { state.rounds.isOpen($0) || state.working.contains($0) }
            return gone
        }
        if gone > 0 { events(.dropped("\(gone) round\(gone == 1 ? "" : "s") went quiet and were given up")) }
    }

    /// The agreement barrier (docs/pixie-sync.md, "The barrier"): for each category, the tombstones that reached
    /// this device before its last agreement with every other device of the logged roster are collected. The roster
    /// is fetched and checked now, every device on it counts (one with no inbox yet too: as 0, so nothing is
    /// collected until it agreed), and nothing is collected when it cannot be fetched or checked.
    func collect() async {
        let others: [AuthorTag]
        do {
            others = try await rosterAuthors()
        } catch {
            events(.failed("the roster could not be fetched and checked, so no tombstone was collected: \(error)"))
            return
        }
        do {
            let agreements = try context.store.agreements()
            for category in StoreCategory.allCases {
                let reach = AgreementBarrier.reach(category, agreements: agreements, others: others)
                guard reach > 0 else { continue }
                let count = try context.store.collectTombstones(category, throughSeq: reach)
                if count > 0 { events(.collected(category: category, count: count)) }
            }
        } catch {
            events(.failed("tombstones could not be collected: \(error)"))
        }
    }

    /// The sibling whose roster pubkey is `pubkey`, fetching the roster again if it is not known.
    private func sibling(pubkey: Data) async throws -> Sibling? {
        if let known = state.withLock({ $0.siblings })?.first(where: { $0.pubkey == pubkey }) { return known }
        // A sender it does not hold may have joined since: fetch again, but not more than once every 10 seconds, so
        // a removed device that still holds a SenderCert cannot make this device ask the server at will.
        let now = clock.now
        let mayFetch = state.withLock { state in
            if let last = state.lastUnknownSenderFetch, now.timeIntervalSince(last) < 10 { return false }
            state.lastUnknownSenderFetch = now
            return true
        }
        guard mayFetch else { return nil }
        return try await refreshRoster().first { $0.pubkey == pubkey }
    }

    /// Fetches the roster (`GET /v1/sync/siblings`), checks it against the transparency log, and keeps the siblings
    /// a round can reach.
    @discardableResult
    private func refreshRoster() async throws -> [Sibling] {
        try await fetchRoster().siblings
    }

    /// The author tags of every other device of the logged roster, fetched and checked now.
    private func rosterAuthors() async throws -> [AuthorTag] {
        try await fetchRoster().others
    }

    private func fetchRoster() async throws -> (siblings: [Sibling], others: [AuthorTag]) {
        let own = try context.state.identity.publicKey.rawRepresentation
        let roster: [RosterDevice]
        do {
            roster = try await context.bindings.verifiedRoster(
                try await context.client.siblings(session: try await context.credentials.session()),
                ktHandle: context.membership.ktHandle)
        } catch {
            state.withLock { $0.siblings = nil }
            throw error
        }
        let others = roster.filter { $0.pubkey != own }
        let siblings = try others.compactMap { device -> Sibling? in
            guard let inbox = device.inbox, let key = device.sealingKey else { return nil }
            return Sibling(
                pubkey: device.pubkey, author: AuthorTag(devicePublicKey: device.pubkey), inbox: inbox,
                key: try XWing.PublicKey(rawRepresentation: key))
        }
        state.withLock { $0.siblings = siblings }
        return (siblings, others.map { AuthorTag(devicePublicKey: $0.pubkey) })
    }

    static func header(of message: SiblingMessage) -> SyncRoundHeader? {
        switch message {
        case .syncDigest(let payload): payload.header
        case .syncSketch(let payload): payload.header
        case .syncWant(let payload): payload.header
        case .syncRows(let payload): payload.header
        default: nil
        }
    }

    static func summary(_ round: ReconcileRound, _ sibling: Sibling) -> Summary {
        let report = round.report
        return Summary(
            sibling: sibling.author, started: round.role == .initiator,
            differed: report.differed.count, rowsSent: report.rowsSent, rowsApplied: report.rowsApplied,
            rowsHeld: report.rowsHeld, rowsTooLarge: report.rowsTooLarge, rowsRefused: report.rowsRefused.count,
            clockDifference: report.clockDifference, agreedCategories: report.agreed)
    }
}
