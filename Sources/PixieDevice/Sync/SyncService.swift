import Foundation
import PixieWire
import PrivateFiles
import SiblingsCrypto
import Synchronization

/// SyncService (000_e422bd9a7c930342.txt, "What do I know?"): how a new device absorbs the whole store from a
/// sibling, and how a sibling answers.
///
/// The protocol logic is two pure state machines, one per side, with the I/O around them: ``AbsorbingStateMachine``
/// for the new device and ``OfferingStateMachine`` for a sibling, after ``SyncRequestCheck``'s isSameAccount and
/// freshness window; the ``ExportPipeline`` and the ``DownloadPipeline`` do the heavy lifting.
///
/// **The new device** (``absorb(events:)``) lists its siblings with `GET /v1/sync/siblings`, checked against the
/// logged roster, and leaves itself out: none left is ``Outcome/noSiblings``. To each it sends a ``SyncRequest``
/// (wake class Sync, the only such frame) with a `request_id` of its own, again every ``Configuration/resendInterval``
/// up to ``Configuration/sends`` times until that sibling answers. The first sibling to say it is preparing
/// (``SyncPreparing``) is the one it waits for; the others are sent a ``SyncCancel``. When its ``SyncOffer`` comes, the
/// new device downloads the blob by ranges into a file in its home, and hashes, opens and imports each range while
/// the next one downloads (``DownloadPipeline``, into a ``StoreImport`` beside the live store); nothing is kept unless
/// the whole blob's SHA-256 is the offer's (a mismatch is a hard failure, acked `ok: false`) and every chunk
/// authenticates. It then deletes the blob and acks `ok: true`. A download cut off resumes by range, across a restart
/// too: the offer and the bytes so far are kept in the home until the import.
///
/// **A sibling** (``respond(to:)``) opens with the seed's guard, `isSameAccount(senderUserIDHash)`, on every frame,
/// and also checks that the reply key is a device of the logged roster, so a removed device whose SenderCert has not
/// expired yet gets nothing. It says it is preparing, exports with snapshotPayload(includeSecrets: true), seals with
/// BlobCrypto under a fresh key and nonce and uploads it as `application/x-pixie-sync` as it goes (a pipeline: nothing
/// waits for the whole store), reporting progress with more SyncPreparing frames, and sends the offer;
/// if the export or the upload fails it says so (``SyncFailure``), so "declined" and "broke" differ.
public final class SyncService: Sendable {
    public struct Configuration: Sendable {
        /// The seed's re-send interval (5 s).
        public var resendInterval: Duration = .seconds(5)
        /// The seed's re-send budget (7 sends, about 35 s).
        public var sends = 7
        /// The onboarding screen's grace (30 s): if the snapshot has not started arriving by then (no ciphertext
        /// byte downloaded; a sibling saying it is preparing is not bytes), ``Event/mayContinue`` tells the person
        /// they may go on without the store (authorization has no such escape; it is done already).
        public var grace: Duration = .seconds(30)
        /// How long the new device waits for a sibling's offer after its SyncPreparing (counted again from each
        /// SyncPreparing that comes) before it gives up on it.
        public var preparingTimeout: Duration = .seconds(600)
        /// How often a sibling that is preparing a snapshot tells the new device how far it is (a SyncPreparing
        /// with the bytes sealed and sent so far), which also keeps the new device's ``preparingTimeout`` from
        /// running out on a long export.
        public var progressInterval: Duration = .seconds(30)
        /// Bytes per download request: what a cut-off download can lose, and what is in memory at once.
        public var rangeByteCount = 2 << 20
        /// How far a request's timestamp may be from the sibling's clock: an old request a relay plays again
        /// starts no export.
        public var freshness: TimeInterval = 300

        public init() {}
    }

    /// What the new device sees as it goes.
    public enum Event: Sendable, Equatable {
        /// Requests went out to this many siblings (the `attempt`th round of sends).
        case requesting(siblings: Int, attempt: Int)
        /// A sibling accepted and is preparing its snapshot.
        case preparing(estimatedBytes: UInt64, doneBytes: UInt64)
        /// A sibling declined or broke; the others may still answer.
        case siblingFailed(SyncFailure.Kind, reason: String)
        /// The offer came; downloading.
        case downloading(doneBytes: UInt64, totalBytes: UInt64)
        /// The whole blob is here and its SHA-256 is the offer's: opening and importing.
        case importing
        /// The grace is over and no byte of the snapshot has arrived (whether or not a sibling said it is
        /// preparing): the person may continue with an empty store while the absorption goes on (an app keeps the
        /// task running; `pixie sync` leaves it to its background worker). The seed: "If the snapshot has not
        /// started arriving after a thirty-second grace period, it lets the user continue anyway."
        case mayContinue
        /// A frame on this device's inbox was dropped (another account's, or not a sync message); the reason is
        /// for this device's log.
        case dropped(String)
    }

