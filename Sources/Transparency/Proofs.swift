import Foundation

/// RFC 9162 inclusion proof of one log leaf. Encoding: u64 index ‖ u64 tree size ‖ u8 count ‖ count × 32 bytes.
public struct InclusionProof: Sendable, Hashable {
    public let index: UInt64
    public let treeSize: UInt64
    public let hashes: [Hash256]

    public init(index: UInt64, treeSize: UInt64, hashes: [Hash256]) {
        self.index = index
        self.treeSize = treeSize
        self.hashes = hashes
    }

    public var encoded: Data {
        var out = Data()
        out.appendInteger(index)
        out.appendInteger(treeSize)
        out.append(UInt8(hashes.count))
        for hash in hashes { out.append(hash.rawRepresentation) }
        return out
    }

    init(reading reader: inout ByteReader) throws {
        index = try reader.integer(UInt64.self)
        treeSize = try reader.integer(UInt64.self)
        hashes = try reader.hashes(Int(try reader.integer(UInt8.self)))
    }

    public init(encoded: some DataProtocol) throws {
        var reader = ByteReader(Data(encoded), what: "an inclusion proof")
        try self.init(reading: &reader)
        try reader.finish()
    }

    /// True if the proof shows `leafHash` at ``index`` under `root` of a tree of ``treeSize`` leaves.
    public func verify(leafHash: Hash256, root: Hash256) -> Bool {
        MerkleLog.verifyInclusion(leafHash: leafHash, index: index, size: treeSize, proof: hashes, root: root)
    }
}

/// RFC 9162 consistency proof between two tree sizes. Encoding: u64 old size ‖ u64 new size ‖ u8 count ‖
/// count × 32 bytes.
public struct ConsistencyProof: Sendable, Hashable {
    public let oldSize: UInt64
    public let newSize: UInt64
    public let hashes: [Hash256]

    public init(oldSize: UInt64, newSize: UInt64, hashes: [Hash256]) {
        self.oldSize = oldSize
        self.newSize = newSize
        self.hashes = hashes
    }

    public var encoded: Data {
        var out = Data()
        out.appendInteger(oldSize)
        out.appendInteger(newSize)
        out.append(UInt8(hashes.count))
        for hash in hashes { out.append(hash.rawRepresentation) }
        return out
    }

    public init(encoded: some DataProtocol) throws {
        var reader = ByteReader(Data(encoded), what: "a consistency proof")
        oldSize = try reader.integer(UInt64.self)
        newSize = try reader.integer(UInt64.self)
        hashes = try reader.hashes(Int(try reader.integer(UInt8.self)))
        try reader.finish()
    }

    /// True if the proof shows (`oldSize`, `oldRoot`) is a prefix of (`newSize`, `newRoot`).
    public func verify(oldRoot: Hash256, newRoot: Hash256) -> Bool {
        MerkleLog.verifyConsistency(
            oldSize: oldSize, newSize: newSize, oldRoot: oldRoot, newRoot: newRoot, proof: hashes)
    }
}

/// The answer to "what is `label` bound to?" at one checkpoint (docs/pixie-protocol.md, "Proofs"):
/// membership of (label, n) with its entry, non-membership of (label, n + 1), both against the checkpoint's map
/// root; for a label never written, n = 0 and only the non-membership of (label, 1). Optionally the entry's
/// inclusion in the log.
///
/// Encoding: u16 len(label) ‖ label ‖ u64 n ‖ [if n > 0: u32 len(entry) ‖ entry ‖ membership map proof] ‖
/// non-membership map proof ‖ 0x00, or 0x01 ‖ inclusion proof.
public struct LookupProof: Sendable, Hashable {
    public let label: Label
    /// The latest version's entry, nil if the label was never written.
    public let entry: Entry?
    public let membership: MapProof?
    public let nonMembership: MapProof
    public let inclusion: InclusionProof?

    public init(label: Label, entry: Entry?, membership: MapProof?, nonMembership: MapProof, inclusion: InclusionProof?)
    {
        self.label = label
        self.entry = entry
        self.membership = membership
        self.nonMembership = nonMembership
        self.inclusion = inclusion
    }

    public var encoded: Data {
        var out = Data()
        let labelBytes = Data(label.rawValue.utf8)
        out.appendInteger(UInt16(labelBytes.count))
        out.append(labelBytes)
        out.appendInteger(entry?.version ?? 0)
        if let entry, let membership {
            let bytes = entry.encoded
            out.appendInteger(UInt32(bytes.count))
            out.append(bytes)
            out.append(membership.encoded)
        }
        out.append(nonMembership.encoded)
        if let inclusion {
            out.append(0x01)
            out.append(inclusion.encoded)
        } else {
            out.append(0x00)
        }
        return out
    }

    public init(encoded: some DataProtocol) throws {
        var reader = ByteReader(Data(encoded), what: "a lookup proof")
        let labelBytes = try reader.bytes(Int(try reader.integer(UInt16.self)))
        guard let text = String(data: labelBytes, encoding: .utf8) else {
            throw TransparencyError(.malformed, "the lookup proof's label is not UTF-8")
        }
        label = try Label(text)
        let version = try reader.integer(UInt64.self)
        if version > 0 {
            let entry = try Entry(encoded: try reader.bytes(Int(try reader.integer(UInt32.self))))
            guard entry.version == version else {
                throw TransparencyError(
                    .malformed, "the lookup proof's entry is version \(entry.version), not \(version)")
            }
            self.entry = entry
            membership = try MapProof(reading: &reader)
        } else {
            entry = nil
            membership = nil
        }
        nonMembership = try MapProof(reading: &reader)
        switch try reader.integer(UInt8.self) {
        case 0x00: inclusion = nil
        case 0x01: inclusion = try InclusionProof(reading: &reader)
        case let other:
            throw TransparencyError(.malformed, "the lookup proof's inclusion flag is 0x00 or 0x01, not \(other)")
        }
        try reader.finish()
    }
}

/// What a server returns for "what is `label` bound to?": the latest checkpoint's signed note, a consistency
/// proof from the size the device pinned, and the lookup proof. Over HTTP: a JSON object with `checkpoint`
/// (the note, a string), `consistency` (base64url of ``ConsistencyProof/encoded``, absent when not needed) and
/// `lookup` (base64url of ``LookupProof/encoded``).
public struct LookupAnswer: Sendable, Hashable {
    public let checkpoint: String
    public let consistencyProof: ConsistencyProof?
    public let lookup: LookupProof

    public init(checkpoint: String, consistencyProof: ConsistencyProof?, lookup: LookupProof) {
        self.checkpoint = checkpoint
        self.consistencyProof = consistencyProof
        self.lookup = lookup
    }
}
