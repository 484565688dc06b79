import Foundation

/// The time a device runs on: the wall clock its messages are stamped with and freshness windows are judged by,
/// and the waits of the seed's timings (5 s re-sends, the 30 s grace, a 3-minute prompt) and the relay's backoff.
///
/// Every device component takes it from its ``DeviceEnvironment``: ``SystemDeviceClock`` in an app and in `pixie`,
/// and in tests a manual clock that moves only when the test says, so that the seed's minutes run in milliseconds.
public protocol DeviceClock: Sendable {
    /// Now, on the wall clock.
    var now: Date { get }
    /// Returns once `duration` has passed on this clock; throws `CancellationError` if the task is cancelled first.
    func sleep(for duration: Duration) async throws
}

extension DeviceClock {
    /// Returns once this clock reads `deadline` or later.
    public func sleep(until deadline: Date) async throws {
        let left = deadline.timeIntervalSince(now)
        if left > 0 { try await sleep(for: .seconds(left)) } else { try Task.checkCancellation() }
    }

    /// A state machine's timer: a task that calls `fire` once this clock reads `deadline`, unless it is
    /// cancelled first (then `fire` is never called).
    func timer(until deadline: Date, fire: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        Task {
            guard (try? await sleep(until: deadline)) != nil, !Task.isCancelled else { return }
            fire()
        }
    }
}

/// The system's clocks: `Date()` for the wall, and the continuous clock for waits (a wait is not cut short or
/// stretched when someone sets the wall clock).
public struct SystemDeviceClock: DeviceClock {
    public init() {}

    public var now: Date { Date() }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}

extension Duration {
    /// The duration in seconds, as Foundation's dates count them.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
