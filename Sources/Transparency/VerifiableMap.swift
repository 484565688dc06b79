import Foundation
import SiblingsCrypto

/// The verifiable map: a sparse Merkle tree over 256-bit keys holding one leaf per (label, version), compacted as
/// in Diem's Jellyfish Merkle tree (docs/pixie-protocol.md, "Map"; the design in docs/transparency.md).
///
/// - key(label, version) = SHA-256("pixie/kt/map-key/v1" ‖ u16 len(label) ‖ label ‖ u64 version)
/// - a leaf = SHA-256(0x10 ‖ key ‖ value), where value is the entry's log leaf hash
/// - an inner node = SHA-256(0x11 ‖ left ‖ right); bit d of the key (most significant first) picks the side at
///   depth d
/// - an empty subtree is 32 zero bytes; a subtree holding one leaf is that leaf's hash, so a leaf sits at the
///   shallowest depth where it is alone and a proof carries about log2(n) siblings.
///
/// Kept in memory (about 100 bytes a leaf) and rebuilt from the stored leaves at start-up; a batch of k new leaves
/// costs about k·log2(n) hashes.
public struct VerifiableMap: Sendable {
    /// A child: 0 empty, > 0 inner node `ref - 1`, < 0 leaf `-ref - 1`.
    typealias Ref = Int32

    private var innerLeft: [Ref] = []
    private var innerRight: [Ref] = []
    private var innerHash: [Hash256] = []
    private var innerDirty: [Bool] = []
    private var leafKey: [Hash256] = []
    private var leafValue: [Hash256] = []
    private var leafHash: [Hash256] = []
    private var rootRef: Ref = 0
    private var dirty = false

    public init() {}

    /// The map of `leaves` (key, value), built in one pass over them sorted (start-up); the same tree as
    /// inserting them in any order.
    public init(leaves: [(key: Hash256, value: Hash256)]) throws {
        let sorted = leaves.sorted { $0.key < $1.key }
        for i in sorted.indices.dropFirst() where sorted[i].key == sorted[i - 1].key {
            throw TransparencyError(
                .malformed, "the map already holds key \(sorted[i].key): a (label, version) is written once")
        }
        innerLeft.reserveCapacity(sorted.count)
        innerRight.reserveCapacity(sorted.count)
        innerHash.reserveCapacity(sorted.count)
        innerDirty.reserveCapacity(sorted.count)
        leafKey.reserveCapacity(sorted.count)
        leafValue.reserveCapacity(sorted.count)
        leafHash.reserveCapacity(sorted.count)
        rootRef = build(sorted[...], depth: 0)
    }

    /// Builds the subtree of `leaves` (sorted, all sharing their first `depth` bits) bottom-up.
    private mutating func build(_ leaves: ArraySlice<(key: Hash256, value: Hash256)>, depth: Int) -> Ref {
        if leaves.isEmpty { return 0 }
        if leaves.count == 1 { return newLeaf(key: leaves.first!.key, value: leaves.first!.value) }
        // The first leaf whose bit `depth` is 1 (binary search: sorted keys with a common prefix are ordered by it).
        var low = leaves.startIndex
        var high = leaves.endIndex
        while low < high {
            let mid = (low + high) / 2
            if leaves[mid].key.bit(depth) == 0 { low = mid + 1 } else { high = mid }
        }
        let left = build(leaves[..<low], depth: depth + 1)
        let right = build(leaves[low...], depth: depth + 1)
        innerLeft.append(left)
        innerRight.append(right)
        innerHash.append(VerifiableMap.innerHash(hash(of: left), hash(of: right)))
        innerDirty.append(false)
        return Ref(innerLeft.count)
    }

    /// The number of leaves.
    public var count: Int { leafKey.count }

    /// The key of (label, version).
    public static func key(label: Label, version: UInt64) -> Hash256 {
        var hasher = SHA256()
        var bytes = Data("pixie/kt/map-key/v1".utf8)
        let labelBytes = Data(label.rawValue.utf8)
        bytes.appendInteger(UInt16(labelBytes.count))
        bytes.append(labelBytes)
        bytes.appendInteger(version)
        hasher.update(data: bytes)
        return Hash256(hasher.finalize())
    }

    /// SHA-256(0x10 ‖ key ‖ value).
    public static func leafHash(key: Hash256, value: Hash256) -> Hash256 { Hash256.sha256(prefix: 0x10, key, value) }

