import Foundation
import Synchronization

/// A bounded queue from a blocking thread (libmicrohttpd's connection thread, a WebSocket's reader) to one
/// async consumer. `put` blocks while the queued cost is at `capacity`: that is the back-pressure.
package final class HandoffQueue<Element: Sendable>: Sendable {
    private struct State {
        /// Queued items from `head` on; slots before `head` were taken and are emptied, so a queue the
        /// consumer never fully drains does not keep what it already consumed alive.
        var items: [Element?] = []
        var head = 0
        var queuedCost = 0
        var end: Result<Void, any Error>?
        var consumer: CheckedContinuation<Element?, any Error>?
        var producerWaiting = false
        /// The consumer is gone: what is put is dropped and `put` never blocks.
        var abandoned = false
        /// Called once when the queue next has room (``offer(_:whenSpace:)`` found it full).
        var whenSpace: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())
    private let space = DispatchSemaphore(value: 0)
    private let capacity: Int
    private let cost: @Sendable (Element) -> Int

    package init(capacity: Int, cost: @escaping @Sendable (Element) -> Int) {
        self.capacity = capacity
        self.cost = cost
    }

    private enum PutStep {
        case done
        case handTo(CheckedContinuation<Element?, any Error>)
        case wait
    }

    /// Adds `item`, blocking the calling thread while the queue is full. Dropped if the queue has ended or
    /// its consumer is gone.
    package func put(_ item: Element) {
        let itemCost = cost(item)
        while true {
            let step = state.withLock { state -> PutStep in
                if state.abandoned || state.end != nil { return .done }
                if let consumer = state.consumer {
                    state.consumer = nil
                    return .handTo(consumer)
                }
                if state.queuedCost == 0 || state.queuedCost + itemCost <= capacity {
                    state.items.append(item)
                    state.queuedCost += itemCost
                    return .done
                }
                state.producerWaiting = true
                return .wait
            }
            switch step {
            case .done: return
            case .handTo(let consumer):
                consumer.resume(returning: item)
                return
            case .wait: space.wait()
            }
        }
    }

    /// Adds `item` without blocking (for an event loop, which must not wait): `true` while the queue still
    /// has room, `false` once it is full, and then `whenSpace` is called once when the consumer has taken
    /// something (or abandoned the queue). The item is always kept, so a full queue is exceeded by what the
    /// producer already holds, never dropped. Dropped if the queue has ended or its consumer is gone.
    package func offer(_ item: Element, whenSpace: @escaping @Sendable () -> Void) -> Bool {
        let itemCost = cost(item)
        let (consumer, room) = state.withLock { state -> (CheckedContinuation<Element?, any Error>?, Bool) in
            if state.abandoned || state.end != nil { return (nil, true) }
            if let consumer = state.consumer {
                state.consumer = nil
                return (consumer, true)
            }
            state.items.append(item)
            state.queuedCost += itemCost
            guard state.queuedCost >= capacity else { return (nil, true) }
            state.whenSpace = whenSpace
            return (nil, false)
        }
        consumer?.resume(returning: item)
        return room
    }

    /// Ends the queue: the consumer gets what is queued, then `nil` (or `error`). Later calls do nothing.
    package func finish(throwing error: (any Error)? = nil) {
        let consumer = state.withLock { state -> CheckedContinuation<Element?, any Error>? in
            guard state.end == nil else { return nil }
            state.end = error.map { .failure($0) } ?? .success(())
            // The producer is ending it: nobody waits for room any more.
            state.whenSpace = nil
            // An error overtakes what is queued: the consumer must not mistake a truncated body for a whole one.
            if error != nil {
                state.items = []
                state.head = 0
                state.queuedCost = 0
            }
            defer { state.consumer = nil }
            return state.consumer
        }
        if let consumer {
            if let error { consumer.resume(throwing: error) } else { consumer.resume(returning: nil) }
        }
    }

    /// The consumer will read no more: drop what is queued and never block the producer again.
    package func abandon() {
        let (wake, whenSpace) = state.withLock { state -> (Bool, (@Sendable () -> Void)?) in
            state.abandoned = true
            state.items = []
            state.head = 0
            state.queuedCost = 0
            defer {
                state.producerWaiting = false
                state.whenSpace = nil
            }
            return (state.producerWaiting, state.whenSpace)
        }
        if wake { space.signal() }
        whenSpace?()
    }

    private enum NextStep {
        case item(Element, wakeProducer: Bool, whenSpace: (@Sendable () -> Void)?)
        case end(Result<Void, any Error>)
        case waiting
    }

    /// The next item, `nil` at the end; throws the error the queue ended with, or `CancellationError`.
    package func next() async throws -> Element? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Element?, any Error>) in
                let step = state.withLock { state -> NextStep in
                    if state.head < state.items.count {
                        let item = state.items[state.head]!
                        state.items[state.head] = nil
                        state.head += 1
                        state.queuedCost -= cost(item)
                        if state.head == state.items.count {
                            state.items = []
                            state.head = 0
                        } else if state.head >= 1024, state.head * 2 >= state.items.count {
                            state.items.removeFirst(state.head)
                            state.head = 0
                        }
                        var whenSpace: (@Sendable () -> Void)?
                        if state.queuedCost < capacity {
                            whenSpace = state.whenSpace
                            state.whenSpace = nil
                        }
                        defer { state.producerWaiting = false }
                        return .item(item, wakeProducer: state.producerWaiting, whenSpace: whenSpace)
                    }
                    if let end = state.end { return .end(end) }
                    if state.abandoned { return .end(.success(())) }
                    if Task.isCancelled { return .end(.failure(CancellationError())) }
                    state.consumer = continuation
                    return .waiting
                }
                switch step {
                case .item(let item, let wakeProducer, let whenSpace):
                    if wakeProducer { space.signal() }
                    whenSpace?()
                    continuation.resume(returning: item)
                case .end(.success): continuation.resume(returning: nil)
                case .end(.failure(let error)): continuation.resume(throwing: error)
                case .waiting: break
                }
            }
        } onCancel: {
            let consumer = state.withLock { state -> CheckedContinuation<Element?, any Error>? in
                defer { state.consumer = nil }
                return state.consumer
            }
            consumer?.resume(throwing: CancellationError())
        }
    }
}
