import Foundation
import HTTPServer
import PixieWire
import SiblingsCrypto
import Storage
import Synchronization
import WebSockets

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
///
/// **Where the work happens.** Each connection's frames are handled on its WebSocket's event-loop thread (a
/// ``RelaySession``, the socket's ``HTTPServer/WebSocketConsumer``; a few loops serve every connection), a
/// burst at a time: every frame one read
/// brought is decoded, the burst's tokens are spent with one call (verified on every core, recorded in one
/// transaction), the frames are forwarded in order, and each connection written to is written once, at the
/// end of the burst, without waiting for its peer. What a peer's socket does not take at once waits in that
/// connection's bounded queue for a writer of its own, so a slow or vanished peer stalls nobody else; a
/// connection whose queue overflows is closed with 1008.
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
    /// Every open connection, so that a lost bus link can close the subscribed ones.
    let live = Mutex<[ObjectIdentifier: RelayConnection]>([:])
    /// The close reason (code 1013, try again later) when this node lost its link to the other nodes: the
    /// device reconnects, through whatever balancer is in front, and subscribes again (docs/pixie-protocol.md,
    /// "Relay").
    public static let busLostReason =
        "relay_bus_unavailable: this relay node lost its link to the other nodes; reconnect"

    /// Whether this node can serve relay connections now: its bus reaches the other nodes (`/healthz`).
    public var isReady: Bool { bus.isLinked }
    let tokens: any TokenSpender
    let push: any PushGateway
    let logger: Logger
    let metrics: Metrics
    let waker: any PushWaker

    /// `sharedPushState`: the database the push rule's state is kept in when several relay nodes share a bus
    /// (``NATSRelayBus``); nil keeps it in memory, for one node.
    public init(
        configuration: Configuration = Configuration(), bus: any RelayBus = InProcessRelayBus(),
        tokens: any TokenSpender, push: any PushGateway, logger: Logger, metrics: Metrics,
        sharedPushState: (any SQLDatabase)? = nil
    ) throws {
        self.configuration = configuration
        self.bus = bus
        self.tokens = tokens
        self.push = push
        self.logger = logger
        self.metrics = metrics
        self.waker =
            try sharedPushState.map { try SQLPushWaker(database: $0, logger: logger) }
            ?? MemoryPushWaker(limit: configuration.maximumPushRegistrations)

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
        metrics.describe(
            "pixie_relay_bus_link_lost_total", type: "counter",
            help: "Times this node lost its link to the other relay nodes (its subscribers were closed).")
        // A node cut off from the other nodes tells its subscribers at once, instead of leaving them subscribed
        // to frames the other nodes can no longer bring.
        bus.watchLink { [weak self] up in self?.linkChanged(up) }
    }

    /// The bus link went down (`up` false) or came back.
    private func linkChanged(_ up: Bool) {
        guard !up else {
            logger.info("relay bus link is back")
            return
        }
        let cut = live.withLock { Array($0.values) }.filter { $0.count > 0 }
        logger.warning("relay bus link lost: closing the connections that hold subjects", ["connections": cut.count])
        metrics.increment("pixie_relay_bus_link_lost_total")
        for connection in cut { connection.close(.tryAgainLater, Self.busLostReason) }
    }

    /// Adds `GET /v1/relay`.
    public func addRoutes(to router: inout Router) {
        // The header and a maximal token fit in 1 KiB beside the payload.
        router.webSocket("/v1/relay", maximumMessageSize: configuration.maximumPayloadBytes + 1024) {
            [self] _, socket in
            RelaySession(service: self, socket: socket)
        }
    }

    // MARK: One connection

    /// What a connection's writer does next.
    enum Outbound: Sendable {
        case frame(Data)
        case close(WebSocketCloseCode, String)
    }

    /// The connections written to while one burst of frames is handled, on that loop thread: each is
    /// written once, when the burst is done. Outside a burst (a bus delivering on a thread of its own) a
    /// connection is written at once.
    final class Burst: @unchecked Sendable {
        // @unchecked: used by the one thread that bound it (``RelayService/burst``).
        private var touched: [ObjectIdentifier: RelayConnection] = [:]

        func add(_ connection: RelayConnection) { touched[ObjectIdentifier(connection)] = connection }

        /// Writes every connection touched, then forgets them.
        func writeAll() {
            let connections = touched.values
            touched = [:]
            for connection in connections { connection.write() }
        }
    }

    @TaskLocal static var burst: Burst?

    /// The answers to one burst's frames, in order, until the burst is done.
    final class BurstAnswers {
        enum Answer: Sendable {
            case frame(Data)
            /// A SEND handed to the bus: OK once the bus is flushed.
            case sent(UInt32)
        }

        private(set) var items: [Answer] = []
        private(set) var forwarded = 0

        func add(_ frame: Data) { items.append(.frame(frame)) }

        func sent(_ id: UInt32) {
            items.append(.sent(id))
            forwarded += 1
        }
    }

    /// Handles one burst of a connection's messages (``RelaySession/received(_:)``).
    func handle(_ messages: [WebSocketMessage], on connection: RelayConnection) {
        // A connection that is closing (killed, or after a malformed frame) handles nothing more.
        guard !connection.isClosing else { return }
        // Decode up to the first message that breaks the protocol: it closes the connection, and nothing
        // after it is handled (or has its token spent).
        var frames: [RelayClientFrame] = []
        var failure: (RelayServerFrame?, WebSocketCloseCode, String)?
        for message in messages {
            guard case .binary(let bytes) = message else {
                failure = (nil, .unsupportedData, "relay frames are binary messages, not text")
                break
            }
            do {
                frames.append(try RelayClientFrame(decoding: bytes))
            } catch {
                dropped(error.code)
                failure = (
                    RelayServerFrame.error(requestID: error.requestID, code: error.code, reason: error.reason),
                    .protocolError, "malformed relay frame: \(error.code)"
                )
                break
            }
        }
        // Every token of the burst at once; a SEND too large to forward spends none.
        var sends: [Int: Int] = [:]
        var tokens: [Data] = []
        for (index, frame) in frames.enumerated() {
            if case .send(_, _, _, let token, let payload) = frame, payload.count <= configuration.maximumPayloadBytes {
                sends[index] = tokens.count
                tokens.append(token)
            }
        }
        let spent = tokens.isEmpty ? [] : self.tokens.spend(tokens)
        let answers = BurstAnswers()
        for (index, frame) in frames.enumerated() {
            handle(frame, spent: sends[index].map { spent[$0] }, on: connection, answers: answers)
            if connection.isClosing { break }
        }
        // The answers go out in the frames' order; a SEND's OK only once the bus has it (NATS: one round trip for
        // many bursts, on the bus's thread), else its ERROR. A burst that follows one still waiting for its flush
        // waits for a flush too, so a connection's answers never overtake each other.
        let (items, forwarded, ending) = (answers.items, answers.forwarded, failure)
        let answer: @Sendable (Result<Void, RelayBusError>) -> Void = { [self] flushed in
            if forwarded > 0, case .success = flushed {
                metrics.increment("pixie_relay_frames_forwarded_total", by: Double(forwarded))
            }
            for item in items {
                switch (item, flushed) {
                case (.frame(let frame), _): connection.enqueue(.frame(frame))
                case (.sent(let id), .success):
                    connection.enqueue(.frame(RelayServerFrame.ok(requestID: id).encoded()))
                case (.sent(let id), .failure(let error)):
                    connection.enqueue(
                        .frame(
                            unavailable(
                                id,
                                "the relay could not confirm the frame with its other nodes, so it may not have "
                                    + "reached every device; try again", detail: error)))
                }
            }
            if let (frame, code, reason) = ending, !connection.isClosing {
                if let frame { connection.enqueue(.frame(frame.encoded())) }
                connection.close(code, reason)
            }
        }
        if forwarded > 0 || connection.isAwaitingFlush {
            connection.awaitFlush()
            bus.flush { flushed in
                // On the bus's thread: the burst's answers are written together, as on the loop.
                let burst = Burst()
                RelayService.$burst.withValue(burst) { answer(flushed) }
                burst.writeAll()
                connection.flushArrived()
            }
        } else {
            answer(.success(()))
        }
    }

    /// Handles one frame, adding its answer to `answers`; `spent` is its token's outcome when it is a SEND within
    /// the size limit.
    private func handle(
        _ frame: RelayClientFrame, spent: Result<Void, HTTPError>?, on connection: RelayConnection,
        answers: BurstAnswers
    ) {
        switch frame {
        case .ping(let id):
            answers.add(RelayServerFrame.ok(requestID: id).encoded())
        case .subscribe(let id, let subject, let publicKey, let signature, let pushToken):
            // Only the subject's holder may listen and register a push target: a stranger who knows the subject
            // (the discovery inbox is published) neither takes the push target nor ends the wake episode.
            guard
                subject.isProven(
                    publicKey: publicKey, signature: signature, challenge: connection.challenge, pushToken: pushToken)
            else {
                answers.add(
                    refusal(
                        id, .subjectNotProven,
                        "SUBSCRIBE must prove the subject: its public key hashes to it, and its signature covers this "
                            + "connection's CHALLENGE and the push token"))
                return
            }
            if connection.holds(subject) {
                waker.register(subject, pushToken: pushToken)
                answers.add(RelayServerFrame.ok(requestID: id).encoded())
                return
            }
            guard connection.count < configuration.maximumSubjects else {
                answers.add(
                    refusal(
                        id, .tooManySubjects,
                        "this connection already holds \(configuration.maximumSubjects) subjects; unsubscribe one first"
                    ))
                return
            }
            // Frames go straight from the publisher to this connection's bounded queue (no task in between).
            let subscription: RelayBusSubscription
            do {
                subscription = try bus.subscribe(subject) { deliver in connection.enqueue(.frame(deliver)) }
            } catch {
                answers.add(
                    unavailable(
                        id,
                        "the relay cannot reach its other nodes now, so the subject was not subscribed; try again "
                            + "in a moment", detail: error))
                return
            }
            connection.add(subscription)
            // The link may have gone between the bus taking the subscription and the connection holding it, after
            // the sweep that closes subscribers: then this one is refused too, never left subscribed to nothing.
            guard bus.isLinked else {
                connection.remove(subject)?.cancel()
                answers.add(
                    unavailable(
                        id,
                        "the relay cannot reach its other nodes now, so the subject was not subscribed; try again "
                            + "in a moment", detail: "the bus link went down during the SUBSCRIBE"))
                return
            }
            // A connection holds the subject again: its device is awake, so the next Sync may push again.
            waker.register(subject, pushToken: pushToken)
            waker.reconnected(subject)
            answers.add(RelayServerFrame.ok(requestID: id).encoded())
        case .unsubscribe(let id, let subject):
            guard let subscription = connection.remove(subject) else {
                answers.add(refusal(id, .notSubscribed, "this connection does not hold that subject"))
                return
            }
            subscription.cancel()
            answers.add(RelayServerFrame.ok(requestID: id).encoded())
        case .send(let id, let subject, let wake, _, let payload):
            guard let spent else {
                answers.add(
                    refusal(
                        id, .frameTooLarge,
                        "the payload is \(payload.count) bytes; this relay forwards at most \(configuration.maximumPayloadBytes)"
                    ))
                return
            }
            if case .failure(let error) = spent {
                switch error.code {
                case .tokenSpent:
                    answers.add(refusal(id, .tokenSpent, "this token was already spent; the frame was dropped"))
                case .tokenInvalid:
                    answers.add(refusal(id, .tokenInvalid, "the token does not verify; the frame was dropped"))
                default:
                    answers.add(
                        unavailable(
                            id, "the relay cannot check tokens now, so the frame was dropped; try again in a moment",
                            detail: error.reason))
                }
                return
            }
            let delivered: Int
            do {
                delivered = try bus.publish(
                    RelayServerFrame.deliver(subject: subject, wake: wake, payload: payload).encoded(), to: subject)
            } catch {
                answers.add(
                    unavailable(
                        id,
                        "the relay cannot reach its other nodes now, so the frame was not sent; try again in a "
                            + "moment", detail: error))
                return
            }
            if wake == .sync, delivered == 0, !bus.hasSubscribers(subject) { wakeDevice(subject) }
            answers.sent(id)
        }
    }

    /// An ERROR `unavailable` answer: `reason` for the client, which says what happened and nothing of how the
    /// node is set up; `detail` (the bus's or the token store's own error, whose URLs are redacted already) goes to
    /// the operator's log only. No value from configuration reaches a client (docs/operations.md, "What the logs
    /// show").
    private func unavailable(_ id: UInt32, _ reason: String, detail: Any) -> Data {
        logger.warning("relay frame refused: unavailable", ["reason": reason, "error": "\(detail)"])
        return refusal(id, .unavailable, reason)
    }

    /// An ERROR answer, counted.
    private func refusal(_ id: UInt32, _ code: RelayErrorCode, _ reason: String) -> Data {
        dropped(code)
        return RelayServerFrame.error(requestID: id, code: code, reason: reason).encoded()
    }

    private func dropped(_ code: RelayErrorCode) {
        metrics.increment("pixie_relay_frames_dropped_total", labels: ["reason": code.name])
    }

    /// One push per wake episode to each device registered for the subject: sent when it is registered and not
    /// already woken. A device inbox has one; the account's discovery inbox one per sibling that registered.
    private func wakeDevice(_ subject: RelaySubject) {
        switch waker.claim(subject) {
        case .unregistered:
            metrics.increment("pixie_relay_pushes_total", labels: ["outcome": "unregistered"])
        case .deduplicated:
            metrics.increment("pixie_relay_pushes_total", labels: ["outcome": "deduplicated"])
        case .push(let pushTokens):
            for pushToken in pushTokens {
                // Detached: the push is no part of the burst being handled (nor of its task-local `burst`).
                Task.detached { [self] in
                    do {
                        try await push.wake(subject, pushToken: pushToken)
                        metrics.increment("pixie_relay_pushes_total", labels: ["outcome": "sent"])
                    } catch {
                        // The next Sync frame may try again.
                        waker.failed(subject, pushToken: pushToken)
                        metrics.increment("pixie_relay_pushes_total", labels: ["outcome": "failed"])
                        logger.warning("relay push failed", ["subject": subject.redacted, "error": "\(error)"])
                    }
                }
            }
        }
    }
}

