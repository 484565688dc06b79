import Foundation
import PixieWire
import PrivateFiles
import SiblingsCrypto
import Synchronization

/// SyncService (000_e422bd9a7c930342.txt, "What do I know?"): how a new device absorbs the whole store from a
/// sibling, and how a sibling answers.
///
/// **The new device** (``absorb(events:)``) lists its siblings with `GET /v1/sync/siblings`, checked against the
/// logged roster, and leaves itself out: none left is ``Outcome/noSiblings``. To each it sends a ``SyncRequest``
/// (wake class Sync, the only such frame) with a `request_id` of its own, again every ``Configuration/resendInterval``
/// up to ``Configuration/sends`` times until that sibling answers. The first sibling to say it is preparing
/// (``SyncPreparing``) is the one it waits for; the others are sent a ``SyncCancel``. When its ``SyncOffer`` comes, the
/// new device downloads the blob by ranges into a file in its home while hashing it, checks SHA-256 against the
/// offer's before it decrypts anything (a mismatch is a hard failure, acked `ok: false`), then opens and imports it in
/// one pass and one transaction (BlobCrypto, BackupService.importRawPayload: nothing is kept unless every chunk
/// authenticates), deletes the blob and acks `ok: true`. A download cut off resumes by range, across a restart too:
/// the offer and the bytes so far are kept in the home until the import.
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
        public var rangeByteCount = 8 << 20
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
    let ownUserIDHash: Data?
    /// Exports running on this sibling, by request_id, so a re-sent request starts nothing new and a cancel stops
    /// the right one.
    private let exports = Mutex<[Data: Task<Void, Never>]>([:])
    /// Requests answered already, by request_id, with when: a re-send that arrives after the export finished starts
    /// no second one. Kept for the freshness window, after which the request itself is refused as stale.
    private let answered = Mutex<[Data: Date]>([:])
    /// Blobs this sibling offered and the new device has not acked yet, by request_id: a cancel that comes after
    /// the offer went out (the new device took another sibling's), or an ack ok:false, deletes the blob at once
    /// rather than leaving it on blob-svc for a day.
    private let offered = Mutex<[Data: String]>([:])

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
        ownUserIDHash = ownHash
        senderCerts = SenderCert.Verifier(pinnedKeys: [context.state.trustBundle.senderCertKey])
        inbox = try context.state.inbox.subject
    }

    var home: DeviceHome { context.home }
    var store: DeviceStore { context.store }
    var client: PixieClient { context.client }
    var wallet: TokenWallet { context.wallet }
    var credentials: DeviceCredentials { context.credentials }
    var bindings: LoggedBindings { context.bindings }
    var state: DeviceState { context.state }
    var membership: DeviceState.Membership { context.membership }
    var clock: any DeviceClock { context.clock }

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
    public func isSameAccount(_ senderUserIDHash: Data) -> Bool {
        guard let own = ownUserIDHash, own.count == 32, senderUserIDHash.count == 32 else { return false }
        return safeCompare(own, senderUserIDHash)
    }

    /// A sync frame, opened and checked: who sent it (a verified cert of this account) and what it says.
    enum Frame {
        case request(SyncRequest)
        case preparing(SyncPreparing)
        case offer(SyncOffer)
        case ack(SyncAck)
        case failure(SyncFailure)
        case cancel(SyncCancel)
    }

    /// Opens a delivery to this device's inbox. Throws (the frame is dropped) unless it opens under this device's
    /// sealing key, its SenderCert verifies, its MAC is under the channel key that cert resolves, the sender is this
    /// account (isSameAccount), and it is a sync message.
    func open(_ envelope: Data) throws -> (sender: SenderCert, frame: Frame) {
        let opened = try channelKeys.open(
            envelope, sealingKey: try state.sealing, inbox: inbox, senderCerts: senderCerts, now: clock.now)
        // The seed's guard, after the MAC: a contact's frame has a valid MAC under its own channel key.
        guard isSameAccount(opened.sender.userIDHash) else { throw DropReason("a frame from another account") }
        let frame: Frame
        switch opened.type {
        case .syncRequest: frame = .request(try SyncRequest(decoding: opened.payload))
        case .syncPreparing: frame = .preparing(try SyncPreparing(decoding: opened.payload))
        case .syncOffer: frame = .offer(try SyncOffer(decoding: opened.payload))
        case .syncAck: frame = .ack(try SyncAck(decoding: opened.payload))
        case .syncFailed: frame = .failure(try SyncFailure(decoding: opened.payload))
        case .syncCancel: frame = .cancel(try SyncCancel(decoding: opened.payload))
        default: throw DropReason("a \(opened.type) frame, which is not a sync message")
        }
        return (opened.sender, frame)
    }

    struct DropReason: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Seals `payload` for the device with `key` at `subject` and sends it.
    func send(_ type: PayloadType, _ payload: Data, to subject: RelaySubject, key: XWing.PublicKey) async throws {
        let envelope = try channelKeys.seal(
            type, payload, senderCert: try await credentials.currentSenderCert(), to: ownUserIDHash ?? Data(),
            recipientKey: key, recipient: subject)
        try await relay.send(envelope, to: subject, wake: type.wakeClass, token: try await wallet.take())
    }

    var syncDirectory: URL { home.directory.appendingPathComponent("sync") }

    func makeSyncDirectory() throws {
        do {
            try PrivateFiles.createDirectory(syncDirectory, noun: "the device's sync folder")
        } catch {
            throw BackupServiceError.io(error.reason)
        }
    }
}

