import Foundation
import Synchronization

/// This device's wall clock corrected by its offset from the server's (docs/pixie-sync.md, "Whose wall clock"): what
/// the device store stamps its writes by, and what the reconcile loop judges received rows and dates its digests
/// by. The offset is measured from the `Date` of pixie-server's answer to `GET /healthz` when the loop starts (on
/// every connection to the relay) and when `pixie sync` runs a round, and kept in the device's state, so that
/// every process of the home (`pixie store` too) stamps by the same corrected time. Sleeping is the base clock's.
public final class CorrectedClock: DeviceClock {
    /// The clock being corrected: the device's own.
    public let base: any DeviceClock
    private let offsetSeconds: Mutex<TimeInterval>

    /// An offset under this is taken as none: the server's `Date` says only the second.
    public static let smallestCorrection: TimeInterval = 2

    public init(base: any DeviceClock, offset: TimeInterval = 0) {
        self.base = base
        offsetSeconds = Mutex(offset)
    }

    /// The server's time minus this device's, in seconds, as last measured (0 when under 2 s, or never measured).
    public var offset: TimeInterval { offsetSeconds.withLock { $0 } }

    public var now: Date { base.now.addingTimeInterval(offset) }

    public func sleep(for duration: Duration) async throws { try await base.sleep(for: duration) }

    /// Takes a measurement: the server said `serverDate` (to the second) in an answer to a request sent at `sent`
    /// and answered at `received`, both on the base clock. Returns the offset now in use.
    @discardableResult
    public func correct(serverDate: Date, sent: Date, received: Date) -> TimeInterval {
        let offset = Self.offset(serverDate: serverDate, sent: sent, received: received)
        offsetSeconds.withLock { $0 = offset }
        return offset
    }

    /// The offset one measurement gives: the server's `Date` truncates its time to the second, so its middle
    /// (`Date` + 0.5 s) is set against the middle of the request's round trip; under ``smallestCorrection`` it is 0.
    public static func offset(serverDate: Date, sent: Date, received: Date) -> TimeInterval {
        let middle = sent.addingTimeInterval(received.timeIntervalSince(sent) / 2)
        let offset = serverDate.addingTimeInterval(0.5).timeIntervalSince(middle)
        return abs(offset) < smallestCorrection ? 0 : offset
    }
}