    /// How an absorption ended.
    public enum Outcome: Sendable, Equatable {
        case absorbed(BackupService.ImportSummary)
        /// The seed's `.noSiblings` phase: this is the account's only device.
        case noSiblings
        /// The re-send budget is spent and no sibling answered (asleep, offline, or a relay that lost the frames):
        /// `pixie sync retry` asks again.
        case noAnswer
        /// Every sibling that answered declined or failed; the reasons, one per sibling.
        case refused([String])
    }

    /// What a sibling did with a frame (for `pixie listen` to print).
    public enum SiblingOutcome: Sendable, Equatable {
        /// The snapshot went out: rows, blob bytes.
        case sent(rows: Int, bytes: UInt64)
        /// The new device's answer to an offer (informational).
        case acknowledged(ok: Bool, reason: String)
        /// Dropped without an answer; the reason is for this device's log only.
        case dropped(String)
        /// A frame of this account for an absorption this process does not run: another process of this home
        /// (`pixie sync` beside `pixie listen`) may be absorbing, and reads it itself. Left alone.
        case passed(String)
        /// The export or the upload failed; the new device was told.
        case failed(String)
        /// The new device cancelled before the snapshot went out.
        case cancelled
    }

    let context: DeviceContext
    let relay: any RelayConnection
    let configuration: Configuration
    let channelKeys: ChannelKeys
    let senderCerts: SenderCert.Verifier
    let inbox: RelaySubject
    let check: SyncRequestCheck
    /// The sibling's side: every request it is answering.
    private let offering: Mutex<OfferingStateMachine>
    /// The export tasks running, by request_id, so a cancel stops the right one.
    private let exports = Mutex<[Data: Task<Void, Never>]>([:])

    /// A sync service for the device of `context`, talking through `relay` (subscribed to this device's inbox by
    /// whoever reads its deliveries: ``absorb(events:)`` does it itself).
    public init(
        context: DeviceContext, relay: any RelayConnection, configuration: Configuration = Configuration()
    )
        throws
    {
        self.context = context
        self.relay = relay
        self.configuration = configuration
        let membership = context.membership
        let ownHash = membership.accountID.isEmpty ? nil : SenderCert.computeUserIDHash(membership.accountID)
        channelKeys = try context.store.channelKeys(
            ownUserIDHash: ownHash ?? Data(),
            accountSeed: membership.accountSeed.data.isEmpty ? nil : membership.accountSeed.data)
        senderCerts = SenderCert.Verifier(pinnedKeys: [context.state.trustBundle.senderCertKey])
        inbox = try context.state.inbox.subject
        check = SyncRequestCheck(ownUserIDHash: ownHash, freshness: configuration.freshness)
        offering = Mutex(OfferingStateMachine(check: check))
    }

    var clock: any DeviceClock { context.clock }
    var download: DownloadPipeline { DownloadPipeline(context: context, configuration: configuration) }

    /// A sync service for the device of `context`, with its own relay connection (close it with ``close()``).
    public static func connect(
        context: DeviceContext, configuration: Configuration = Configuration()
    ) async throws
        -> SyncService
    {
        let relay = try await context.connectRelay()
        do {
            return try SyncService(context: context, relay: relay, configuration: configuration)
        } catch {
            await relay.close()
            throw error
        }
    }

    /// Closes the relay connection.
    public func close() async { await relay.close() }

    /// The seed's isSameAccount: this device's own userIDHash is 32 bytes and equals the one in the verified
    /// SenderCert. A device that does not know its own account refuses everything.
    public func isSameAccount(_ senderUserIDHash: Data) -> Bool { check.isSameAccount(senderUserIDHash) }

    /// Opens a delivery to this device's inbox. Throws (the frame is dropped) unless it opens under this device's
    /// sealing key, its SenderCert verifies, its MAC is under the channel key that cert resolves, the sender is this
    /// account (isSameAccount), and it is a message this build reads.
    func open(_ envelope: Data) throws -> (sender: SenderCert, message: SiblingMessage) {
        let opened = try channelKeys.open(
            envelope, sealingKey: try context.state.sealing, inbox: inbox, senderCerts: senderCerts, now: clock.now)
        // The seed's guard, after the MAC: a contact's frame has a valid MAC under its own channel key.
        guard isSameAccount(opened.sender.userIDHash) else { throw DropReason("a frame from another account") }
        return (opened.sender, try SiblingMessage(type: opened.type, payload: opened.payload))
    }

