import Foundation
import Synchronization
import Testing

@testable import HTTPServer

/// The body queue's back-pressure bounds what is alive, not only what is counted: items the consumer took
/// must not stay referenced while the producer keeps the queue from draining.
@Suite struct HandoffQueueTests {
    /// An item that counts how many of its kind are alive.
    final class Tracked: Sendable {
        static let alive = Atomic<Int>(0)
        static let peak = Atomic<Int>(0)

        init() {
            let now = Self.alive.add(1, ordering: .relaxed).newValue
            _ = Self.peak.max(now, ordering: .relaxed)
        }

        deinit { Self.alive.subtract(1, ordering: .relaxed) }
    }

    @Test func consumedItemsAreReleasedWhileTheQueueStaysBusy() async throws {
        // Capacity 8 items; the producer never lets the consumer drain the queue.
        let queue = HandoffQueue<Tracked>(capacity: 8) { _ in 1 }
        let producer = Thread {
            for _ in 0..<20_000 { queue.put(Tracked()) }
            queue.finish()
        }
        producer.start()
        var count = 0
        while try await queue.next() != nil { count += 1 }
        #expect(count == 20_000)
        // 8 queued, one handed over, one being put, one held by the consumer, and some slack for timing.
        #expect(Tracked.peak.load(ordering: .relaxed) <= 16)
    }
}
