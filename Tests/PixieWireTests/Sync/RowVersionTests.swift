import Foundation
import PixieWire
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("RowVersion and HybridLogicalClock: docs/pixie-sync.md, Versions")
struct RowVersionTests {
    static let base = Date(timeIntervalSince1970: 1_800_000_000)
    static let baseReading = UInt64(1_800_000_000_000) << 16

    struct Step: Sendable, CustomTestStringConvertible {
        let name: String
        let start: UInt64
        let wallOffset: TimeInterval
        let expected: UInt64
        var testDescription: String { name }
    }

    static let ticks: [Step] = [
        Step(name: "a fresh clock takes the wall time", start: 0, wallOffset: 0, expected: baseReading),
        Step(
            name: "the wall ahead of the reading wins", start: baseReading, wallOffset: 0.005,
            expected: baseReading + (5 << 16)),
        Step(name: "the same millisecond counts up", start: baseReading, wallOffset: 0, expected: baseReading + 1),
        Step(
            name: "a wall clock set back never moves the reading back", start: baseReading + 7,
            wallOffset: -3600, expected: baseReading + 8),
        Step(
            name: "a full counter carries into the milliseconds", start: baseReading | 0xffff, wallOffset: 0,
            expected: baseReading + (1 << 16)),
    ]

    @Test("a local write's reading is max(reading + 1, wall << 16)", arguments: ticks)
    func tick(_ step: Step) {
        var clock = HybridLogicalClock(reading: step.start)
        let reading = clock.tick(now: Self.base.addingTimeInterval(step.wallOffset))
        #expect(reading == step.expected)
        #expect(clock.reading == step.expected)
    }

    @Test("a received reading lifts the clock, an older one leaves it")
    func observe() {
        var clock = HybridLogicalClock(reading: Self.baseReading)
        let older = clock.observe(Self.baseReading - 100, now: Self.base)
        #expect(older && clock.reading == Self.baseReading)
        let newer = clock.observe(Self.baseReading + (60_000 << 16), now: Self.base)
        #expect(newer && clock.reading == Self.baseReading + (60_000 << 16))
        // The next local write follows what was applied, though the wall clock is a minute behind it.
        let next = clock.tick(now: Self.base)
        #expect(next == Self.baseReading + (60_000 << 16) + 1)
    }

    @Test("a reading more than 5 minutes ahead of the wall is held and moves nothing")
    func held() {
        var clock = HybridLogicalClock(reading: Self.baseReading)
        let limit = Self.baseReading + (300_000 << 16)
        let atLimit = clock.observe(limit | 0xffff, now: Self.base)
        #expect(atLimit, "at the limit's millisecond: applied")
        var other = HybridLogicalClock(reading: Self.baseReading)
        let past = other.observe(limit + (1 << 16), now: Self.base)
        #expect(!past && other.reading == Self.baseReading, "a millisecond past it: held")
        let far = other.observe(.max, now: Self.base)
        #expect(!far && other.reading == Self.baseReading)
        // Once the wall clock has caught up, the same reading is applied.
        let later = other.observe(limit + (1 << 16), now: Self.base.addingTimeInterval(1))
        #expect(later && other.reading == limit + (1 << 16))
        #expect(
            HybridLogicalClock.isHeld(Self.baseReading + (3_600_000 << 16), now: Self.base, maximumLead: .seconds(3599))
        )
    }

    @Test("causally later writes always read greater, whatever the wall clocks say")
    func causality() {
        // Three devices: one right, one three hours behind, one with a clock that jumps about. Each write sees
        // some earlier writes (applies them) first; every write must read greater than everything it saw.
        var random = SeededGenerator(seed: 39)
        let skews: [TimeInterval] = [0, -3 * 3600, 0]
        var clocks = [HybridLogicalClock](repeating: HybridLogicalClock(), count: 3)
        var written: [UInt64] = []
        var now = Self.base
        for step in 0..<5000 {
            now.addTimeInterval(Double(random.next() % 50) / 1000)
            let device = Int(random.next() % 3)
            var wall = now.addingTimeInterval(skews[device])
            if device == 2 { wall.addTimeInterval(Double(Int(random.next() % 7200)) - 3600) }
            var seen: UInt64 = 0
            for _ in 0..<Int(random.next() % 3) where !written.isEmpty {
                let reading = written[Int(random.next() % UInt64(written.count))]
                if clocks[device].observe(reading, now: wall, maximumLead: .seconds(7200)) { seen = max(seen, reading) }
            }
            let before = clocks[device].reading
            let reading = clocks[device].tick(now: wall)
            #expect(reading > seen && reading > before, "write \(step)")
            written.append(reading)
        }
    }

    @Test("versions order by reading, then author, as their 16 bytes do")
    func ordering() {
        var random = SeededGenerator(seed: 7)
        for _ in 0..<2000 {
            let a = RowVersion(hlc: random.next() % 4, author: AuthorTag(rawValue: random.next() % 4))
            let b = RowVersion(hlc: random.next() % 4, author: AuthorTag(rawValue: random.next() % 4))
            #expect((a < b) == a.encoded.lexicographicallyPrecedes(b.encoded))
            #expect(a.encoded.count == 16)
        }
        #expect(RowVersion(hlc: 5, author: .init(rawValue: 1)) < RowVersion(hlc: 5, author: .init(rawValue: 2)))
        #expect(RowVersion(hlc: 5, author: .init(rawValue: 9)) < RowVersion(hlc: 6, author: .init(rawValue: 0)))
    }

    @Test("an author tag is SHA-256 of the label and the device's key, cut to 8 bytes (pyca/cryptography)")
    func authorTag() throws {
        let oracle = try ReferenceOracle()
        for seed in 0..<4 {
            let key = Data((0..<32).map { UInt8(($0 * 7 + seed * 13) & 0xff) })
            let expected = try oracle.bytes(
                "digest", ["hash": "sha256", "message": Data("pixie/sync/author/v1\0".utf8) + key])
            let tag = AuthorTag(devicePublicKey: key)
            #expect(tag.rawValue == expected.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
            #expect(tag.description == expected.prefix(8).hexString)
        }
    }
}