/// What ``PushWaker/claim(_:)`` decided.
enum PushClaim: Equatable {
    /// Push each of these, once.
    case push([Data])
    case deduplicated
    case unregistered
}

/// The push rule's state: which push targets each subject has (registered with SUBSCRIBE; a device inbox has one
/// device, the account's discovery inbox one per sibling, at most ``PushWaker/maximumTargetsPerSubject``, the
/// latest kept), and which are in a wake episode (pushed once, not yet subscribed again).
protocol PushWaker: Sendable {
    /// Records `pushToken` as a push target of the subject (an empty token records nothing).
    func register(_ subject: RelaySubject, pushToken: Data)
    /// A connection subscribed `subject`: a device is awake on it, and its wake episode is over for every target.
    func reconnected(_ subject: RelaySubject)
    /// A push to `pushToken` failed: the next Sync frame may try it again.
    func failed(_ subject: RelaySubject, pushToken: Data)
    /// What to push now: every target not woken yet in this episode; later Sync frames are deduplicated.
    func claim(_ subject: RelaySubject) -> PushClaim
}

extension PushWaker {
    /// Push targets one subject keeps: more siblings than one account is likely to have.
    static var maximumTargetsPerSubject: Int { 16 }
}

/// One node's push state, in memory (the embedded default).
final class MemoryPushWaker: PushWaker {
    private struct Target {
        let token: Data
        var woken = false
    }