// MARK: the sibling

extension SyncService {
    /// Handles one delivery to this device's inbox as a sibling (handleRequest, handleAck, and a cancel); frames for
    /// a new device (preparing, offer, failure) are dropped here. Returns once the frame is handled: an accepted
    /// request's export runs on in a task of its own, and `report` hears how it ended.
    public func respond(to envelope: Data, report: @escaping @Sendable (SiblingOutcome) -> Void) async {
        let sender: SenderCert
        let frame: Frame
        do {
            (sender, frame) = try open(envelope)
        } catch {
            report(.dropped("\(error)"))
            return
        }
        switch frame {
        case .request(let request):
            await handleRequest(request, from: sender, report: report)
        case .ack(let ack):
            // ok:true: the new device deleted the blob itself. Otherwise it may not have.
            if let blob = offered.withLock({ $0.removeValue(forKey: ack.requestID) }), !ack.ok {
                try? await client.deleteBlob(blob)
            }
            report(.acknowledged(ok: ack.ok, reason: ack.reason))
        case .cancel(let cancel):
            let task = exports.withLock { $0[cancel.requestID] }
            task?.cancel()
            let blob = offered.withLock { $0.removeValue(forKey: cancel.requestID) }
            if let blob { try? await client.deleteBlob(blob) }
            // Frames are handled each in a task of its own, so a cancel may be handled before its request: the
            // request counts as answered, and starts nothing when it comes.
            if task == nil, blob == nil {
                answered.withLock { [clock] in $0[cancel.requestID] = clock.now }
                report(.dropped("a cancel for a request this device has not started; it will start nothing"))
            } else {
                report(.cancelled)
            }
        case .preparing, .offer, .failure:
            report(.dropped("a frame for a new device, and this one is not absorbing"))
        }
    }

