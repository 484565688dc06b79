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
/// ``RelayConnectionHandler``, the socket's ``HTTPServer/WebSocketConsumer``; a few loops serve every connection), a
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
        router.webSocket(PixieAPI.relayConnect, maximumMessageSize: configuration.maximumPayloadBytes + 1024) {
            [self] _, socket in
            RelayConnectionHandler(service: self, socket: socket)
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

    /// Handles one burst of a connection's messages (``RelayConnectionHandler/received(_:)``).
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
                subscription = try bus.subscribe(subject) { [waker] deliver in
                    // A removal ended this subject (identity-svc, on any node): the subscription goes, with its
                    // push targets, and the device is told why.
                    if RelayServerFrame.isEnding(deliver) {
                        connection.remove(subject)?.cancel()
                        waker.forget(subject)
                    }
                    connection.enqueue(.frame(deliver))
                }
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
