import Foundation
import SiblingsCrypto

/// One key-binding update: `label` is bound to `value` at `version` (1, 2, 3, ... per label, no gaps).
///
/// The log's leaves are ``encoded`` entries (docs/pixie-protocol.md, "Key transparency", "Entry"):
/// ```
/// 0x01 (format) ‖ u16 len(label) ‖ label (UTF-8) ‖ u64 version ‖ u64 timestamp (ms since 1970) ‖
/// u32 len(value) ‖ value                                                   (integers big-endian)
/// ```
public struct Entry: Sendable, Hashable {
    public let label: Label
    public let version: UInt64
    public let value: Data
    /// Milliseconds since 1970-01-01 UTC, when the sequencer integrated the update.
    public let timestamp: UInt64

    /// The most bytes a value may have.
    public static let maximumValueByteCount = 65_536

    public init(label: Label, version: UInt64, value: Data, timestamp: UInt64) throws {
        guard version >= 1 else { throw TransparencyError(.malformed, "versions start at 1; this entry has 0") }
        guard value.count <= Entry.maximumValueByteCount else {
            throw TransparencyError(
                .malformed, "the value has \(value.count) bytes; at most \(Entry.maximumValueByteCount) fit an entry")
        }
        self.label = label
        self.version = version
        self.value = value
        self.timestamp = timestamp
    }

    /// The bytes the log hashes as a leaf.
    public var encoded: Data {
        var out = Data([0x01])
        let label = Data(self.label.rawValue.utf8)
        out.appendInteger(UInt16(label.count))
        out.append(label)
        out.appendInteger(version)
        out.appendInteger(timestamp)
        out.appendInteger(UInt32(value.count))
        out.append(value)
        return out
    }

    /// Parses exactly one encoded entry.
    public init(encoded: some DataProtocol) throws {
        var reader = ByteReader(Data(encoded), what: "an entry")
        guard try reader.integer(UInt8.self) == 0x01 else {
            throw TransparencyError(.malformed, "an entry starts with format byte 0x01")
        }
        let labelBytes = try reader.bytes(Int(try reader.integer(UInt16.self)))
        guard let text = String(data: labelBytes, encoding: .utf8) else {
            throw TransparencyError(.malformed, "the entry's label is not UTF-8")
        }
        let label = try Label(text)
        let version = try reader.integer(UInt64.self)
        let timestamp = try reader.integer(UInt64.self)
        let value = try reader.bytes(Int(try reader.integer(UInt32.self)))
        try reader.finish()
        try self.init(label: label, version: version, value: value, timestamp: timestamp)
    }

    /// The log's leaf hash of this entry, SHA-256(0x00 ‖ encoded); also the entry's value in the map.
    public var leafHash: Hash256 { MerkleLog.leafHash(encoded) }

    /// Where this entry sits in the map: ``VerifiableMap/key(label:version:)``.
    public var mapKey: Hash256 { VerifiableMap.key(label: label, version: version) }
}

/// A label in the log: `<kind>` or `<kind>/<id>`, such as `discovery/<phone_id>`, `account/<kt_handle>`,
/// `devices/<kt_handle>` or `oprf-keys`. The kind is 1–32 of `a-z 0-9 -`; the whole label is 1–1024 bytes of
/// UTF-8 with no byte below 0x20 and no 0x7F. The log does not interpret the id.
public struct Label: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String

    public static let maximumByteCount = 1024

    public init(_ rawValue: String) throws {
        let bytes = Array(rawValue.utf8)
        guard !bytes.isEmpty, bytes.count <= Label.maximumByteCount else {
            throw TransparencyError(
                .malformed, "a label has 1 to \(Label.maximumByteCount) bytes; this one has \(bytes.count)")
        }
        guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw TransparencyError(.malformed, "the label \(rawValue.debugDescription) contains a control character")
        }
        let kind = bytes.split(separator: UInt8(ascii: "/"), maxSplits: 1, omittingEmptySubsequences: false)[0]
        let kindOK =
            !kind.isEmpty && kind.count <= 32
            && kind.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
        guard kindOK else {
            throw TransparencyError(
                .malformed,
                "the label \(rawValue.debugDescription) must start with a kind of 1-32 characters a-z, 0-9 or '-' "
                    + "(such as discovery/<phone_id>)")
        }
        self.rawValue = rawValue
    }

    /// A literal label; traps if it is not valid (for constants in code and tests).
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("\(error)") }
    }

    public var description: String { rawValue }
}

// MARK: - Byte helpers

extension Data {
    mutating func appendInteger<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}

/// Reads a byte string front to back; every shortfall is a `.malformed` error naming `what`.
struct ByteReader {
    private let data: Data
    private var offset: Int
    private let what: String

    init(_ data: Data, what: String) {
        self.data = data
        self.offset = data.startIndex
        self.what = what
    }

    mutating func bytes(_ count: Int) throws -> Data {
        guard count >= 0, data.endIndex - offset >= count else {
            throw TransparencyError(.malformed, "\(what) is truncated")
        }
        defer { offset += count }
        return Data(data[offset..<offset + count])
    }

    mutating func integer<T: FixedWidthInteger>(_: T.Type) throws -> T {
        let bytes = try self.bytes(MemoryLayout<T>.size)
        return bytes.reduce(T(0)) { $0 << 8 | T($1) }
    }

    mutating func hash() throws -> Hash256 {
        Hash256(try bytes(32))!
    }

    mutating func hashes(_ count: Int) throws -> [Hash256] {
        try (0..<count).map { _ in try hash() }
    }

    func finish() throws {
        guard offset == data.endIndex else {
            throw TransparencyError(.malformed, "\(what) has \(data.endIndex - offset) bytes after its end")
        }
    }
}
