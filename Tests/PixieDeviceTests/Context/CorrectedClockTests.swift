import Foundation
import PixieDevice
import PixieDeviceTestSupport
import Testing

@Suite("CorrectedClock: this device's clock set by the server's Date (docs/pixie-sync.md, \"Whose wall clock\")")
struct CorrectedClockTests {
    static let server = Date(timeIntervalSince1970: 1_800_000_000)

    struct Measurement: Sendable, CustomTestStringConvertible {
        let name: String
        /// When the request left and its answer came, on the device's clock, from the server's `Date`.
        let sent: TimeInterval
        let received: TimeInterval
        let offset: TimeInterval
        var testDescription: String { name }
    }

    static let measurements = [
        Measurement(name: "in step, answered at once", sent: 0.2, received: 0.3, offset: 0),
        Measurement(
            name: "1.9 s behind: under the second the Date gives, and its rounding", sent: -1.5, received: -1.3,
            offset: 0),
        Measurement(name: "3 hours behind", sent: -10_800, received: -10_799.8, offset: 10_800.4),
        Measurement(name: "10 minutes ahead", sent: 600.5, received: 600.7, offset: -600.1),
        Measurement(name: "a slow answer: the middle of the round trip", sent: -3600, received: -3596, offset: 3598.5),
    ]

    @Test(
        "the offset is the server's Date (to its middle second) against the round trip's middle",
        arguments: measurements)
    func offset(_ measurement: Measurement) {
        let offset = CorrectedClock.offset(
            serverDate: Self.server, sent: Self.server.addingTimeInterval(measurement.sent),
            received: Self.server.addingTimeInterval(measurement.received))
        #expect(abs(offset - measurement.offset) < 0.001, "\(offset)")
    }

    @Test("now is the base clock's plus the offset in use; sleeping is the base clock's")
    func correctedNow() async throws {
        let base = ManualDeviceClock(Self.server.addingTimeInterval(-10_800))
        let clock = CorrectedClock(base: base)
        #expect(clock.now == base.now)
        clock.correct(serverDate: Self.server, sent: base.now, received: base.now)
        #expect(abs(clock.now.timeIntervalSince(Self.server) - 0.5) < 0.001)
        let sleeping = Task { try await clock.sleep(for: .seconds(5)) }
        for _ in 0..<500 where base.sleeperCount == 0 { try await Task.sleep(for: .milliseconds(2)) }
        #expect(base.sleeperCount == 1)
        base.advance(by: 5)
        try await sleeping.value
        #expect(abs(clock.now.timeIntervalSince(Self.server) - 5.5) < 0.001)
    }
}
