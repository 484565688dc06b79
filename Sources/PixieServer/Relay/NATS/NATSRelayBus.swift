import Foundation
import PixieWire
import SiblingsCrypto
import Synchronization

/// The relay's fan-out across nodes, over NATS (docs/operations.md, "Several nodes"): a device on one relay node
/// reaches a device on another.
///
/// - A frame for `subject` is delivered to this node's own subscribers at once (an ``InProcessRelayBus`` holds
///   them), and published on the NATS subject `pixie.relay.f.<hex subject>` for the other nodes; a node's NATS
///   connection does not hear its own publishes (no-echo), so nothing is delivered twice.
/// - A node subscribes a subject's NATS subjects while at least one of its connections holds it: the frames'
///   and `pixie.relay.p.<hex subject>`, which answers presence requests. A SUBSCRIBE is answered once the NATS
///   server has both (a flush), so from its OK on, frames from every node reach it. ``hasSubscribers(_:)`` asks there when
///   no local connection holds the subject; NATS answers "no responders" at once when no node does.
/// - Nothing waits in a buffer while NATS is away: a publish or a subscription then throws, and so does
///   ``flush(then:)``, which the relay calls before it answers a burst's SENDs. The relay answers ERROR
///   (unavailable) instead of OK: it never answers OK for a frame that did not reach NATS.
/// - Flushes are grouped: a thread of the bus's own runs one round trip to the NATS server for every burst that
///   asked since the last one, so the relay's event loops never wait for NATS (docs/benchmarks.md, "Past one
///   machine").
public final class NATSRelayBus: RelayBus {
    private let connection: NATSConnection
    private let local = InProcessRelayBus()
    /// This node's NATS subscriptions of each subject its connections hold, and how many hold it.
    private let remote = Mutex<[RelaySubject: Remote]>([:])
    /// How long a flush may take.
    private let timeout: Duration
    /// How long a presence request may wait for an answer. NATS answers "no responders" at once when no node
    /// subscribes; this bounds only a node that unsubscribed a moment ago and answers no more (it counts as
    /// absent), since the relay's event-loop thread waits meanwhile.
    private let presenceTimeout: Duration = .milliseconds(250)
    private let flusher: GroupFlusher

    private struct Remote {
        var holders: Int
        let frames: NATSSubscription
        let presence: NATSSubscription
    }

    /// Who hears the link go down and come back (``watchLink(_:)``).
    private let linkHandlers: LinkHandlers

    /// Connects to NATS at `url` (`nats://host:4222`).
    public init(url: String, timeout: Duration = .seconds(2)) throws(NATSError) {
        let handlers = LinkHandlers()
        linkHandlers = handlers
        let connection = try NATSConnection(url: url) { up in handlers.call(up) }
        self.connection = connection
        self.timeout = timeout
        flusher = GroupFlusher { reconnectsBefore in
            Result { () throws(RelayBusError) in
                do {
                    try connection.flush(timeout: timeout, reconnectsBefore: reconnectsBefore)
                } catch {
                    throw RelayBusError("NATS did not confirm the frames: \(error)")
                }
            }
        }
    }

    deinit { flusher.stop() }

    public var isLinked: Bool { connection.isConnected }

    public func watchLink(_ handler: @escaping @Sendable (Bool) -> Void) { linkHandlers.add(handler) }

    static func frameSubject(_ subject: RelaySubject) -> String {
        "pixie.relay.f." + subject.rawRepresentation.hexString
    }
    static func presenceSubject(_ subject: RelaySubject) -> String {
        "pixie.relay.p." + subject.rawRepresentation.hexString
    }

    private func unavailable(_ what: String) -> RelayBusError {
        RelayBusError("NATS at \(connection.url) is not connected, so \(what); try again in a moment")
    }

    @discardableResult
    public func publish(_ frame: Data, to subject: RelaySubject) throws(RelayBusError) -> Int {
        guard connection.isConnected else { throw unavailable("the frame was not sent to the other relay nodes") }
        do {
            try connection.publish(frame, to: Self.frameSubject(subject))
        } catch {
            throw RelayBusError("the frame did not reach NATS: \(error)")
        }
        return local.publish(frame, to: subject)
    }

    public func flush(then done: @escaping @Sendable (Result<Void, RelayBusError>) -> Void) {
        // Taken after the burst's publishes: a reconnect from here on may have lost them.
        guard let reconnects = connection.reconnects else {
            return done(.failure(RelayBusError("libnats could not say whether it reconnected; try again")))
        }
        flusher.enqueue(reconnectsBefore: reconnects, done)
    }

