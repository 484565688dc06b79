import Foundation
import HTTPServer
import PixieWire
import Synchronization

/// relay-svc: devices connect over WebSocket at `GET /v1/relay`, subscribe 32-byte subjects and send frames
/// to subjects; the relay forwards each frame to the connections holding its subject and keeps nothing
/// (000_e422bd9a7c930342.txt: "The relay is pure-ephemeral (it forwards frames and stores nothing, with no
/// mailbox)"). Frames are defined in ``PixieWire/RelayClientFrame`` and docs/pixie-protocol.md, "Relay".
///
/// - Every SEND carries a rate-limit token, spent through ``TokenSpender`` before anything is forwarded; a
///   token that does not verify or was spent drops the frame with an ERROR to the sender.
/// - A ``WakeClass/sync`` frame to a subject no connection holds wakes its registered device with one push
///   through ``PushGateway``; further Sync frames for it are deduplicated until a connection subscribes the
///   subject again. Silent frames never push. A device registers its push token with SUBSCRIBE.
/// - Fan-out goes through ``RelayBus``, which hands each frame to the subscribing connections' queues.
///   Each connection's frames wait in a bounded queue and are written by a
///   thread of the connection's own, so a slow or vanished peer stalls nobody else; a connection whose queue
///   overflows is closed with 1008.
public final class RelayService: Sendable {
    /// Limits per connection.
    public struct Configuration: Sendable, Equatable {
        /// Subjects one connection may hold at once.
        public var maximumSubjects = 16
        /// The longest SEND payload forwarded, in bytes (the WebSocket message may be 1 KiB longer, for the
        /// header and token).
        public var maximumPayloadBytes = 64 << 10
        /// Frames waiting to be written to one connection before it counts as a slow consumer and is closed.
        public var maximumQueuedFrames = 256
        /// Push registrations held at most (one per subject, in memory).
        public var maximumPushRegistrations = 1_000_000

        public init() {}
    }

    let configuration: Configuration
    let bus: any RelayBus
    let tokens: any TokenSpender
    let push: any PushGateway
    let logger: Logger
    let metrics: Metrics
    let waker: PushWaker

    public init(
        configuration: Configuration = Configuration(), bus: any RelayBus = InProcessRelayBus(),
        tokens: any TokenSpender, push: any PushGateway, logger: Logger, metrics: Metrics
    ) {
        self.configuration = configuration
        self.bus = bus
        self.tokens = tokens
        self.push = push
        self.logger = logger
        self.metrics = metrics
        self.waker = PushWaker(limit: configuration.maximumPushRegistrations)
        metrics.describe("pixie_relay_connections", type: "gauge", help: "Open relay WebSocket connections.")
        metrics.describe(
            "pixie_relay_frames_forwarded_total", type: "counter",
            help: "SEND frames whose token was spent and that were handed to the bus.")
        metrics.describe(
            "pixie_relay_frames_dropped_total", type: "counter", help: "Client frames refused, by reason.")
        metrics.describe(
            "pixie_relay_pushes_total", type: "counter",
            help: "Sync wakes for subjects no connection holds, by outcome (sent, deduplicated, failed, unregistered).")
        metrics.describe(
            "pixie_relay_slow_consumers_total", type: "counter",
            help: "Connections closed because their queue of frames overflowed.")
    }

    /// Adds `GET /v1/relay`.
    public func addRoutes(to router: inout Router) {
        // The header and a maximal token fit in 1 KiB beside the payload.
        router.webSocket("/v1/relay", maximumMessageSize: configuration.maximumPayloadBytes + 1024) {
            [self] _, socket in
            await serve(socket)
        }
    }

    // MARK: One connection

    /// What a connection's writer does next.
    enum Outbound: Sendable {
        case frame(Data)
        case close(WebSocketCloseCode, String)
    }

