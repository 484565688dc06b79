import Foundation
import PixieWire
import Synchronization

/// The relay's fan-out: frames published to a subject reach every current subscription of it, and nothing is
/// kept for later (000_e422bd9a7c930342.txt: "pure-ephemeral ... forwards frames and stores nothing").
///
/// ``InProcessRelayBus`` serves one process; ``NATSRelayBus`` carries frames between the relay nodes of a
/// deployment (docs/operations.md, "Several nodes").
///
/// Synchronous: the relay calls it on a connection's event-loop thread, for every frame of a burst, with no task
/// in between; an implementation may block briefly (a network bus's publish) but never on a consumer, since
/// every other connection on that loop waits meanwhile.
public protocol RelayBus: Sendable {
    /// Hands `frame` (an encoded DELIVER) to every subscription of `subject`; returns how many on this node took
    /// it. Throws ``RelayBusError`` when the bus cannot carry it to the other nodes (the relay then answers ERROR).
    @discardableResult
    func publish(_ frame: Data, to subject: RelaySubject) throws(RelayBusError) -> Int

    /// Calls `done` once everything published so far has reached the bus, or with ``RelayBusError`` if the bus
    /// cannot say so. The relay calls it at the end of a burst and answers the burst's SENDs in `done`. A bus with
    /// nothing to flush calls `done` at once, on the caller's thread; a network bus calls it on a thread of its own,
    /// so the event loop never waits for the round trip, and one flush answers every caller since the last.
    func flush(then done: @escaping @Sendable (Result<Void, RelayBusError>) -> Void)

    /// A new subscription of `subject`: each frame published to it is passed to `deliver` on the publisher's
    /// thread (or a bus's own), which must not block (the relay's connections only queue it for their writer,
    /// whose bounded queue is what cuts a slow consumer).
    func subscribe(
        _ subject: RelaySubject, deliver: @escaping @Sendable (Data) -> Void
    ) throws(RelayBusError) -> RelayBusSubscription

    /// Whether any live connection holds `subject`, on any node (the push rule's "no live connection").
    func hasSubscribers(_ subject: RelaySubject) -> Bool

    /// Whether other relay nodes share this bus: the push rule's state must then be shared too.
    var spansNodes: Bool { get }

    /// Whether this node reaches the other nodes now (always, for a bus within one process).
    var isLinked: Bool { get }

    /// Calls `handler` (on a bus thread) each time this node's link to the other nodes goes down (false) or
    /// comes back (true). The relay closes its subscribers' connections when it goes down: a subscriber that the
    /// other nodes can no longer reach must not look subscribed.
    func watchLink(_ handler: @escaping @Sendable (Bool) -> Void)
}

extension RelayBus {
    public var isLinked: Bool { true }
    public func watchLink(_ handler: @escaping @Sendable (Bool) -> Void) {}
}

/// The bus cannot carry frames now (NATS is down or reconnecting): what was not answered OK may not have reached
/// every node.
public struct RelayBusError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One subscription, ended by ``cancel()``.
public final class RelayBusSubscription: Sendable {
    public let subject: RelaySubject
    private let onCancel: @Sendable () -> Void

    public init(subject: RelaySubject, onCancel: @escaping @Sendable () -> Void) {
        self.subject = subject
        self.onCancel = onCancel
    }

    /// Removes the subscription from the bus: no frame is delivered after this returns; idempotent.
    public func cancel() { onCancel() }
}

/// The embedded bus: a table of subject → delivery callbacks behind one mutex; publishing calls each one and
/// never waits on a consumer.
public final class InProcessRelayBus: RelayBus {
    private struct State {
        var next = 0
        var subjects: [RelaySubject: [Int: @Sendable (Data) -> Void]] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    @discardableResult
    public func publish(_ frame: Data, to subject: RelaySubject) -> Int {
        let deliveries = state.withLock { state in state.subjects[subject].map { Array($0.values) } ?? [] }
        for deliver in deliveries { deliver(frame) }
        return deliveries.count
    }

    public func subscribe(
        _ subject: RelaySubject, deliver: @escaping @Sendable (Data) -> Void
    ) -> RelayBusSubscription {
        let key = state.withLock { state -> Int in
            state.next += 1
            state.subjects[subject, default: [:]][state.next] = deliver
            return state.next
        }
        return RelayBusSubscription(subject: subject) { [weak self] in self?.remove(subject, key) }
    }

    public func hasSubscribers(_ subject: RelaySubject) -> Bool {
        state.withLock { !($0.subjects[subject]?.isEmpty ?? true) }
    }

    /// Nothing to flush: a frame is in every subscriber's queue once ``publish(_:to:)`` returns.
    public func flush(then done: @escaping @Sendable (Result<Void, RelayBusError>) -> Void) { done(.success(())) }

    public var spansNodes: Bool { false }

    /// Subjects with at least one subscription (for tests and metrics).
    public var subjectCount: Int { state.withLock { $0.subjects.count } }

    private func remove(_ subject: RelaySubject, _ key: Int) {
        state.withLock { state in
            state.subjects[subject]?[key] = nil
            if state.subjects[subject]?.isEmpty == true { state.subjects[subject] = nil }
        }
    }
}