    public func subscribe(
        _ subject: RelaySubject, deliver: @escaping @Sendable (Data) -> Void
    ) throws(RelayBusError) -> RelayBusSubscription {
        let result = remote.withLock { remote -> Result<Void, RelayBusError> in
            // Not even a subject this node holds already: while the link is down, nothing it holds is heard.
            guard connection.isConnected else { return .failure(unavailable("the subject cannot be held")) }
            if remote[subject] != nil {
                remote[subject]!.holders += 1
                return .success(())
            }
            do {
                let reconnects = connection.reconnects
                let frames = try connection.subscribe(Self.frameSubject(subject)) { [local] frame in
                    local.publish(frame, to: subject)
                }
                let presence = try connection.subscribe(Self.presenceSubject(subject), answer: Data([1])) { _ in }
                // Once the server has both, a frame any node publishes reaches this one: only then is it OK.
                do {
                    try connection.flush(timeout: timeout, reconnectsBefore: reconnects ?? .max)
                } catch {
                    frames.cancel()
                    presence.cancel()
                    throw error
                }
                remote[subject] = Remote(holders: 1, frames: frames, presence: presence)
                return .success(())
            } catch {
                return .failure(RelayBusError("NATS refused the subscription: \(error)"))
            }
        }
        try result.get()
        let inner = local.subscribe(subject, deliver: deliver)
        let released = Atomic(false)
        return RelayBusSubscription(subject: subject) { [weak self] in
            guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
            inner.cancel()
            self?.release(subject)
        }
    }

    private func release(_ subject: RelaySubject) {
        let ended = remote.withLock { remote -> Remote? in
            guard var held = remote[subject] else { return nil }
            held.holders -= 1
            guard held.holders == 0 else {
                remote[subject] = held
                return nil
            }
            remote[subject] = nil
            return held
        }
        ended?.frames.cancel()
        ended?.presence.cancel()
    }

    public var spansNodes: Bool { true }

    public func hasSubscribers(_ subject: RelaySubject) -> Bool {
        local.hasSubscribers(subject)
            || connection.hasResponders(Self.presenceSubject(subject), timeout: presenceTimeout)
    }
}

/// Group flush: the callers that asked since the last flush are answered by one flush, run on a thread of its own.
/// While one flush runs, the next callers gather for the one after it, so under load a round trip answers many
/// bursts and no caller's thread waits. Each caller says how many reconnects the connection had made when it
/// asked; the flush is given the earliest, and fails if the connection reconnected since.
final class GroupFlusher: Sendable {
    typealias Done = @Sendable (Result<Void, RelayBusError>) -> Void

    private struct State {
        var waiting: [Done] = []
        var reconnectsBefore: UInt64 = .max
        var stopped = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    /// Starts the flusher's thread; `flush` is one round trip, given the batch's earliest reconnect count, and
    /// its result is handed to every caller it answers.
    init(flush: @escaping @Sendable (_ reconnectsBefore: UInt64) -> Result<Void, RelayBusError>) {
        // The thread holds the flusher until stop() ends it.
        let thread = Thread { [self] in
            while true {
                wake.wait()
                let (batch, reconnectsBefore, stopped) = state.withLock { state in
                    defer {
                        state.waiting = []
                        state.reconnectsBefore = .max
                    }
                    return (state.waiting, state.reconnectsBefore, state.stopped)
                }
                if !batch.isEmpty {
                    let result = flush(reconnectsBefore)
                    for done in batch { done(result) }
                }
                if stopped { return }
            }
        }
        thread.name = "relay-nats-flush"
        thread.start()
    }

    /// Adds `done` to the next flush.
    func enqueue(reconnectsBefore: UInt64, _ done: @escaping Done) {
        // Only the first caller of a group wakes the thread: it takes everyone who came meanwhile.
        let first = state.withLock { state in
            state.waiting.append(done)
            state.reconnectsBefore = Swift.min(state.reconnectsBefore, reconnectsBefore)
            return state.waiting.count == 1
        }
        if first { wake.signal() }
    }

    /// Ends the thread once it has answered everyone waiting.
    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }
}

/// The handlers of ``NATSRelayBus/watchLink(_:)``.
final class LinkHandlers: Sendable {
    private let handlers = Mutex<[@Sendable (Bool) -> Void]>([])

    func add(_ handler: @escaping @Sendable (Bool) -> Void) { handlers.withLock { $0.append(handler) } }

    func call(_ up: Bool) {
        for handler in handlers.withLock({ $0 }) { handler(up) }
    }
}