    struct DropReason: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Seals `message` for the device with `key` at `subject` and sends it.
    @_spi(Testing) public func send(
        _ message: SiblingMessage, to subject: RelaySubject, key: XWing.PublicKey
    ) async throws {
        let envelope = try channelKeys.seal(
            message, senderCert: try await context.credentials.currentSenderCert(),
            to: check.ownUserIDHash ?? Data(), recipientKey: key, recipient: subject)
        try await relay.send(
            envelope, to: subject, wake: message.type.wakeClass, token: try await context.wallet.take())
    }
}

// MARK: the sibling

extension SyncService {
    /// Handles one delivery to this device's inbox as a sibling (handleRequest, handleAck, and a cancel); frames for
    /// a new device (preparing, offer, failure) are dropped here. Returns once the frame is handled: an accepted
    /// request's export runs on in a task of its own, and `report` hears how it ended.
    public func respond(to envelope: Data, report: @escaping @Sendable (SiblingOutcome) -> Void) async {
        do {
            await respond(opened: try open(envelope), report: report)
        } catch {
            report(.dropped("\(error)"))
        }
    }

    /// Handles one delivery already opened (``open(_:)``): the snapshot's frames here, a reconcile round's to `rounds`.
    func respond(
        opened: (sender: SenderCert, message: SiblingMessage), rounds: SyncLoop? = nil,
        report: @escaping @Sendable (SiblingOutcome) -> Void
    ) async {
        let (sender, message) = opened
        switch message {
        case .syncRequest(let request):
            await offer(.request(request, from: sender.deviceKey, now: clock.now), report: report)
        case .syncAck(let ack):
            await offer(.ack(ack), report: report)
        case .syncCancel(let cancel):
            await offer(.cancel(requestID: cancel.requestID, now: clock.now), report: report)
        case .syncPreparing, .syncOffer, .syncFailed:
            report(.passed("a \(message.type) frame for an absorption this process does not run"))
        case .signInRequest, .signInAck, .signInApproval, .signInSettled:
            report(.dropped("a \(message.type) frame, which is not a sync message"))
        case .syncDigest, .syncSketch, .syncWant, .syncRows:
            if let rounds {
                rounds.deliver(sender: sender, message: message)
            } else {
                report(.dropped("a \(message.type) frame of the reconcile loop, and this device is not running it"))
            }
        }
    }

    /// One round with every sibling of the logged roster (`pixie sync`; docs/pixie-sync.md, "When a round starts"),
    /// on this service's relay connection: subscribes this device's inbox, opens the rounds, takes the siblings'
    /// answers, and returns when every round ended or `patience` is over. Frames of other exchanges on the inbox (a
    /// `pixie listen` beside it answering, an absorption) are left alone.
    public func reconcile(
        patience: Duration = .seconds(15), configuration: SyncLoop.Configuration = SyncLoop.Configuration(),
        events: @escaping @Sendable (SyncLoop.Event) -> Void = { _ in }
    ) async throws -> SyncLoop.Rounds {
        try await relay.subscribe(try context.state.inbox)
        let loop = try reconcileLoop(configuration: configuration, events: events)
        let reader = Task { [relay] in
            for await delivery in relay.deliveries where delivery.subject == inbox {
                guard let opened = try? open(delivery.payload), SyncLoop.header(of: opened.message) != nil else {
                    continue
                }
                loop.deliver(sender: opened.sender, message: opened.message)
            }
        }
        defer { reader.cancel() }
        let rounds = await loop.roundOnce(patience: patience)
        await context.keepTransparencyPin()
        return rounds
    }

    /// The reconcile loop for this connection (docs/pixie-sync.md), sending through this service's sealing and relay.
    public func reconcileLoop(
        configuration: SyncLoop.Configuration = SyncLoop.Configuration(),
        events: @escaping @Sendable (SyncLoop.Event) -> Void = { _ in }
    ) throws -> SyncLoop {
        try SyncLoop(
            context: context, configuration: configuration,
            send: { [self] message, subject, key in
                try await send(message, to: subject, key: key)
            }, events: events)
    }

