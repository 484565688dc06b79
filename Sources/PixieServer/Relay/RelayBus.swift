import Foundation
import PixieWire
import Synchronization

/// The relay's fan-out: frames published to a subject reach every current subscription of it, and nothing is
/// kept for later (000_e422bd9a7c930342.txt: "pure-ephemeral ... forwards frames and stores nothing").
///
/// ``InProcessRelayBus`` serves one process; a NATS implementation behind the same protocol is the path past
/// one machine (subjects map to NATS subjects, ``hasSubscribers(_:)`` to a presence lookup).
public protocol RelayBus: Sendable {
    /// Hands `frame` (an encoded DELIVER) to every subscription of `subject`; returns how many took it.
    @discardableResult
    func publish(_ frame: Data, to subject: RelaySubject) async -> Int

    /// A new subscription of `subject` whose stream buffers at most `bufferLimit` frames; a frame that finds
    /// the buffer full is dropped and the subscription marked ``RelayBusSubscription/overflowed``.
    func subscribe(_ subject: RelaySubject, bufferLimit: Int) async -> RelayBusSubscription

    /// Whether any live connection holds `subject` (the push rule's "no live connection").
    func hasSubscribers(_ subject: RelaySubject) async -> Bool
}

/// One subscription: its frames as an `AsyncSequence`, ended by ``cancel()``.
public final class RelayBusSubscription: AsyncSequence, Sendable {
    public typealias Element = Data

    public let subject: RelaySubject
    private let stream: AsyncStream<Data>
    private let onCancel: @Sendable () -> Void
    private let overflow = Atomic<Bool>(false)

    public init(subject: RelaySubject, stream: AsyncStream<Data>, onCancel: @escaping @Sendable () -> Void) {
        self.subject = subject
        self.stream = stream
        self.onCancel = onCancel
    }

    /// True once a frame was dropped because the buffer was full (the consumer is too slow).
    public var overflowed: Bool { overflow.load(ordering: .relaxed) }

    /// Marks the subscription overflowed (for bus implementations).
    public func markOverflowed() { overflow.store(true, ordering: .relaxed) }

    /// Ends the stream and removes the subscription from the bus; idempotent.
    public func cancel() { onCancel() }

    public func makeAsyncIterator() -> AsyncStream<Data>.AsyncIterator { stream.makeAsyncIterator() }
}

/// The embedded bus: a table of subject → subscriptions behind one mutex; publishing yields the frame into
/// each subscription's bounded stream and never waits on a consumer.
public final class InProcessRelayBus: RelayBus {
    private struct Entry {
        let subscription: RelayBusSubscription
        let continuation: AsyncStream<Data>.Continuation
    }

    private struct State {
        var next = 0
        var subjects: [RelaySubject: [Int: Entry]] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    @discardableResult
    public func publish(_ frame: Data, to subject: RelaySubject) async -> Int {
        let entries = state.withLock { state in state.subjects[subject].map { Array($0.values) } ?? [] }
        var delivered = 0
        for entry in entries {
            switch entry.continuation.yield(frame) {
            case .enqueued: delivered += 1
            case .dropped:
                entry.subscription.markOverflowed()
                entry.continuation.finish()
            case .terminated: break
            @unknown default: break
            }
        }
        return delivered
    }

    public func subscribe(_ subject: RelaySubject, bufferLimit: Int) async -> RelayBusSubscription {
        let (stream, continuation) = AsyncStream<Data>.makeStream(
            bufferingPolicy: .bufferingOldest(max(1, bufferLimit)))
        let key = state.withLock { state -> Int in
            state.next += 1
            return state.next
        }
        let subscription = RelayBusSubscription(subject: subject, stream: stream) { [weak self] in
            continuation.finish()
            self?.remove(subject, key)
        }
        state.withLock {
            $0.subjects[subject, default: [:]][key] = Entry(subscription: subscription, continuation: continuation)
        }
        return subscription
    }

    public func hasSubscribers(_ subject: RelaySubject) async -> Bool {
        state.withLock { !($0.subjects[subject]?.isEmpty ?? true) }
    }

    /// Subjects with at least one subscription (for tests and metrics).
    public var subjectCount: Int { state.withLock { $0.subjects.count } }

    private func remove(_ subject: RelaySubject, _ key: Int) {
        state.withLock { state in
            state.subjects[subject]?[key] = nil
            if state.subjects[subject]?.isEmpty == true { state.subjects[subject] = nil }
        }
    }
}