    private let targets = Mutex<[RelaySubject: [Target]]>([:])
    private let limit: Int

    /// `limit`: subjects with targets held at most.
    init(limit: Int) { self.limit = limit }

    func register(_ subject: RelaySubject, pushToken: Data) {
        guard !pushToken.isEmpty else { return }
        targets.withLock { targets in
            guard targets[subject] != nil || targets.count < limit else { return }
            var list = targets[subject] ?? []
            let woken = list.first { $0.token == pushToken }?.woken ?? false
            list.removeAll { $0.token == pushToken }
            list.append(Target(token: pushToken, woken: woken))
            targets[subject] = Array(list.suffix(Self.maximumTargetsPerSubject))
        }
    }

    func reconnected(_ subject: RelaySubject) {
        targets.withLock { targets in
            guard let list = targets[subject] else { return }
            targets[subject] = list.map { Target(token: $0.token) }
        }
    }

    func failed(_ subject: RelaySubject, pushToken: Data) {
        targets.withLock { targets in
            guard let index = targets[subject]?.firstIndex(where: { $0.token == pushToken }) else { return }
            targets[subject]?[index].woken = false
        }
    }

    func claim(_ subject: RelaySubject) -> PushClaim {
        targets.withLock { targets in
            guard var list = targets[subject], !list.isEmpty else { return .unregistered }
            let due = list.indices.filter { !list[$0].woken }
            guard !due.isEmpty else { return .deduplicated }
            for index in due { list[index].woken = true }
            targets[subject] = list
            return .push(due.map { list[$0].token })
        }
    }
}