    /// Feeds `event` to the offering state machine and carries out what it says.
    private func offer(
        _ event: OfferingStateMachine.Event, report: @escaping @Sendable (SiblingOutcome) -> Void
    )
        async
    {
        // The machine's state changes under its lock; the actions run outside it.
        let actions = offering.withLock { $0.handle(event) }
        for action in actions {
            switch action {
            case .report(let outcome):
                report(outcome)
            case .checkRoster(let request, let from):
                let refusal = await rosterRefusal(request, from: from)
                await offer(
                    .rosterChecked(requestID: request.requestID, refusal: refusal, now: clock.now), report: report)
            case .startExport(let request):
                let id = request.requestID
                let pipeline = ExportPipeline(context: context, configuration: configuration) {
                    [self] message, subject, key in
                    try await send(message, to: subject, key: key)
                }
                // Registered under the lock the task's own removal takes, so the removal always finds it.
                exports.withLock { running in
                    running[id] = Task { [self] in
                        let result = await pipeline.run(for: request)
                        _ = exports.withLock { $0.removeValue(forKey: id) }
                        await offer(.exportEnded(requestID: id, result), report: report)
                    }
                }
                // A cancel handled between the machine's answer and the registration found no task to stop: the
                // machine says so by now, and the task is stopped here.
                if offering.withLock({ $0.phase(of: id) }) == .stopping { exports.withLock { $0[id] }?.cancel() }
            case .stopExport(let id):
                exports.withLock { $0[id] }?.cancel()
            case .sendOffer(let offer, let request):
                var error: String?
                do {
                    try await send(.syncOffer(offer), to: request.replySubject, key: request.replyPubkey)
                } catch let failed {
                    error = "\(failed)"
                }
                await self.offer(.offerSent(requestID: offer.requestID, error: error), report: report)
            case .sendFailure(let failure, let request):
                try? await send(.syncFailed(failure), to: request.replySubject, key: request.replyPubkey)
            case .deleteBlob(let blob):
                try? await context.client.deleteBlob(blob)
            }
        }
    }

    /// Nil if `request`'s reply goes to a device of the logged roster and its sender is one; otherwise why not. A
    /// removed device whose cert has not expired yet gets nothing.
    private func rosterRefusal(_ request: SyncRequest, from sender: Data) async -> String? {
        do {
            let roster = try await context.bindings.verifiedRoster(
                try await context.client.siblings(session: try await context.credentials.session()),
                ktHandle: context.membership.ktHandle)
            let key = request.replyPubkey.rawRepresentation
            guard
                roster.contains(where: {
                    $0.sealingKey == key && $0.inbox == request.replySubject && $0.pubkey == sender
                })
            else { return "a sync request from a device that is not in the account's logged roster" }
            return nil
        } catch {
            return "the roster could not be checked, so the request was not answered: \(error)"
        }
    }
}

// MARK: the new device

extension SyncService {
    /// The new device's side: asks every sibling, waits for the first that prepares, and absorbs its snapshot. An
    /// offer kept from an earlier run (its download cut off) is resumed first.
    public func absorb(events: @escaping @Sendable (Event) -> Void = { _ in }) async throws -> Outcome {
        let outcome = try await asking(events: events)
        // The checkpoint the roster was checked at, kept for the next run.
        await context.keepTransparencyPin()
        return outcome
    }