    private func handleRequest(
        _ request: SyncRequest, from sender: SenderCert, report: @escaping @Sendable (SiblingOutcome) -> Void
    ) async {
        // A re-send of a request being answered, or answered already, starts nothing new.
        let now = clock.now
        let seen = answered.withLock { answered -> Bool in
            answered = answered.filter { now.timeIntervalSince($0.value) <= 2 * configuration.freshness }
            return answered[request.requestID] != nil
        }
        guard !seen, exports.withLock({ $0[request.requestID] == nil }) else { return }
        guard abs(request.timestamp.timeIntervalSince(now)) <= configuration.freshness else {
            report(.dropped("a sync request stamped \(request.timestamp), too far from this device's clock"))
            return
        }
        // The reply goes to a device of the logged roster, and the sender is one: a removed device whose cert has
        // not expired yet gets nothing.
        do {
            let roster = try await bindings.verifiedRoster(
                try await client.siblings(session: try await credentials.session()), ktHandle: membership.ktHandle)
            let key = request.replyPubkey.rawRepresentation
            guard
                roster.contains(where: {
                    $0.sealingKey == key && $0.inbox == request.replySubject && $0.pubkey == sender.deviceKey
                })
            else {
                report(.dropped("a sync request from a device that is not in the account's logged roster"))
                return
            }
        } catch {
            report(.dropped("the roster could not be checked, so the request was not answered: \(error)"))
            return
        }
        // One export per request_id, ever: the claim (the request counts as answered from now on) and the task
        // go in under one lock, so a re-send handled at the same time, or a cancel, finds one or the other.
        let id = request.requestID
        exports.withLock { exports in
            let fresh = answered.withLock { answered -> Bool in
                guard answered[id] == nil else { return false }
                answered[id] = now
                return true
            }
            guard fresh, exports[id] == nil else { return }
            exports[id] = Task { [self] in
                await export(for: request, report: report)
                _ = self.exports.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    private func export(for request: SyncRequest, report: @Sendable (SiblingOutcome) -> Void) async {
        let reply = request.replySubject
        let key = request.replyPubkey
        let id = request.requestID
        func fail(_ kind: SyncFailure.Kind, _ reason: String) async {
            report(.failed(reason))
            if let payload = try? SyncFailure(requestID: id, kind: kind, reason: clipped(reason))
                .encoded
            {
                try? await send(.syncFailed, payload, to: reply, key: key)
            }
        }
        let estimate = BlobCrypto.sealedByteCount(plaintextByteCount: store.byteCount)
        do {
            try await send(
                .syncPreparing, try SyncPreparing(requestID: id, estimatedBytes: estimate).encoded, to: reply, key: key)
        } catch {
            report(.failed("could not answer the request: \(error)"))
            return
        }
        // Export, seal and upload at once: the sealed pieces go to blob-svc as they are made, at most the pipe's
        // capacity waiting in between, while SyncPreparing reports say how far it is.
        let pipe = PipedBody()
        let stop = StopFlag()
        let uploading = Task { [client, wallet, bindings] in
            // However the upload ends (or never starts: no tokens), a sealer waiting on a full pipe is let go.
            defer { pipe.readerStopped() }
            // Paid with upload-class tokens, not the session, so nothing in the upload names this account; an
            // operator who joins it with the mint a moment before, by time and count, still can
            // (docs/pixie-protocol.md, "What blob-svc can still link"). Enough for half again the estimate, which
            // is the store file's size, bigger than its snapshot but for a store made of a few rows.
            let needed = Int((Double(estimate) * 1.5 / Double(BlobAPI.bytesPerUploadToken)).rounded(.up)) + 1
            let tokens = try await wallet.uploadTokens(
                count: min(needed, TokenWallet.uploadBatchLimit), verifier: UploadKeyListVerifier(bindings: bindings))
            return try await client.uploadBlob(pipe, mime: "application/x-pixie-sync", tokens: tokens)
        }
        let reporting = Task {
            var reported: UInt64 = 0
            while !Task.isCancelled {
                try? await clock.sleep(for: configuration.progressInterval)
                guard !Task.isCancelled else { return }
                // The estimate is the store's file size; a snapshot that outgrows it raises it. Nothing moved,
                // nothing sent: a stalled export is not kept alive by its reports (each costs a relay token).
                let done = pipe.byteCount
                guard done > reported else { continue }
                reported = done
                let progress = SyncPreparing(requestID: id, estimatedBytes: max(estimate, done), doneBytes: done)
                if let payload = try? progress.encoded { try? await send(.syncPreparing, payload, to: reply, key: key) }
            }
        }
        let sealed: Result<Sealed, any Error> = await withTaskCancellationHandler {
            await Self.onOwnThread { [store] in
                Result { try Self.sealSnapshot(of: store, into: pipe, stop: stop) }
            }
        } onCancel: {
            stop.set()
            pipe.readerStopped()
        }
        reporting.cancel()
        let upload = await uploading.result
        let snapshot: Sealed
        switch sealed {
        case .success(let done):
            snapshot = done
        case .failure(let error):
            if let uploaded = try? upload.get() { try? await client.deleteBlob(uploaded.blobID) }
            if error is CancellationError || stop.isSet {
                report(.cancelled)
            } else if error as? PipedBodyError == .readerGone, case .failure(let failed) = upload {
                await fail(.uploadFailed, "blob-svc did not take the snapshot: \(failed)")
            } else {
                await fail(.exportFailed, "this device could not export its store: \(error)")
            }
            return
        }
        let uploaded: BlobAPI.UploadResponse
        switch upload {
        case .success(let answer): uploaded = answer
        case .failure(let error):
            await fail(.uploadFailed, "blob-svc did not take the snapshot: \(error)")
            return
        }
        guard let blobID = Data(base64URLEncoded: uploaded.blobID), blobID.count == SyncOffer.blobIDByteCount,
            uploaded.sizeBytes == Int64(snapshot.size), Data(base64URLEncoded: uploaded.sha256) == snapshot.sha256
        else {
            try? await client.deleteBlob(uploaded.blobID)
            await fail(
                .uploadFailed,
                "the blob blob-svc stored is not the snapshot sent (its size or SHA-256 differs: the upload was cut "
                    + "or altered on its way); it was deleted")
            return
        }
        // Recorded before the last look at cancellation, so that a cancel from now on finds the blob to delete.
        offered.withLock { $0[id] = uploaded.blobID }
        if Task.isCancelled {
            if offered.withLock({ $0.removeValue(forKey: id) }) != nil { try? await client.deleteBlob(uploaded.blobID) }
            report(.cancelled)
            return
        }
        do {
            let offer = SyncOffer(
                requestID: id, blobID: blobID, key: snapshot.key.withUnsafeBytes { Data($0) },
                nonce: snapshot.nonce, sha256: snapshot.sha256, sizeBytes: snapshot.size)
            try await send(.syncOffer, try offer.encoded, to: reply, key: key)
        } catch {
            // The new device cannot know the blob: it goes now, not in a day.
            if offered.withLock({ $0.removeValue(forKey: id) }) != nil { try? await client.deleteBlob(uploaded.blobID) }
            await fail(.uploadFailed, "the offer could not be sent: \(error)")
            return
        }
        report(.sent(rows: snapshot.rows, bytes: snapshot.size))
    }

    /// What a sealed snapshot is: its hash and size as sent, its rows, and the key and nonce it was sealed under.
    struct Sealed: Sendable {
        let sha256: Data
        let size: UInt64
        let rows: Int
        let key: SymmetricKey
        let nonce: Data
    }

    /// Exports `store` with secrets, seals it under a fresh key and nonce, and writes the blob into `pipe` as it
    /// goes, hashing it; the pipe is finished (or failed) when this returns. Blocks: run on a thread of its own.
    static func sealSnapshot(of store: DeviceStore, into pipe: PipedBody, stop: StopFlag) throws -> Sealed {
        var sealer = BlobCrypto.Sealer()
        let key = sealer.key
        let nonce = sealer.nonce
        var hash = SHA256()
        var size: UInt64 = 0
        func write(_ bytes: Data) throws {
            if stop.isSet { throw CancellationError() }
            hash.update(data: bytes)
            size += UInt64(bytes.count)
            try pipe.write(bytes)
        }
        do {
            let summary = try BackupService(store: store).exportRawPayload(includeSecrets: true) { piece in
                try write(try sealer.update(piece))
            }
            try write(try sealer.finalize())
            pipe.finish()
            return Sealed(sha256: Data(hash.finalize()), size: size, rows: summary.rows, key: key, nonce: nonce)
        } catch {
            pipe.fail(error)
            throw error
        }
    }

    /// `body`'s value, computed on a thread of its own rather than on the cooperative pool (it blocks: on
    /// SQLite, on a full pipe).
    static func onOwnThread<Value: Sendable>(_ body: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }
}

/// Set once, read from any thread: how a task's cancellation reaches work on a thread of its own.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
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
        let ownKey = try state.identity.publicKey.rawRepresentation
        let roster = try await bindings.verifiedRoster(
            try await client.siblings(session: try await credentials.session()), ktHandle: membership.ktHandle)
        let siblings = roster.filter { $0.pubkey != ownKey && $0.inbox != nil && $0.sealingKey != nil }
        try await relay.subscribe(try state.inbox)
        // A download an earlier run began goes on from where it stopped, while the blob lasts.
        if let saved = try savedOffer() {
            do {
                if let outcome = try await finish(saved.offer, replyTo: saved.subject, key: saved.key, events: events) {
                    return outcome
                }
            } catch PixieClientError.refused(let status, _) where status == 404 {
                try? PrivateFiles.remove(offerFile)
                try? PrivateFiles.remove(stagingFile(saved.offer))
            }
        }
        guard !siblings.isEmpty else { return .noSiblings }

        struct Asked {
            let device: RosterDevice
            let subject: RelaySubject
            let key: XWing.PublicKey
            let requestID: Data
            var answered = false
            var failed: String?
        }
        var asked = try siblings.map { device in
            Asked(
                device: device, subject: device.inbox!, key: try XWing.PublicKey(rawRepresentation: device.sealingKey!),
                requestID: context.environment.random.bytes(count: SyncMessage.requestIDByteCount))
        }
        let sealing = try state.sealing.publicKey
        func request(_ entry: Asked) throws -> Data {
            try SyncRequest(requestID: entry.requestID, replySubject: inbox, replyPubkey: sealing, timestamp: clock.now)
                .encoded
        }

        // Deliveries are read by one task and handed over here; a timer ticks the re-sends.
        let (arrivals, arrive) = AsyncStream.makeStream(of: Arrival.self)
        let reader = Task { [relay] in
            for await delivery in relay.deliveries { arrive.yield(.frame(delivery.payload)) }
            arrive.yield(.closed)
        }
        let ticker = Task { [configuration, clock] in
            for attempt in 1...configuration.sends {
                arrive.yield(.tick(attempt))
                try? await clock.sleep(for: configuration.resendInterval)
                if Task.isCancelled { return }
            }
            arrive.yield(.budgetSpent)
        }
        let grace = Task { [configuration, clock] in
            try? await clock.sleep(for: configuration.grace)
            if !Task.isCancelled { arrive.yield(.graceOver) }
        }
        defer {
            reader.cancel()
            ticker.cancel()
            grace.cancel()
            arrive.finish()
        }
        var chosen: Int?
        var watchdog: Task<Void, Never>?
        defer { watchdog?.cancel() }
        func rearm() {
            watchdog?.cancel()
            watchdog = Task { [configuration, clock] in
                try? await clock.sleep(for: configuration.preparingTimeout)
                if !Task.isCancelled { arrive.yield(.preparingTimedOut) }
            }
        }

        for await arrival in arrivals {
            switch arrival {
            case .tick(let attempt):
                guard chosen == nil else { continue }
                let waiting = asked.indices.filter { !asked[$0].answered }
                if waiting.isEmpty { continue }
                events(.requesting(siblings: waiting.count, attempt: attempt))
                for index in waiting {
                    try? await send(
                        .syncRequest, try request(asked[index]), to: asked[index].subject, key: asked[index].key)
                }
            case .graceOver:
                // Downloading happens inside this loop's turn (``finish``), so a grace that ends here found no byte
                // arriving: a promise of bytes (a SyncPreparing) does not withhold it.
                events(.mayContinue)
            case .budgetSpent:
                guard chosen == nil else { continue }
                let failures = asked.compactMap(\.failed)
                return failures.isEmpty ? .noAnswer : .refused(failures)
            case .preparingTimedOut:
                if let index = chosen {
                    asked[index].failed = "the sibling stopped reporting progress before its offer came"
                    return .refused(asked.compactMap(\.failed))
                }
            case .closed:
                throw RelayConnectionError.closed("the relay closed the connection while waiting for a sibling")
            case .frame(let envelope):
                let sender: SenderCert
                let frame: Frame
                do {
                    (sender, frame) = try open(envelope)
                } catch {
                    events(.dropped("\(error)"))
                    continue
                }
                func index(of id: Data) -> Int? {
                    asked.firstIndex { $0.requestID == id && $0.device.pubkey == sender.deviceKey }
                }
                switch frame {
                case .preparing(let preparing):
                    guard let index = index(of: preparing.requestID) else { continue }
                    asked[index].answered = true
                    if chosen == nil {
                        chosen = index
                        // No second sibling uploads a store for nothing.
                        for other in asked.indices where other != index {
                            asked[other].answered = true
                            if let cancel = try? SyncCancel(requestID: asked[other].requestID).encoded {
                                try? await send(.syncCancel, cancel, to: asked[other].subject, key: asked[other].key)
                            }
                        }
                    }
                    guard chosen == index else { continue }
                    rearm()
                    events(.preparing(estimatedBytes: preparing.estimatedBytes, doneBytes: preparing.doneBytes))
                case .failure(let failure):
                    guard let index = index(of: failure.requestID) else { continue }
                    asked[index].answered = true
                    asked[index].failed = failure.reason
                    events(.siblingFailed(failure.kind, reason: failure.reason))
                    // The one preparing broke (the others were cancelled), or every sibling said no.
                    if chosen == index || asked.allSatisfy({ $0.failed != nil }) {
                        return .refused(asked.compactMap(\.failed))
                    }
                case .offer(let offer):
                    guard let index = index(of: offer.requestID) else { continue }
                    if let chosen, chosen != index {
                        // A sibling that finished before its cancel came: its blob is of no use, so it goes now
                        // rather than in a day, and the sibling hears why.
                        try? await client.deleteBlob(offer.blobName)
                        let ack = SyncAck(
                            requestID: offer.requestID, ok: false, reason: "another sibling's snapshot was taken")
                        if let payload = try? ack.encoded {
                            try? await send(.syncAck, payload, to: asked[index].subject, key: asked[index].key)
                        }
                        continue
                    }
                    watchdog?.cancel()
                    let target = asked[index]
                    try saveOffer(offer, replyTo: target.subject, key: target.key)
                    if let outcome = try await finish(offer, replyTo: target.subject, key: target.key, events: events) {
                        return outcome
                    }
                case .request, .ack, .cancel:
                    continue
                }
            }
        }
        throw RelayConnectionError.closed("the relay closed the connection while waiting for a sibling")
    }

    /// Takes the offer's blob and acks it: the outcome once absorbed; throws a tampered blob's error after acking
    /// `ok: false` (the kept offer and bytes are dropped), and the network's error as it is (they are kept, to
    /// resume).
    private func finish(
        _ offer: SyncOffer, replyTo subject: RelaySubject, key: XWing.PublicKey, events: @Sendable (Event) -> Void
    ) async throws -> Outcome? {
        let result = try await take(offer, events: events)
        try? PrivateFiles.remove(offerFile)
        switch result {
        case .success(let imported):
            try? await send(.syncAck, try SyncAck(requestID: offer.requestID, ok: true).encoded, to: subject, key: key)
            return .absorbed(imported)
        case .failure(let error):
            let ack = SyncAck(requestID: offer.requestID, ok: false, reason: clipped(error.description))
            try? await send(.syncAck, try ack.encoded, to: subject, key: key)
            throw error
        }
    }

    var offerFile: URL { syncDirectory.appendingPathComponent("incoming-offer.json") }

    func stagingFile(_ offer: SyncOffer) -> URL {
        syncDirectory.appendingPathComponent("incoming-\(offer.blobName).blob")
    }

    private struct SavedOffer: Codable {
        var offer: Base64URLBytes
        var subject: Base64URLBytes
        var key: Base64URLBytes
    }

    /// Keeps the offer (its key included: the file is the device's own, mode 0600, in its private home) so that a
    /// restart resumes the download instead of asking again.
    private func saveOffer(_ offer: SyncOffer, replyTo subject: RelaySubject, key: XWing.PublicKey) throws {
        try makeSyncDirectory()
        let saved = SavedOffer(
            offer: Base64URLBytes(try offer.encoded), subject: Base64URLBytes(subject.rawRepresentation),
            key: Base64URLBytes(key.rawRepresentation))
        do {
            try PrivateFiles.write(try JSONEncoder().encode(saved), to: offerFile)
        } catch let error as PrivateFilesError {
            throw BackupServiceError.io(error.reason)
        }
    }

    private func savedOffer() throws -> (offer: SyncOffer, subject: RelaySubject, key: XWing.PublicKey)? {
        let data: Data?
        do {
            data = try PrivateFiles.read(offerFile, noun: "a kept sync offer")
        } catch {
            throw BackupServiceError.io(error.reason)
        }
        guard let data else { return nil }
        guard let saved = try? JSONDecoder().decode(SavedOffer.self, from: data),
            let offer = try? SyncOffer(decoding: saved.offer.data),
            let subject = try? RelaySubject(rawRepresentation: saved.subject.data),
            let key = try? XWing.PublicKey(rawRepresentation: saved.key.data)
        else {
            // Damaged: ask again rather than resume.
            try? PrivateFiles.remove(offerFile)
            return nil
        }
        return (offer, subject, key)
    }

    enum Arrival: Sendable {
        case frame(Data)
        case tick(Int)
        case budgetSpent
        case graceOver
        case preparingTimedOut
        case closed
    }

    /// Downloads, checks and imports the blob of `offer`; a tampered or cut blob is a failure to ack, anything else
    /// (the network, the store) is thrown.
    func take(
        _ offer: SyncOffer, events: @Sendable (Event) -> Void
    ) async throws -> Result<
        BackupService.ImportSummary, BackupServiceError
    > {
        try makeSyncDirectory()
        let file = stagingFile(offer)
        var hash = SHA256()
        var have: UInt64 = 0
        // What an earlier run fetched is kept, and hashed again (it is on this device's own disk).
        if let reader = try? PrivateFiles.FileReader(file) {
            while true {
                let piece = try BackupService.io { () throws(PrivateFilesError) in try reader.read(upTo: 1 << 20) }
                if piece.isEmpty { break }
                hash.update(data: piece)
                have += UInt64(piece.count)
            }
        }
        guard have <= offer.sizeBytes else {
            try? PrivateFiles.remove(file)
            return .failure(.tampered("the blob is longer than the offer says"))
        }
        let output = try BackupService.io { () throws(PrivateFilesError) in try PrivateFiles.AppendFile(file) }
        while have < offer.sizeBytes {
            events(.downloading(doneBytes: have, totalBytes: offer.sizeBytes))
            let want = Int(min(UInt64(configuration.rangeByteCount), offer.sizeBytes - have))
            let (bytes, size) = try await client.blobRange(offer.blobName, from: have, count: want)
            guard size == offer.sizeBytes, !bytes.isEmpty else {
                output.close()
                try? PrivateFiles.remove(file)
                return .failure(
                    .tampered("blob-svc holds \(size) bytes under this blob, and the offer says \(offer.sizeBytes)"))
            }
            try BackupService.io { () throws(PrivateFilesError) in try output.append(bytes) }
            hash.update(data: bytes)
            have += UInt64(bytes.count)
        }
        output.close()
        events(.downloading(doneBytes: have, totalBytes: offer.sizeBytes))
        // The seed's order: the whole ciphertext's SHA-256, from the sealed offer, before anything is decrypted.
        guard safeCompare(Data(hash.finalize()), offer.sha256) else {
            try? PrivateFiles.remove(file)
            return .failure(
                .tampered(
                    "the snapshot's SHA-256 is not the one in the sibling's sealed offer: blob-svc, or someone "
                        + "between, changed it; nothing was imported"))
        }
        events(.importing)
        let summary: BackupService.ImportSummary
        do {
            let input = try BackupService.io { () throws(PrivateFilesError) in try PrivateFiles.FileReader(file) }
            summary = try BackupService(store: store).importRawPayload { feed in
                var opener = try BlobCrypto.Opener(key: SymmetricKey(data: offer.key), nonce: offer.nonce)
                while true {
                    let piece = try BackupService.read(input, upTo: 1 << 20)
                    if piece.isEmpty { break }
                    try feed(try opener.update(piece))
                }
                try feed(try opener.finalize())
            }
        } catch let error as BackupServiceError {
            try? PrivateFiles.remove(file)
            return .failure(error)
        }
        try? PrivateFiles.remove(file)
        // The receipt: the blob need not wait out its TTL.
        try? await client.deleteBlob(offer.blobName)
        return .success(summary)
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
