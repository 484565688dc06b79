import Foundation
import SiblingsCrypto

/// Where a log's hashes live: the hash of every complete, aligned subtree (`level` = log2 of its size, `index`
/// = its first leaf / size). Level 0 holds the leaf hashes. ``MemoryLogStore`` and ``SQLLogStore`` implement it;
/// ``MerkleLog`` does all the math on top, so there is one implementation of RFC 9162 for both.
public protocol MerkleHashReader {
    /// The hash of leaves `index << level ..< (index + 1) << level`, which must be complete.
    func subtreeHash(level: Int, index: UInt64) throws -> Hash256
}

/// RFC 9162 §2.1 Merkle tree hashing, proofs and their verification, over any ``MerkleHashReader``.
///
/// leaf = SHA-256(0x00 ‖ entry), node = SHA-256(0x01 ‖ left ‖ right), the empty tree's root = SHA-256("").
/// Every range the RFC's recursion visits that is complete is one read, so a root or a proof reads O(log n)
/// stored hashes.
public enum MerkleLog {
    /// SHA-256(0x00 ‖ entry) (RFC 9162 §2.1.1).
    public static func leafHash(_ entry: some DataProtocol) -> Hash256 {
        var hasher = SHA256()
        withUnsafeBytes(of: UInt8(0)) { hasher.update(bufferPointer: $0) }
        hasher.update(data: entry)
        return Hash256(hasher.finalize())
    }

    /// SHA-256(0x01 ‖ left ‖ right).
    public static func nodeHash(_ left: Hash256, _ right: Hash256) -> Hash256 {
        Hash256.sha256(prefix: 0x01, left, right)
    }

    /// The root of the empty tree, SHA-256 of no bytes.
    public static let emptyRoot = Hash256(SHA256.hash(data: Data()))

    /// MTH(D[0:size]).
    public static func root(size: UInt64, _ reader: some MerkleHashReader) throws -> Hash256 {
        size == 0 ? emptyRoot : try rangeHash(start: 0, count: size, reader)
    }

    /// The inclusion proof of leaf `index` in the tree of `size` leaves, PATH(m, D[n]) (RFC 9162 §2.1.3.1),
    /// ordered from the leaf up.
    public static func inclusionProof(
        index: UInt64, size: UInt64, _ reader: some MerkleHashReader
    ) throws
        -> [Hash256]
    {
        guard index < size else {
            throw TransparencyError(.outOfRange, "leaf \(index) is not in a tree of \(size) leaves")
        }
        var path: [Hash256] = []
        try appendPath(index: index, start: 0, count: size, reader, to: &path)
        return path
    }

    /// The consistency proof from the tree of `oldSize` leaves to the tree of `newSize` (RFC 9162 §2.1.4.1);
    /// empty when the sizes are equal or `oldSize` is 0.
    public static func consistencyProof(
        from oldSize: UInt64, to newSize: UInt64, _ reader: some MerkleHashReader
    )
        throws -> [Hash256]
    {
        guard oldSize <= newSize else {
            throw TransparencyError(.outOfRange, "no consistency proof from \(oldSize) leaves to fewer (\(newSize))")
        }
        var proof: [Hash256] = []
        if oldSize > 0 && oldSize < newSize {
            try appendSubproof(m: oldSize, start: 0, count: newSize, complete: true, reader, to: &proof)
        }
        return proof
    }

    /// RFC 9162 §2.1.3.2: true if `proof` shows `leafHash` at `index` in the tree of `size` leaves with `root`.
    public static func verifyInclusion(
        leafHash: Hash256, index: UInt64, size: UInt64, proof: [Hash256], root: Hash256
    ) -> Bool {
        guard index < size else { return false }
        var fn = index
        var sn = size - 1
        var r = leafHash
        for p in proof {
            if sn == 0 { return false }
            if fn & 1 == 1 || fn == sn {
                r = nodeHash(p, r)
                if fn & 1 == 0 {
                    repeat {
                        fn >>= 1
                        sn >>= 1
                    } while fn & 1 == 0 && fn != 0
                }
            } else {
                r = nodeHash(r, p)
            }
            fn >>= 1
            sn >>= 1
        }
        return sn == 0 && r == root
    }

    /// RFC 9162 §2.1.4.2: true if `proof` shows the tree (`oldSize`, `oldRoot`) is a prefix of (`newSize`,
    /// `newRoot`). Equal sizes need an empty proof and equal roots; from the empty tree, an empty proof.
    public static func verifyConsistency(
        oldSize: UInt64, newSize: UInt64, oldRoot: Hash256, newRoot: Hash256, proof: [Hash256]
    ) -> Bool {
        guard oldSize <= newSize else { return false }
        if oldSize == newSize { return proof.isEmpty && oldRoot == newRoot }
        if oldSize == 0 { return proof.isEmpty && oldRoot == emptyRoot }
        guard !proof.isEmpty else { return false }
        var path = proof
        if oldSize & (oldSize - 1) == 0 { path.insert(oldRoot, at: 0) }
        var fn = oldSize - 1
        var sn = newSize - 1
        while fn & 1 == 1 {
            fn >>= 1
            sn >>= 1
        }
        var fr = path[0]
        var sr = path[0]
        for c in path.dropFirst() {
            if sn == 0 { return false }
            if fn & 1 == 1 || fn == sn {
                fr = nodeHash(c, fr)
                sr = nodeHash(c, sr)
                if fn & 1 == 0 {
                    repeat {
                        fn >>= 1
                        sn >>= 1
                    } while fn & 1 == 0 && fn != 0
                }
            } else {
                sr = nodeHash(sr, c)
            }
            fn >>= 1
            sn >>= 1
        }
        return fr == oldRoot && sr == newRoot && sn == 0
    }