    private func asking(events: @escaping @Sendable (Event) -> Void) async throws -> Outcome {
        let ownKey = try context.state.identity.publicKey.rawRepresentation
        let roster = try await context.bindings.verifiedRoster(
            try await context.client.siblings(session: try await context.credentials.session()),
            ktHandle: context.membership.ktHandle)
        let siblings = roster.filter { $0.pubkey != ownKey && $0.inbox != nil && $0.sealingKey != nil }
        try await relay.subscribe(try context.state.inbox)
        // A download an earlier run began goes on from where it stopped, while the blob lasts.
        let download = self.download
        if let saved = try download.savedOffer() {
            do {
                return try await finish(saved.offer, replyTo: saved.subject, key: saved.key, events: events)
            } catch PixieClientError.refused(let status, _) where status == 404 {
                try? PrivateFiles.remove(download.offerFile)
                try? PrivateFiles.remove(download.stagingFile(saved.offer))
            }
        }
        let addresses = try siblings.map {
            (subject: $0.inbox!, key: try XWing.PublicKey(rawRepresentation: $0.sealingKey!))
        }
        var machine = AbsorbingStateMachine(
            siblings: siblings.map {
                .init(
                    deviceKey: $0.pubkey,
                    requestID: context.environment.random.bytes(count: SyncMessage.requestIDByteCount))
            },
            configuration: configuration)
        let sealing = try context.state.sealing.publicKey

        // Deliveries are opened by one task and handed over here as events; the timers run on the clock.
        let (arrivals, arrive) = AsyncStream.makeStream(of: AbsorbingStateMachine.Event.self)
        let reader = Task { [relay] in
            for await delivery in relay.deliveries {
                do {
                    let (sender, message) = try open(delivery.payload)
                    switch message {
                    case .syncPreparing(let preparing): arrive.yield(.preparing(from: sender.deviceKey, preparing))
                    case .syncFailed(let failure): arrive.yield(.failure(from: sender.deviceKey, failure))
                    case .syncOffer(let offer): arrive.yield(.offer(from: sender.deviceKey, offer))
                    case .syncRequest, .syncAck, .syncCancel, .syncDigest, .syncSketch, .syncWant, .syncRows: continue
                    case .signInRequest, .signInAck, .signInApproval, .signInSettled:
                        events(.dropped("a \(message.type) frame, which is not a sync message"))
                    }
                } catch {
                    events(.dropped("\(error)"))
                }
            }
            arrive.yield(.relayClosed)
        }
        var timers: [AbsorbingStateMachine.Timer: Task<Void, Never>] = [:]
        defer {
            reader.cancel()
            for timer in timers.values { timer.cancel() }
            arrive.finish()
        }
        // The re-sends and the grace count from here, however long the sends take.
        let start = clock.now
        var pending = machine.handle(.start)
        var iterator = arrivals.makeAsyncIterator()
        while true {
            var next: AbsorbingStateMachine.Event?
            for action in pending {
                switch action {
                case .report(let event):
                    events(event)
                case .sendRequest(let index):
                    let request = SyncRequest(
                        requestID: machine.siblings[index].requestID, replySubject: inbox, replyPubkey: sealing,
                        timestamp: clock.now)
                    try? await send(.syncRequest(request), to: addresses[index].subject, key: addresses[index].key)
                case .sendCancel(let index):
                    let cancel = SyncCancel(requestID: machine.siblings[index].requestID)
                    try? await send(.syncCancel(cancel), to: addresses[index].subject, key: addresses[index].key)
                case .sendAck(let ack, let index):
                    try? await send(.syncAck(ack), to: addresses[index].subject, key: addresses[index].key)
                case .deleteBlob(let blob):
                    try? await context.client.deleteBlob(blob)
                case .startTimer(let timer, let after):
                    timers[timer]?.cancel()
                    timers[timer] = clock.timer(until: clock.now.addingTimeInterval(after.timeInterval)) {
                        arrive.yield(.timerFired(timer))
                    }
                case .scheduleTimer(let timer, let at):
                    timers[timer]?.cancel()
                    timers[timer] = clock.timer(until: start.addingTimeInterval(at.timeInterval)) {
                        arrive.yield(.timerFired(timer))
                    }
                case .cancelTimer(let timer):
                    timers.removeValue(forKey: timer)?.cancel()
                case .download(let offer, let index):
                    try download.saveOffer(offer, replyTo: addresses[index].subject, key: addresses[index].key)
                    next = .downloaded(
                        try await finish(
                            offer, replyTo: addresses[index].subject, key: addresses[index].key, events: events))
                case .finish(let outcome):
                    return outcome
                case .fail(let error):
                    throw error
                }
            }
            if let next {
                pending = machine.handle(next)
                continue
            }
            guard let event = await iterator.next() else {
                // The stream ends only when this task is cancelled.
                try Task.checkCancellation()
                throw RelayConnectionError.closed(AbsorbingStateMachine.closedReason)
            }
            pending = machine.handle(event)
        }
    }

    /// Takes the offer's blob and acks it: the outcome once absorbed; throws a tampered blob's error after acking
    /// `ok: false` (the kept offer and bytes are dropped), and the network's error as it is (they are kept, to
    /// resume).
    private func finish(
        _ offer: SyncOffer, replyTo subject: RelaySubject, key: XWing.PublicKey, events: @Sendable (Event) -> Void
    ) async throws -> Outcome {
        let download = self.download
        let result = try await download.take(offer, events: events)
        try? PrivateFiles.remove(download.offerFile)
        switch result {
        case .success(let imported):
            try? await send(.syncAck(SyncAck(requestID: offer.requestID, ok: true)), to: subject, key: key)
            return .absorbed(imported)
        case .failure(let error):
            let ack = SyncAck(requestID: offer.requestID, ok: false, reason: clipped(error.description))
            try? await send(.syncAck(ack), to: subject, key: key)
            throw error
        }
    }
}

/// `text` cut to the 256 bytes of UTF-8 a sync message's reason holds, at a character boundary.
func clipped(_ text: String) -> String {
    var out = ""
    for character in text {
        if out.utf8.count + character.utf8.count > SyncMessage.maximumReasonByteCount { break }
        out.append(character)
    }
    return out
}