/// The push state of every relay node of a deployment, in their shared database (table `relay_push_targets`), so
/// that a sleeping device is pushed once per wake episode, not once per node. A claim is one conditional UPDATE,
/// so two nodes claiming at once push each target once. A database that fails reads as "unregistered": no push,
/// and a warning.
final class SQLPushWaker: PushWaker {
    static let migrations = [
        Migration(
            version: 1,
            sql: """
                CREATE TABLE relay_push (
                    subject BLOB PRIMARY KEY,
                    push_token BLOB NOT NULL,
                    woken INTEGER NOT NULL DEFAULT 0,
                    updated_at INTEGER NOT NULL
                )
                """),
        // Issue 37: the account's discovery inbox wakes every sibling that registered for it, so a subject has
        // several targets, each with its own wake flag.
        Migration(
            version: 2,
            sql: """
                CREATE TABLE relay_push_targets (
                    subject BLOB NOT NULL,
                    push_token BLOB NOT NULL,
                    woken INTEGER NOT NULL DEFAULT 0,
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY (subject, push_token)
                );
                INSERT INTO relay_push_targets (subject, push_token, woken, updated_at)
                    SELECT subject, push_token, woken, updated_at FROM relay_push;
                DROP TABLE relay_push;
                """),
    ]

    private let database: any SQLDatabase
    private let logger: Logger