    // MARK: - The recursion over ranges

    /// The largest power of two smaller than `n` (n ≥ 2).
    static func split(_ n: UInt64) -> UInt64 { UInt64(1) << (63 - (n - 1).leadingZeroBitCount) }

    /// MTH(D[start:start+count]); `start` is aligned as the RFC's recursion always leaves it.
    static func rangeHash(start: UInt64, count: UInt64, _ reader: some MerkleHashReader) throws -> Hash256 {
        if count & (count - 1) == 0 {
            let level = count.trailingZeroBitCount
            return try reader.subtreeHash(level: level, index: start >> UInt64(level))
        }
        let k = split(count)
        return nodeHash(
            try rangeHash(start: start, count: k, reader), try rangeHash(start: start + k, count: count - k, reader))
    }

    private static func appendPath(
        index: UInt64, start: UInt64, count: UInt64, _ reader: some MerkleHashReader, to path: inout [Hash256]
    ) throws {
        if count == 1 { return }
        let k = split(count)
        if index < k {
            try appendPath(index: index, start: start, count: k, reader, to: &path)
            path.append(try rangeHash(start: start + k, count: count - k, reader))
        } else {
            try appendPath(index: index - k, start: start + k, count: count - k, reader, to: &path)
            path.append(try rangeHash(start: start, count: k, reader))
        }
    }

    private static func appendSubproof(
        m: UInt64, start: UInt64, count: UInt64, complete: Bool, _ reader: some MerkleHashReader,
        to proof: inout [Hash256]
    ) throws {
        if m == count {
            if !complete { proof.append(try rangeHash(start: start, count: count, reader)) }
            return
        }
        let k = split(count)
        if m <= k {
            try appendSubproof(m: m, start: start, count: k, complete: complete, reader, to: &proof)
            proof.append(try rangeHash(start: start + k, count: count - k, reader))
        } else {
            try appendSubproof(m: m - k, start: start + k, count: count - k, complete: false, reader, to: &proof)
            proof.append(try rangeHash(start: start, count: k, reader))
        }
    }
}

/// The right edge of a log: the roots of its complete subtrees from the largest to the smallest (one per set bit
/// of the size). Appending a leaf combines equal-sized subtrees and reports every new complete subtree hash,
/// which is what a store writes: O(log n) per append, two on average (the leaf, and one more).
public struct LogFrontier: Sendable, Equatable {
    public private(set) var size: UInt64
    /// (level, hash) from the leftmost (largest) subtree to the rightmost.
    public private(set) var subtrees: [(level: Int, hash: Hash256)]

    public init() {
        size = 0
        subtrees = []
    }

    /// The frontier of a tree of `size` leaves, read from `reader` (one read per set bit of `size`).
    public init(size: UInt64, _ reader: some MerkleHashReader) throws {
        self.size = size
        subtrees = []
        var start: UInt64 = 0
        for level in stride(from: 63, through: 0, by: -1) where size >> UInt64(level) & 1 == 1 {
            subtrees.append((level, try reader.subtreeHash(level: level, index: start >> UInt64(level))))
            start += UInt64(1) << UInt64(level)
        }
    }

    /// Appends the leaf with `leafHash`; calls `write(level, index, hash)` for each complete subtree it makes,
    /// the leaf first.
    public mutating func append(leafHash: Hash256, write: (Int, UInt64, Hash256) throws -> Void) rethrows {
        var hash = leafHash
        var level = 0
        var index = size
        try write(0, index, hash)
        while index & 1 == 1, let last = subtrees.last, last.level == level {
            subtrees.removeLast()
            hash = MerkleLog.nodeHash(last.hash, hash)
            level += 1
            index >>= 1
            try write(level, index, hash)
        }
        subtrees.append((level, hash))
        size += 1
    }

    /// MTH of the whole tree: the subtrees folded from the right.
    public var root: Hash256 {
        guard var hash = subtrees.last?.hash else { return MerkleLog.emptyRoot }
        for subtree in subtrees.dropLast().reversed() { hash = MerkleLog.nodeHash(subtree.hash, hash) }
        return hash
    }

    public static func == (lhs: LogFrontier, rhs: LogFrontier) -> Bool {
        lhs.size == rhs.size && lhs.subtrees.map(\.hash) == rhs.subtrees.map(\.hash)
    }
}

/// A log kept in memory: every complete subtree hash, level by level. For tests and the auditor.
public struct MemoryLogStore: MerkleHashReader, Sendable {
    private var levels: [[Hash256]] = []
    public private(set) var frontier = LogFrontier()

    public init() {}

    public var size: UInt64 { frontier.size }
    public var root: Hash256 { frontier.root }

    /// Appends the leaf whose hash is `leafHash` (``MerkleLog/leafHash(_:)`` of the entry).
    public mutating func append(leafHash: Hash256) {
        frontier.append(leafHash: leafHash) { level, index, hash in
            if levels.count <= level { levels.append([]) }
            precondition(levels[level].count == Int(index))
            levels[level].append(hash)
        }
    }

    public func subtreeHash(level: Int, index: UInt64) throws -> Hash256 {
        guard level < levels.count, index < levels[level].count else {
            throw TransparencyError(.outOfRange, "no complete subtree at level \(level), index \(index)")
        }
        return levels[level][Int(index)]
    }
}
