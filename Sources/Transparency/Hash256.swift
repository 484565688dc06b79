import Foundation
import SiblingsCrypto

/// A 32-byte SHA-256 output kept inline (four words, no heap allocation), so a map of a million leaves is
/// arrays of plain values.
public struct Hash256: Hashable, Sendable, Comparable, CustomStringConvertible {
    @usableFromInline var w0: UInt64, w1: UInt64, w2: UInt64, w3: UInt64

    /// 32 zero bytes: the hash of an empty map subtree (docs/pixie-protocol.md, "Map").
    public static let zero = Hash256(w0: 0, w1: 0, w2: 0, w3: 0)

    @usableFromInline init(w0: UInt64, w1: UInt64, w2: UInt64, w3: UInt64) {
        self.w0 = w0
        self.w1 = w1
        self.w2 = w2
        self.w3 = w3
    }

    /// Exactly 32 bytes, or nil.
    public init?(_ bytes: some DataProtocol) {
        guard bytes.count == 32 else { return nil }
        var value = Hash256.zero
        withUnsafeMutableBytes(of: &value) { _ = bytes.copyBytes(to: $0) }
        self = value
    }

    /// The 32 bytes.
    public var rawRepresentation: Data { withUnsafeBytes(of: self) { Data($0) } }

    public var description: String { rawRepresentation.map { String(format: "%02x", $0) }.joined() }

    /// Bit `index` (0 = the most significant bit of the first byte), as the map's path uses it.
    @inlinable func bit(_ index: Int) -> Int {
        withUnsafeBytes(of: self) { Int($0[index >> 3] >> (7 - UInt8(index & 7))) & 1 }
    }

    /// Byte-wise (big-endian) order, the order of map keys.
    public static func < (lhs: Hash256, rhs: Hash256) -> Bool {
        let a = lhs.w0.bigEndian, b = rhs.w0.bigEndian
        if a != b { return a < b }
        let c = lhs.w1.bigEndian, d = rhs.w1.bigEndian
        if c != d { return c < d }
        let e = lhs.w2.bigEndian, f = rhs.w2.bigEndian
        if e != f { return e < f }
        return lhs.w3.bigEndian < rhs.w3.bigEndian
    }

    /// The index of the first bit where `self` and `other` differ (256 if equal).
    func firstDifferingBit(from other: Hash256) -> Int {
        let pairs = [(w0, other.w0), (w1, other.w1), (w2, other.w2), (w3, other.w3)]
        for (i, (a, b)) in pairs.enumerated() where a != b {
            return i * 64 + (a.bigEndian ^ b.bigEndian).leadingZeroBitCount
        }
        return 256
    }

    /// SHA-256(`prefix` ‖ `left` ‖ `right`), hashed in one call from a stack buffer (the map and the log hash
    /// millions of these; an incremental hasher costs two OpenSSL contexts each).
    static func sha256(prefix: UInt8, _ left: Hash256, _ right: Hash256) -> Hash256 {
        withUnsafeTemporaryAllocation(byteCount: 65, alignment: 8) { buffer in
            buffer[0] = prefix
            withUnsafeBytes(of: left) { UnsafeMutableRawBufferPointer(rebasing: buffer[1..<33]).copyMemory(from: $0) }
            withUnsafeBytes(of: right) {
                UnsafeMutableRawBufferPointer(rebasing: buffer[33..<65]).copyMemory(from: $0)
            }
            return Hash256(SHA256.hash(data: UnsafeRawBufferPointer(buffer)))
        }
    }

    init(_ digest: SHA256.Digest) {
        var value = Hash256.zero
        withUnsafeMutableBytes(of: &value) { buffer in digest.withUnsafeBytes { buffer.copyMemory(from: $0) } }
        self = value
    }
}
