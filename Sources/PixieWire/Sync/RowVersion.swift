import Foundation
import SiblingsCrypto

/// Which device wrote a version (docs/pixie-sync.md, "Versions"): the first 8 bytes of
/// SHA-256("pixie/sync/author/v1" ‖ 0x00 ‖ the device's identity public key), read big-endian. Every device
/// computes every sibling's tag from the roster, so two concurrent versions are ordered alike everywhere.
public struct AuthorTag: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// The tag of the device whose roster `pubkey` is `devicePublicKey` (32 bytes).
    public init(devicePublicKey: some DataProtocol) {
        var input = Data("pixie/sync/author/v1\0".utf8)
        input.append(contentsOf: devicePublicKey)
        self.rawValue = SHA256.hash(data: input).prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The tag of rows that predate versions (the store's migration 2): eight zero bytes.
    public static let migrated = AuthorTag(rawValue: 0)

    public static func < (lhs: AuthorTag, rhs: AuthorTag) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { String(format: "%016llx", rawValue) }
}

/// A row's version (docs/pixie-sync.md, "Versions"): the writing device's hybrid logical clock reading, then its
/// ``AuthorTag`` as the tie-break, compared in that order (as the 16 bytes `hlc ‖ author`, big-endian). One
/// device never writes two versions with one reading, so a version names exactly one write.
public struct RowVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The HLC reading: Unix milliseconds in the high 48 bits, a counter in the low 16.
    public var hlc: UInt64
    public var author: AuthorTag

    public init(hlc: UInt64, author: AuthorTag) {
        self.hlc = hlc
        self.author = author
    }

    public static func < (lhs: RowVersion, rhs: RowVersion) -> Bool {
        (lhs.hlc, lhs.author) < (rhs.hlc, rhs.author)
    }

    /// `hlc (8) ‖ author (8)`.
    public var encoded: Data {
        var out = Data(capacity: 16)
        out.appendUInt64(hlc)
        out.appendUInt64(author.rawValue)
        return out
    }

    public var description: String { "\(HybridLogicalClock.describe(hlc))/\(author)" }
}

/// A device's hybrid logical clock (Kulkarni, Demirbas et al., "Logical Physical Clocks", OPODIS 2014), in the
/// branch-free form docs/pixie-sync.md ("Versions") gives:
///
/// - a local write: `reading = max(reading + 1, wall_ms << 16)`, and the write takes the new reading;
/// - applying a received row: `reading = max(reading, row's reading)`, unless that row is more than
///   ``maximumLead`` ahead of this device's wall clock, when it is held instead (CockroachDB's max-offset
///   rule, with a window wide enough for phones).
///
/// So a write that causally follows another always has the greater reading, the reading is the wall time while
/// clocks agree, and it never goes back when someone sets the wall clock back. A value type: the store keeps
/// the reading, and moves it in the write's own transaction.
public struct HybridLogicalClock: Sendable, Hashable {
    /// How far ahead of this device's wall clock a received reading may be and still be applied: 5 minutes,
    /// Kerberos's default skew.
    public static let defaultMaximumLead: Duration = .seconds(300)

    public private(set) var reading: UInt64

    public init(reading: UInt64 = 0) { self.reading = reading }

    /// The reading of `date` with a zero counter: its Unix milliseconds, shifted past the counter's 16 bits.
    /// Dates before 1970 read as 0; dates past the 48-bit field read as its largest value.
    public static func reading(at date: Date) -> UInt64 {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded(.down)
        guard milliseconds > 0 else { return 0 }
        guard milliseconds < Double(1 << 48) else { return UInt64((1 << 48) - 1) << 16 }
        return UInt64(milliseconds) << 16
    }

    /// Moves the clock for a local write at wall time `now` and returns the write's reading.
    public mutating func tick(now: Date) -> UInt64 {
        reading = max(reading == .max ? reading : reading + 1, Self.reading(at: now))
        return reading
    }

    /// Moves the clock past a received row's reading and returns true, or returns false (and stays) when that
    /// reading is more than `maximumLead` ahead of the wall clock `now`: the row is held, not applied.
    public mutating func observe(_ received: UInt64, now: Date, maximumLead: Duration = defaultMaximumLead) -> Bool {
        guard !Self.isHeld(received, now: now, maximumLead: maximumLead) else { return false }
        reading = max(reading, received)
        return true
    }

    /// True when `received` is more than `maximumLead` ahead of the wall clock `now`.
    public static func isHeld(_ received: UInt64, now: Date, maximumLead: Duration = defaultMaximumLead) -> Bool {
        let (seconds, attoseconds) = maximumLead.components
        let leadMilliseconds = UInt64(max(0, seconds)) * 1000 + UInt64(max(0, attoseconds)) / 1_000_000_000_000_000
        let limit = (reading(at: now) >> 16) + leadMilliseconds
        return received >> 16 > limit
    }

    /// "2026-12-07T00:14:01.123Z+3": the wall time of a reading and its counter, for people.
    public static func describe(_ reading: UInt64) -> String {
        let date = Date(timeIntervalSince1970: TimeInterval(reading >> 16) / 1000)
        let counter = reading & 0xffff
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date) + (counter == 0 ? "" : "+\(counter)")
    }
}