    /// SHA-256(0x11 ‖ left ‖ right).
    public static func innerHash(_ left: Hash256, _ right: Hash256) -> Hash256 {
        Hash256.sha256(prefix: 0x11, left, right)
    }

    /// The root hash (32 zero bytes for the empty map).
    public var root: Hash256 {
        precondition(!dirty, "insert rehashes before it returns")
        return hash(of: rootRef)
    }

    /// Adds new leaves; a key already in the map is refused (a (label, version) is written once). The hashes on
    /// the touched paths are recomputed once for the whole batch.
    public mutating func insert(_ leaves: [(key: Hash256, value: Hash256)]) throws {
        for (key, value) in leaves {
            try insertOne(key: key, value: value)
        }
        rehash(rootRef)
        dirty = false
    }

    /// The value stored under `key`, if any.
    public func value(for key: Hash256) -> Hash256? {
        var ref = rootRef
        var depth = 0
        while ref > 0 {
            let i = Int(ref - 1)
            ref = key.bit(depth) == 0 ? innerLeft[i] : innerRight[i]
            depth += 1
        }
        if ref < 0, leafKey[Int(-ref - 1)] == key { return leafValue[Int(-ref - 1)] }
        return nil
    }

    /// The path to `key`: the siblings from the root down and what the path ends at (the leaf of `key`, another
    /// leaf, or an empty subtree).
    public func proof(for key: Hash256) -> MapProof {
        var siblings: [Hash256] = []
        var ref = rootRef
        var depth = 0
        while ref > 0 {
            let i = Int(ref - 1)
            let goLeft = key.bit(depth) == 0
            siblings.append(hash(of: goLeft ? innerRight[i] : innerLeft[i]))
            ref = goLeft ? innerLeft[i] : innerRight[i]
            depth += 1
        }
        if ref < 0 {
            let leaf = Int(-ref - 1)
            return MapProof(siblings: siblings, terminal: .leaf(key: leafKey[leaf], value: leafValue[leaf]))
        }
        return MapProof(siblings: siblings, terminal: .empty)
    }

    // MARK: - Internals

    private func hash(of ref: Ref) -> Hash256 {
        if ref == 0 { return .zero }
        if ref < 0 { return leafHash[Int(-ref - 1)] }
        return innerHash[Int(ref - 1)]
    }

    private mutating func newInner(left: Ref, right: Ref) -> Ref {
        innerLeft.append(left)
        innerRight.append(right)
        innerHash.append(.zero)
        innerDirty.append(true)
        return Ref(innerLeft.count)
    }

    private mutating func newLeaf(key: Hash256, value: Hash256) -> Ref {
        leafKey.append(key)
        leafValue.append(value)
        leafHash.append(VerifiableMap.leafHash(key: key, value: value))
        return -Ref(leafKey.count)
    }

    /// The subtree that replaces the leaf `existing` at `depth` once `key` joins it: a chain of inner nodes down
    /// to the first bit where the keys differ.
    private mutating func split(existing: Ref, key: Hash256, value: Hash256, depth: Int) throws -> Ref {
        let other = leafKey[Int(-existing - 1)]
        let differ = other.firstDifferingBit(from: key)
        guard differ < 256 else {
            throw TransparencyError(.malformed, "the map already holds key \(key): a (label, version) is written once")
        }
        let leaf = newLeaf(key: key, value: value)
        var ref = key.bit(differ) == 0 ? newInner(left: leaf, right: existing) : newInner(left: existing, right: leaf)
        var d = differ - 1
        while d >= depth {
            ref = key.bit(d) == 0 ? newInner(left: ref, right: 0) : newInner(left: 0, right: ref)
            d -= 1
        }
        return ref
    }

    private mutating func insertOne(key: Hash256, value: Hash256) throws {
        dirty = true
        if rootRef == 0 {
            rootRef = newLeaf(key: key, value: value)
            return
        }
        if rootRef < 0 {
            rootRef = try split(existing: rootRef, key: key, value: value, depth: 0)
            return
        }
        var i = Int(rootRef - 1)
        var depth = 0
        while true {
            innerDirty[i] = true
            let goLeft = key.bit(depth) == 0
            let child = goLeft ? innerLeft[i] : innerRight[i]
            if child > 0 {
                i = Int(child - 1)
                depth += 1
                continue
            }
            let replacement =
                child == 0
                ? newLeaf(key: key, value: value) : try split(existing: child, key: key, value: value, depth: depth + 1)
            if goLeft { innerLeft[i] = replacement } else { innerRight[i] = replacement }
            return
        }
    }