    /// Runs one connection until the peer leaves or breaks the protocol.
    func serve(_ socket: WebSocket) async {
        metrics.increment("pixie_relay_connections")
        logger.debug("relay connection opened")
        defer {
            metrics.increment("pixie_relay_connections", by: -1)
            logger.debug("relay connection closed", ["close_code": socket.closeCode.map { "\($0)" } ?? "none"])
        }
        let connection = RelayConnection(configuration: configuration) { [metrics, logger, configuration] reason in
            metrics.increment("pixie_relay_slow_consumers_total")
            logger.warning(
                "relay closed a slow consumer", ["queued_limit": configuration.maximumQueuedFrames, "reason": reason])
        }
        let executor = ThreadExecutor(name: "relay-writer")
        let writer = Task(executorPreference: executor) { [logger] in
            // Each wake-up takes every frame queued meanwhile and writes them with one send (a burst of
            // deliveries or OKs costs one system call, not one each); a close ends the batch and the connection.
            while true {
                let batch = await connection.next()
                if let reason = connection.killedReason {
                    await socket.close(code: .policyViolation, reason: reason)
                    return
                }
                guard !batch.isEmpty else { return }
                var frames: [Data] = []
                var closing: (WebSocketCloseCode, String)?
                for item in batch {
                    switch item {
                    case .frame(let bytes): frames.append(bytes)
                    case .close(let code, let reason): closing = (code, reason)
                    }
                    if closing != nil { break }
                }
                do {
                    try await socket.send(binaries: frames)
                } catch {
                    logger.debug("relay connection dropped while sending", ["error": "\(error)"])
                    return
                }
                if let (code, reason) = closing {
                    await socket.close(code: code, reason: reason)
                    return
                }
            }
        }
        do {
            loop: for try await message in socket {
                guard case .binary(let bytes) = message else {
                    connection.enqueue(.close(.unsupportedData, "relay frames are binary messages, not text"))
                    break loop
                }
                let frame: RelayClientFrame
                do {
                    frame = try RelayClientFrame(decoding: bytes)
                } catch {
                    dropped(error.code)
                    connection.enqueue(
                        .frame(
                            RelayServerFrame.error(requestID: error.requestID, code: error.code, reason: error.reason)
                                .encoded()))
                    connection.enqueue(.close(.protocolError, "malformed relay frame: \(error.code)"))
                    break loop
                }
                await handle(frame, on: connection)
                if connection.killedReason != nil { break loop }
            }
        } catch {
            // The peer vanished (mid-frame or not) or broke the WebSocket framing: only this connection ends.
            logger.debug("relay connection ended", ["error": "\(error)"])
        }
        for subscription in connection.removeAll() { subscription.cancel() }
        connection.finish()
        await writer.value
        executor.stop()
    }

    private func handle(_ frame: RelayClientFrame, on connection: RelayConnection) async {
        switch frame {
        case .ping(let id):
            connection.enqueue(.frame(RelayServerFrame.ok(requestID: id).encoded()))
        case .subscribe(let id, let subject, let pushToken):
            if connection.holds(subject) {
                waker.register(subject, pushToken: pushToken)
                connection.enqueue(.frame(RelayServerFrame.ok(requestID: id).encoded()))
                return
            }
            guard connection.count < configuration.maximumSubjects else {
                refuse(
                    id, .tooManySubjects,
                    "this connection already holds \(configuration.maximumSubjects) subjects; unsubscribe one first",
                    on: connection)
                return
            }
            // Frames go straight from the publisher to this connection's bounded queue (no task in between).
            let subscription = await bus.subscribe(subject) { deliver in connection.enqueue(.frame(deliver)) }
            connection.add(subscription)
            // A connection holds the subject again: its device is awake, so the next Sync may push again.
            waker.register(subject, pushToken: pushToken)
            waker.reconnected(subject)
            connection.enqueue(.frame(RelayServerFrame.ok(requestID: id).encoded()))
        case .unsubscribe(let id, let subject):
            guard let subscription = connection.remove(subject) else {
                refuse(id, .notSubscribed, "this connection does not hold that subject", on: connection)
                return
            }
            subscription.cancel()
            connection.enqueue(.frame(RelayServerFrame.ok(requestID: id).encoded()))
        case .send(let id, let subject, let wake, let token, let payload):
            guard payload.count <= configuration.maximumPayloadBytes else {
                refuse(
                    id, .frameTooLarge,
                    "the payload is \(payload.count) bytes; this relay forwards at most \(configuration.maximumPayloadBytes)",
                    on: connection)
                return
            }
            do {
                try await tokens.spend(token)
            } catch {
                switch error.code {
                case .tokenSpent:
                    refuse(id, .tokenSpent, "this token was already spent; the frame was dropped", on: connection)
                case .tokenInvalid:
                    refuse(id, .tokenInvalid, "the token does not verify; the frame was dropped", on: connection)
                default:
                    refuse(id, .unavailable, "tokens cannot be checked: \(error.reason)", on: connection)
                }
                return
            }
            let delivered = await bus.publish(
                RelayServerFrame.deliver(subject: subject, wake: wake, payload: payload).encoded(), to: subject)
            metrics.increment("pixie_relay_frames_forwarded_total")
            if wake == .sync, delivered == 0, !(await bus.hasSubscribers(subject)) { wakeDevice(subject) }
            connection.enqueue(.frame(RelayServerFrame.ok(requestID: id).encoded()))
        }
    }

    private func refuse(_ id: UInt32, _ code: RelayErrorCode, _ reason: String, on connection: RelayConnection) {
        dropped(code)
        connection.enqueue(.frame(RelayServerFrame.error(requestID: id, code: code, reason: reason).encoded()))
    }

    private func dropped(_ code: RelayErrorCode) {
        metrics.increment("pixie_relay_frames_dropped_total", labels: ["reason": code.name])
    }

