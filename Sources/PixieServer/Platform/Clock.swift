import Foundation
import Synchronization

/// Where a service reads the time. Injected so tests run the seed's 3-minute grants and 10-minute codes in
/// milliseconds (``ManualClock``) while the server uses the system clock.
public struct PixieClock: Sendable {
    public let now: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date) { self.now = now }

    /// The system's wall clock.
    public static let system = PixieClock { Date() }
}

/// A clock that moves only when told to; for tests.
public final class ManualClock: Sendable {
    private let current: Mutex<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(start) }

    public var now: Date { current.withLock { $0 } }

    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }

    public var clock: PixieClock { PixieClock { [self] in now } }
}
