import Dispatch
import Foundation
import HTTPServer
import PixieWire
import SiblingsCrypto
import Synchronization
import WebSockets

/// One relay connection: the ``HTTPServer/WebSocketConsumer`` of its socket, on its event-loop thread.
final class RelayConnectionHandler: WebSocketConsumer {
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