    /// One push per wake episode: sent when the subject is registered and not already woken.
    private func wakeDevice(_ subject: RelaySubject) {
        switch waker.claim(subject) {
        case .unregistered:
            metrics.increment("pixie_relay_pushes_total", labels: ["outcome": "unregistered"])
        case .deduplicated:
            metrics.increment("pixie_relay_pushes_total", labels: ["outcome": "deduplicated"])
        case .push(let pushToken):
            Task { [self] in
                do {
                    try await push.wake(subject, pushToken: pushToken)
                    metrics.increment("pixie_relay_pushes_total", labels: ["outcome": "sent"])
                } catch {
                    // The next Sync frame may try again.
                    waker.reconnected(subject)
                    metrics.increment("pixie_relay_pushes_total", labels: ["outcome": "failed"])
                    logger.warning("relay push failed", ["subject": subject.redacted, "error": "\(error)"])
                }
            }
        }
    }
}

/// The push rule's state: which subjects have a push target (registered with SUBSCRIBE, in memory only) and
/// which are in a wake episode (pushed once, not yet subscribed again).
final class PushWaker: Sendable {
    enum Claim: Equatable {
        case push(Data)
        case deduplicated
        case unregistered
    }

    private struct State {
        var targets: [RelaySubject: Data] = [:]
        var woken: Set<RelaySubject> = []
    }

    private let state = Mutex(State())
    private let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Records `pushToken` as the subject's push target (an empty token leaves the target as it was).
    func register(_ subject: RelaySubject, pushToken: Data) {
        guard !pushToken.isEmpty else { return }
        state.withLock { state in
            if state.targets[subject] != nil || state.targets.count < limit { state.targets[subject] = pushToken }
        }
    }

    /// A connection subscribed `subject`: its wake episode is over.
    func reconnected(_ subject: RelaySubject) { _ = state.withLock { $0.woken.remove(subject) } }

    /// Whether to push now: the first Sync of an episode pushes, later ones are deduplicated.
    func claim(_ subject: RelaySubject) -> Claim {
        state.withLock { state in
            guard let target = state.targets[subject] else { return .unregistered }
            guard state.woken.insert(subject).inserted else { return .deduplicated }
            return .push(target)
        }
    }
}

/// One connection's subscriptions and its bounded queue of outgoing frames.
final class RelayConnection: Sendable {
    private struct State {
        var subscriptions: [RelaySubject: RelayBusSubscription] = [:]
        var killedReason: String?
        /// Frames waiting for the writer, oldest first.
        var queued: [RelayService.Outbound] = []
        /// The writer, when it waits for the next frame.
        var waiter: CheckedContinuation<[RelayService.Outbound], Never>?
        var finished = false
    }

    /// Frames allowed to wait; two more places so an ERROR and the close after it always fit.
    private let capacity: Int
    private let state = Mutex(State())
    private let onKill: @Sendable (String) -> Void

    init(configuration: RelayService.Configuration, onKill: @escaping @Sendable (String) -> Void) {
        self.onKill = onKill
        capacity = configuration.maximumQueuedFrames
    }

    var killedReason: String? { state.withLock { $0.killedReason } }
    var count: Int { state.withLock { $0.subscriptions.count } }

    func holds(_ subject: RelaySubject) -> Bool { state.withLock { $0.subscriptions[subject] != nil } }

    func add(_ subscription: RelayBusSubscription) {
        state.withLock { $0.subscriptions[subscription.subject] = subscription }
    }

    func remove(_ subject: RelaySubject) -> RelayBusSubscription? {
        state.withLock { $0.subscriptions.removeValue(forKey: subject) }
    }

    func removeAll() -> [RelayBusSubscription] {
        state.withLock { state in
            defer { state.subscriptions = [:] }
            return Array(state.subscriptions.values)
        }
    }

    /// Queues an item for the writer; a full queue makes this a slow consumer.
    func enqueue(_ item: RelayService.Outbound) {
        enum Outcome { case queued, overflow, gone }
        let (outcome, waiter, batch) = state.withLock {
            state -> (Outcome, CheckedContinuation<[RelayService.Outbound], Never>?, [RelayService.Outbound]) in
            guard !state.finished else { return (.gone, nil, []) }
            guard state.queued.count < capacity + 2 else { return (.overflow, nil, []) }
            state.queued.append(item)
            guard let waiter = state.waiter else { return (.queued, nil, []) }
            state.waiter = nil
            defer { state.queued = [] }
            return (.queued, waiter, state.queued)
        }
        waiter?.resume(returning: batch)
        if outcome == .overflow { kill("slow consumer: more than \(capacity) frames waiting") }
    }

    /// Every frame queued since the last call, waiting for one if there is none; empty once finished.
    func next() async -> [RelayService.Outbound] {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [RelayService.Outbound]? in
                if !state.queued.isEmpty {
                    defer { state.queued = [] }
                    return state.queued
                }
                if state.finished { return [] }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Marks the connection for closing with 1008 (the first time only).
    func kill(_ reason: String) {
        let first = state.withLock { state -> Bool in
            guard state.killedReason == nil else { return false }
            state.killedReason = reason
            return true
        }
        if first {
            finish()
            onKill(reason)
        }
    }

    /// No more frames: the writer takes what is queued, then stops.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<[RelayService.Outbound], Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: [])
    }
}
