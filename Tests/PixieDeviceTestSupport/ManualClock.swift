import Foundation
import PixieDevice
import Synchronization

/// A ``DeviceClock`` that moves only when the test says (``advance(by:)``): the seed's 5 s re-sends, 30 s grace and
/// 3-minute prompts run in no time, and in a fixed order. A sleeper wakes once the clock reaches its deadline.
public final class ManualDeviceClock: DeviceClock {
    private struct Sleeper {
        let deadline: Date
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let state: Mutex<(now: Date, sleepers: [UInt64: Sleeper], next: UInt64)>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = Mutex((start, [:], 0))
    }

    public var now: Date { state.withLock { $0.now } }

    /// How many tasks are asleep on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    public func sleep(for duration: Duration) async throws {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        let id = state.withLock { state -> UInt64 in
            defer { state.next += 1 }
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume = state.withLock { state -> Bool in
                    let deadline = state.now.addingTimeInterval(seconds)
                    if seconds <= 0 { return true }
                    if Task.isCancelled { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return false
                }
                if resume {
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        continuation.resume()
                    }
                }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock on by `seconds` and wakes every sleeper whose deadline it reached.
    public func advance(by seconds: TimeInterval) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now = state.now.addingTimeInterval(seconds)
            let due = state.sleepers.filter { $0.value.deadline <= state.now }
            for id in due.keys { state.sleepers.removeValue(forKey: id) }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Waits (in real time, a few milliseconds at a time, up to 10 s) until at least `count` tasks sleep on this
    /// clock: the point at which a test may advance it knowing what it wakes.
    public func waitForSleepers(_ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while sleeperCount < count {
            guard ContinuousClock.now < deadline else {
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}