    init(database: any SQLDatabase, logger: Logger) throws {
        try database.migrate(component: "relay", migrations: Self.migrations)
        self.database = database
        self.logger = logger
    }

    private func run<T>(_ what: String, _ fallback: T, _ body: () throws -> T) -> T {
        do {
            return try body()
        } catch {
            logger.warning("relay push state unavailable", ["operation": what, "error": "\(error)"])
            return fallback
        }
    }

    func register(_ subject: RelaySubject, pushToken: Data) {
        guard !pushToken.isEmpty else { return }
        let key = SQLValue.blob(subject.rawRepresentation)
        run("register", ()) {
            try database.transaction { transaction in
                try transaction.execute(
                    "INSERT INTO relay_push_targets (subject, push_token, woken, updated_at) VALUES (?, ?, 0, ?) "
                        + "ON CONFLICT (subject, push_token) DO UPDATE SET updated_at = excluded.updated_at",
                    [key, .blob(pushToken), .integer(Int64(Date().timeIntervalSince1970))])
                // The latest targets are kept; a ghost of a device long gone makes room.
                try transaction.execute(
                    "DELETE FROM relay_push_targets WHERE subject = ? AND push_token NOT IN (SELECT push_token FROM "
                        + "relay_push_targets WHERE subject = ? ORDER BY updated_at DESC, push_token LIMIT ?)",
                    [key, key, .integer(Int64(Self.maximumTargetsPerSubject))])
            }
        }
    }

    func reconnected(_ subject: RelaySubject) {
        run("reconnected", ()) {
            try database.execute(
                "UPDATE relay_push_targets SET woken = 0 WHERE subject = ? AND woken = 1",
                [.blob(subject.rawRepresentation)])
        }
    }

    func failed(_ subject: RelaySubject, pushToken: Data) {
        run("failed", ()) {
            try database.execute(
                "UPDATE relay_push_targets SET woken = 0 WHERE subject = ? AND push_token = ?",
                [.blob(subject.rawRepresentation), .blob(pushToken)])
        }
    }

    func claim(_ subject: RelaySubject) -> PushClaim {
        run("claim", .unregistered) {
            let claimed = try database.query(
                "UPDATE relay_push_targets SET woken = 1 WHERE subject = ? AND woken = 0 RETURNING push_token",
                [.blob(subject.rawRepresentation)])
            if !claimed.isEmpty { return .push(try claimed.map { try $0.data("push_token") }) }
            let known = try database.queryOne(
                "SELECT woken FROM relay_push_targets WHERE subject = ? LIMIT 1", [.blob(subject.rawRepresentation)])
            return known == nil ? .unregistered : .deduplicated
        }
    }
}

