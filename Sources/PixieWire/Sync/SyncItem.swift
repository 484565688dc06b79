import Foundation
import SiblingsCrypto

/// One row as an element of its category's set (docs/pixie-sync.md, "Digests"): an 8-byte tag of its id, then
/// an 8-byte tag of its version whose top bit says whether the row is a tombstone. A device that learns an item
/// can tell whether it is a tombstone, and whether it is a version of a row it holds (the same ``idTag``), and
/// nothing more: the tags are HMACs under the account's ``SyncItemKey``.
public struct SyncItem: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let byteCount = 16
    /// The categories' codes, as in the snapshot: conversations 1 … provider_api_keys 8.
    public static let categoryCodes: ClosedRange<UInt8> = 1...8

    public let idTag: UInt64
    /// The version's tag, with the tombstone flag in its top bit.
    public let versionTag: UInt64

    public init(idTag: UInt64, versionTag: UInt64) {
        self.idTag = idTag
        self.versionTag = versionTag
    }

    public init(rawRepresentation bytes: some DataProtocol) throws(PixieWireError) {
        guard bytes.count == Self.byteCount else {
            throw PixieWireError(.malformed, "a sync item is \(Self.byteCount) bytes, not \(bytes.count)")
        }
        let data = Data(bytes)
        self.idTag = data.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
        self.versionTag = data.suffix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The item as a 128-bit integer, big-endian: what a digest sums and a sketch XORs.
    init(_ value: UInt128) {
        self.idTag = UInt64(truncatingIfNeeded: value >> 64)
        self.versionTag = UInt64(truncatingIfNeeded: value)
    }

    var value: UInt128 { UInt128(idTag) << 64 | UInt128(versionTag) }

    public var rawRepresentation: Data {
        var out = Data(capacity: Self.byteCount)
        out.appendUInt64(idTag)
        out.appendUInt64(versionTag)
        return out
    }

    /// True when the row is a tombstone.
    public var isTombstone: Bool { versionTag >> 63 == 1 }

    /// The item's check (docs/pixie-sync.md, "Symbols"): `mix64(hi ⊕ rotl64(lo, 32))`, SplitMix64's finaliser
    /// (Steele, Lea, Flood 2014). Not linear in XOR, so a symbol holding several items almost never looks like one.
    public var check: UInt64 {
        var z = idTag ^ (versionTag << 32 | versionTag >> 32)
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    public static func < (lhs: SyncItem, rhs: SyncItem) -> Bool { lhs.value < rhs.value }

    public var description: String { rawRepresentation.hexString }
}

/// The account's key for ``SyncItem``s (docs/pixie-sync.md, "Digests"): HKDF-SHA256 (RFC 5869) of the 32-byte
/// account seed, empty salt, info "pixie/sync/item-key/v1". Nobody outside the account can compute an item,
/// choose items that cancel in a digest, or learn anything from one.
public struct SyncItemKey: Sendable {
    let key: SymmetricKey

    public init(accountSeed: some DataProtocol) throws {
        guard accountSeed.count == 32 else {
            throw PixieWireError(.malformed, "an account seed is 32 bytes, not \(accountSeed.count)")
        }
        key = try HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Data(accountSeed)), salt: Data(),
            info: Data("pixie/sync/item-key/v1".utf8), outputByteCount: 32)
    }

    /// 8 bytes that name this key without revealing it: HMAC-SHA256(key, "pixie/sync/item-key-id/v1")[0..8]. A
    /// store records it beside its items, and computes them again when it is opened under another key (the
    /// account seed rotated).
    public var keyID: Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data("pixie/sync/item-key-id/v1".utf8), using: key).prefix(8))
    }

    /// `category code (1) ‖ u16 length ‖ id`.
    private static func row(category: UInt8, id: String) -> Data {
        var row = Data([category])
        row.appendShortField(Data(id.utf8))
        return row
    }

    private func tag(_ label: String, _ parts: Data...) -> UInt64 {
        var input = Data(label.utf8)
        input.append(0)
        for part in parts { input += part }
        return HMAC<SHA256>.authenticationCode(for: input, using: key).prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The id tag of row `id` of the category with code `category`: HMAC-SHA256(key, "pixie/sync/item-id/v1" ‖ 0x00
    /// ‖ row)[0..8].
    public func idTag(category: UInt8, id: String) -> UInt64 {
        tag("pixie/sync/item-id/v1", Self.row(category: category, id: id))
    }

    /// The item of row `id` at `version`, a tombstone or not. `idTag`, when the caller kept it, saves its HMAC.
    public func item(
        category: UInt8, id: String, version: RowVersion, deleted: Bool, idTag: UInt64? = nil
    )
        -> SyncItem
    {
        let row = Self.row(category: category, id: id)
        let versionTag = tag("pixie/sync/item-version/v1", row, version.encoded)
        return SyncItem(
            idTag: idTag ?? tag("pixie/sync/item-id/v1", row),
            versionTag: versionTag & ~(1 << 63) | (deleted ? 1 << 63 : 0))
    }
}

/// A category's digest (docs/pixie-sync.md, "Digests"): its row count and the sum of its items as 128-bit
/// integers, modulo 2^128. Replacing, adding and removing an item is constant work whatever the store's size.
///
///     count (4) ‖ sum (16)
public struct SyncDigest: Sendable, Hashable, CustomStringConvertible {
    public static let byteCount = 20

    public private(set) var count: UInt32
    public private(set) var sum: UInt128

    public init(count: UInt32 = 0, sum: UInt128 = 0) {
        self.count = count
        self.sum = sum
    }

    public init<S: Sequence>(items: S) where S.Element == SyncItem {
        self.init()
        for item in items { insert(item) }
    }

    public mutating func insert(_ item: SyncItem) {
        count &+= 1
        sum &+= item.value
    }

    public mutating func remove(_ item: SyncItem) {
        count &-= 1
        sum &-= item.value
    }

    /// What this digest becomes when `old` is replaced by `new`.
    public mutating func replace(_ old: SyncItem, with new: SyncItem) {
        sum = sum &- old.value &+ new.value
    }

    public var encoded: Data {
        var out = Data(capacity: Self.byteCount)
        out.appendUInt32(count)
        out.appendUInt64(UInt64(truncatingIfNeeded: sum >> 64))
        out.appendUInt64(UInt64(truncatingIfNeeded: sum))
        return out
    }

    /// The 16-byte sum, big-endian (how the store keeps it).
    public var sumBytes: Data { encoded.suffix(16) }

    public init(count: UInt32, sumBytes: some DataProtocol) throws(PixieWireError) {
        guard sumBytes.count == 16 else { throw PixieWireError(.malformed, "a digest's sum is 16 bytes") }
        self.count = count
        self.sum = Data(sumBytes).reduce(UInt128(0)) { $0 << 8 | UInt128($1) }
    }

    init?(reading reader: inout WireReader) {
        guard let count = reader.uint32(), let sum = reader.bytes(16) else { return nil }
        self.count = count
        self.sum = sum.reduce(UInt128(0)) { $0 << 8 | UInt128($1) }
    }

    public var description: String { "\(count) rows, \(sumBytes.hexString)" }
}