    private mutating func rehash(_ ref: Ref) {
        guard ref > 0 else { return }
        let i = Int(ref - 1)
        guard innerDirty[i] else { return }
        rehash(innerLeft[i])
        rehash(innerRight[i])
        innerHash[i] = VerifiableMap.innerHash(hash(of: innerLeft[i]), hash(of: innerRight[i]))
        innerDirty[i] = false
    }
}

/// A path in the map from the root to where a key's leaf is or would be (docs/pixie-protocol.md, "Map proof").
public struct MapProof: Sendable, Hashable {
    public enum Terminal: Sendable, Hashable {
        /// The path ends at an empty subtree.
        case empty
        /// The path ends at a leaf (the key's own, or another key's sharing the path's prefix).
        case leaf(key: Hash256, value: Hash256)
    }

    /// The sibling hashes from depth 0 (next to the root) down.
    public let siblings: [Hash256]
    public let terminal: Terminal

    public init(siblings: [Hash256], terminal: Terminal) {
        self.siblings = siblings
        self.terminal = terminal
    }

    /// The root this path leads to for `key`, or nil if the path is not well formed for `key` (too long, another
    /// leaf that does not share the path's prefix, a leaf or empty subtree next to an empty sibling, which a
    /// compacted tree never has).
    public func root(for key: Hash256) -> Hash256? {
        guard siblings.count <= 256 else { return nil }
        var hash: Hash256
        switch terminal {
        case .empty:
            hash = .zero
        case .leaf(let leafKey, let value):
            if leafKey != key && leafKey.firstDifferingBit(from: key) < siblings.count { return nil }
            hash = VerifiableMap.leafHash(key: leafKey, value: value)
        }
        if let last = siblings.last, last == .zero { return nil }
        for depth in stride(from: siblings.count - 1, through: 0, by: -1) {
            hash =
                key.bit(depth) == 0
                ? VerifiableMap.innerHash(hash, siblings[depth]) : VerifiableMap.innerHash(siblings[depth], hash)
        }
        return hash
    }

    /// Encoding: u16 depth ‖ bitmap (ceil(depth/8) bytes, bit i = sibling i is not empty, most significant bit
    /// first) ‖ the non-empty siblings ‖ terminal: 0x00 empty, or 0x01 ‖ key ‖ value.
    public var encoded: Data {
        var out = Data()
        out.appendInteger(UInt16(siblings.count))
        var bitmap = Data(count: (siblings.count + 7) / 8)
        for (i, sibling) in siblings.enumerated() where sibling != .zero { bitmap[i >> 3] |= 0x80 >> UInt8(i & 7) }
        out.append(bitmap)
        for sibling in siblings where sibling != .zero { out.append(sibling.rawRepresentation) }
        switch terminal {
        case .empty:
            out.append(0x00)
        case .leaf(let key, let value):
            out.append(0x01)
            out.append(key.rawRepresentation)
            out.append(value.rawRepresentation)
        }
        return out
    }

    init(reading reader: inout ByteReader) throws {
        let depth = Int(try reader.integer(UInt16.self))
        guard depth <= 256 else { throw TransparencyError(.malformed, "a map proof is at most 256 deep, not \(depth)") }
        let bitmap = try reader.bytes((depth + 7) / 8)
        var siblings: [Hash256] = []
        for i in 0..<depth {
            let present = bitmap[bitmap.startIndex + i >> 3] & (0x80 >> UInt8(i & 7)) != 0
            siblings.append(present ? try reader.hash() : .zero)
        }
        if depth % 8 != 0, let last = bitmap.last, last & (0xFF >> UInt8(depth % 8)) != 0 {
            throw TransparencyError(.malformed, "a map proof's bitmap has bits set past its depth")
        }
        switch try reader.integer(UInt8.self) {
        case 0x00: terminal = .empty
        case 0x01: terminal = .leaf(key: try reader.hash(), value: try reader.hash())
        case let other: throw TransparencyError(.malformed, "a map proof's terminal is 0x00 or 0x01, not \(other)")
        }
        self.siblings = siblings
    }

    public init(encoded: some DataProtocol) throws {
        var reader = ByteReader(Data(encoded), what: "a map proof")
        try self.init(reading: &reader)
        try reader.finish()
    }
}