/// One relay connection: the ``HTTPServer/WebSocketConsumer`` of its socket, on its event-loop thread.
final class RelaySession: WebSocketConsumer {
    let service: RelayService
    let connection: RelayConnection

    init(service: RelayService, socket: WebSocket) {
        self.service = service
        let (metrics, logger, configuration) = (service.metrics, service.logger, service.configuration)
        connection = RelayConnection(socket: socket, configuration: configuration) { reason in
            metrics.increment("pixie_relay_slow_consumers_total")
            logger.warning(
                "relay closed a slow consumer", ["queued_limit": configuration.maximumQueuedFrames, "reason": reason])
        }
        metrics.increment("pixie_relay_connections")
        service.live.withLock { $0[ObjectIdentifier(connection)] = connection }
        logger.debug("relay connection opened")
        // The first frame: the nonce each SUBSCRIBE signs.
        connection.enqueue(.frame(RelayServerFrame.challenge(nonce: connection.challenge).encoded()))
    }

    func received(_ messages: [WebSocketMessage]) {
        let burst = RelayService.Burst()
        RelayService.$burst.withValue(burst) { service.handle(messages, on: connection) }
        burst.writeAll()
    }

    func ended(_ error: WebSocketError?) {
        // The peer left, vanished (mid-frame or not) or broke the WebSocket framing: only this connection ends.
        for subscription in connection.removeAll() { subscription.cancel() }
        connection.finish()
        _ = service.live.withLock { $0.removeValue(forKey: ObjectIdentifier(connection)) }
        service.metrics.increment("pixie_relay_connections", by: -1)
        service.logger.debug(
            "relay connection closed",
            [
                "close_code": connection.socket.closeCode.map { "\($0)" } ?? "none",
                "error": error.map { "\($0)" } ?? "none",
            ])
    }
}

/// One connection's subscriptions and its bounded queue of outgoing frames.
///
/// Frames are written by whoever queued them, once per burst (``write()``), with
/// ``HTTPServer/WebSocket/trySend(binaries:)``, which never waits for the peer. When the peer's socket does
/// not take everything, or a close is due, the connection's writer queue takes over and writes in order, blocking
/// as long as it must; frames queued meanwhile wait for it, at most ``RelayService/Configuration/maximumQueuedFrames``.
/// Only one of the two writes at a time.
final class RelayConnection: Sendable {
    private enum Writer {
        /// Nobody is writing: the next ``RelayConnection/write()`` does.
        case idle
        /// A thread is writing with `trySend` (the one that queued the frames).
        case direct
        /// The writer queue is writing (the peer did not take everything, or a close is due).
        case queue
    }

    private struct State {
        var subscriptions: [RelaySubject: RelayBusSubscription] = [:]
        /// Frames waiting to be written, oldest first.
        var queued: [RelayService.Outbound] = []
        var writer = Writer.idle
        /// No more frames are taken (the connection ended, closed or was killed).
        var finished = false
        /// Bursts whose answers wait for the bus's flush (``RelayBus/flush(then:)``).
        var awaitingFlush = 0
    }

    let socket: WebSocket
    /// Frames allowed to wait; two more places so an ERROR and the close after it always fit.
    private let capacity: Int
    private let state = Mutex(State())
    private let onKill: @Sendable (String) -> Void
    /// Where writes that may block run (a thread only while it has work).
    private let writerQueue = DispatchQueue(label: "relay-writer")

    /// The nonce of this connection's CHALLENGE, which every SUBSCRIBE on it signs.
    let challenge = SecureRandom.bytes(count: RelayServerFrame.challengeByteCount)

    init(socket: WebSocket, configuration: RelayService.Configuration, onKill: @escaping @Sendable (String) -> Void) {
        self.socket = socket
        self.onKill = onKill
        capacity = configuration.maximumQueuedFrames
    }

    /// Whether a close is queued or done: killed, closed after a malformed frame, or ended.
    var isClosing: Bool { state.withLock { $0.finished } }

    /// Whether a burst's answers still wait for the bus's flush: the next burst's must wait behind them.
    var isAwaitingFlush: Bool { state.withLock { $0.awaitingFlush > 0 } }
    /// A burst's answers now wait for the bus's flush.
    func awaitFlush() { state.withLock { $0.awaitingFlush += 1 } }
    /// A burst's answers were queued after its flush.
    func flushArrived() { state.withLock { $0.awaitingFlush -= 1 } }
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

    /// Queues a frame, written at the end of the current burst (at once outside one, or once half the
    /// queue's places are taken, so a long burst never counts against the peer); a full queue makes this a
    /// slow consumer.
    func enqueue(_ item: RelayService.Outbound) {
        let queued = state.withLock { state -> Int? in
            guard !state.finished else { return 0 }
            guard state.queued.count < capacity + 2 else { return nil }
            state.queued.append(item)
            return state.queued.count
        }
        guard let queued else { return kill("slow consumer: more than \(capacity) frames waiting") }
        if let burst = RelayService.burst, queued < max(1, capacity / 2) {
            burst.add(self)
        } else if queued > 0 {
            write()
        }
    }

    /// Queues a close after what is queued; nothing is queued after it.
    func close(_ code: WebSocketCloseCode, _ reason: String) {
        let queued = state.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.queued.append(.close(code, reason))
            state.finished = true
            return true
        }
        if queued { write() }
    }

    /// Writes what is queued without waiting for the peer, unless a writer is at work already; what the peer
    /// does not take at once, and any close, is left to the writer queue.
    func write() {
        guard var batch = take(as: .direct) else { return }
        // Frames that others queue meanwhile are written too, for a few rounds: then the writer queue takes
        // over, so a busy subscriber cannot keep a publisher's loop thread from its other connections.
        for round in 0... {
            let frames = batch.prefix { if case .frame = $0 { true } else { false } }
            let written: Bool
            do {
                written = try socket.trySend(
                    binaries: frames.map { if case .frame(let bytes) = $0 { bytes } else { Data() } })
            } catch {
                // The connection dropped: its reader ends it.
                return state.withLock { $0.writer = .idle }
            }
            let rest = batch.dropFirst(frames.count)
            guard written, rest.isEmpty, round < 4 else {
                state.withLock { state in
                    state.queued.insert(contentsOf: rest, at: 0)
                    state.writer = .queue
                }
                writerQueue.async { self.drain() }
                return
            }
            guard let next = take(as: .direct, continuing: true) else { return }
            batch = next
        }
    }

    /// On the writer queue: writes in order, blocking as long as the peer needs, until nothing is queued.
    private func drain() {
        do {
            while true {
                try socket.flush()
                guard let batch = take(as: .queue, continuing: true) else { return }
                var frames: [Data] = []
                for item in batch {
                    switch item {
                    case .frame(let bytes):
                        frames.append(bytes)
                    case .close(let code, let reason):
                        if !(try socket.trySend(binaries: frames)) { try socket.flush() }
                        socket.startClosing(code: code, reason: reason)
                        return state.withLock { state in
                            state.finished = true
                            state.queued = []
                        }
                    }
                }
                _ = try socket.trySend(binaries: frames)
            }
        } catch {
            // The connection dropped: its reader ends it.
            state.withLock { state in
                state.finished = true
                state.queued = []
            }
        }
    }

    /// The queued items for a writer of kind `writer` to write, claiming the connection for it; nil when another
    /// writer is at work, or (`continuing`, the writer already at work) when nothing is queued, which leaves the
    /// connection idle.
    private func take(as writer: Writer, continuing: Bool = false) -> [RelayService.Outbound]? {
        state.withLock { state in
            guard continuing || state.writer == .idle else { return nil }
            guard !state.queued.isEmpty else {
                if continuing { state.writer = .idle }
                return nil
            }
            state.writer = writer
            defer { state.queued = [] }
            return state.queued
        }
    }

    /// Closes the connection with 1008 (the first time only): what was queued is dropped.
    func kill(_ reason: String) {
        // The close waits for the writer at work, if any; else the writer queue writes it.
        let (first, startWriter) = state.withLock { state -> (Bool, Bool) in
            guard !state.finished else { return (false, false) }
            state.queued = [.close(.policyViolation, reason)]
            state.finished = true
            guard state.writer == .idle else { return (true, false) }
            state.writer = .queue
            return (true, true)
        }
        guard first else { return }
        onKill(reason)
        // A writer waiting for a peer that reads nothing would hold the close back for good.
        socket.shutDown(after: .seconds(5))
        if startWriter { writerQueue.async { self.drain() } }
    }

    /// No more frames: what is queued is dropped (the socket is gone).
    func finish() {
        state.withLock { state in
            state.finished = true
            state.queued = []
        }
    }
}
