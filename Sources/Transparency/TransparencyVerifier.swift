import Foundation

/// The device's side (and the auditor's first step): pins the last checkpoint it accepted, demands a
/// consistency proof for every newer one, and verifies lookup proofs against it. Every failure is a thrown
/// ``TransparencyError`` whose code says what happened; nothing is ever accepted by default (docs/transparency.md,
/// "Verifier rules and errors").
///
/// Persist ``state`` after every accepted checkpoint and pass it back to ``init(logKey:state:)``.
public struct TransparencyVerifier: Sendable {
    public let logKey: LogKey
    /// The checkpoint accepted last; nil before the first.
    public private(set) var pinned: Checkpoint?

    /// A verifier for the log `logKey` with nothing pinned yet (a new device).
    public init(logKey: LogKey) {
        self.logKey = logKey
        self.pinned = nil
    }

    /// A verifier for the log `logKey`, resuming from `state` (nil or empty for a new device).
    public init(logKey: LogKey, state: Data?) throws {
        self.logKey = logKey
        if let state, !state.isEmpty {
            guard let note = String(data: state, encoding: .utf8) else {
                throw TransparencyError(.malformed, "the saved verifier state is not a checkpoint note")
            }
            pinned = try Checkpoint(note: note, verifyingWith: logKey)
        }
    }

    /// A verifier that has pinned `pinned` (the auditor's).
    init(logKey: LogKey, pinned: Checkpoint?) {
        self.logKey = logKey
        self.pinned = pinned
    }

    /// What to persist: the pinned checkpoint's signed note (UTF-8), empty before the first.
    public var state: Data { Data((pinned?.note ?? "").utf8) }

    /// Accepts `note` as the log's checkpoint and pins it, if it is signed by the log's key (both halves) and
    /// grew from the pinned one as `consistencyProof` shows.
    ///
    /// Throws `.malformed`, `.badSignature`, `.rollback` (smaller than pinned), `.fork` (same size, another root),
    /// `.missingProof` (larger, no consistency proof), `.inconsistent` (the proof does not verify or is for other
    /// sizes).
    @discardableResult
    public mutating func accept(checkpoint note: String, consistencyProof: ConsistencyProof?) throws -> Checkpoint {
        let new = try Checkpoint(note: note, verifyingWith: logKey)
        guard let old = pinned else {
            pinned = new
            return new
        }
        if new.size < old.size {
            throw TransparencyError(
                .rollback,
                "the log answered with a checkpoint of \(new.size) entries after this device saw \(old.size): it "
                    + "went back in time; do not trust the answer")
        }
        if new.size == old.size {
            guard new.logRoot == old.logRoot, new.mapRoot == old.mapRoot else {
                throw TransparencyError(
                    .fork,
                    "the log signed two different checkpoints of \(new.size) entries: it shows different histories "
                        + "to different devices; keep both notes as evidence")
            }
            return old
        }
        guard let consistencyProof else {
            throw TransparencyError(
                .missingProof,
                "the log moved from \(old.size) to \(new.size) entries without a consistency proof: no answer")
        }
        guard consistencyProof.oldSize == old.size, consistencyProof.newSize == new.size,
            consistencyProof.verify(oldRoot: old.logRoot, newRoot: new.logRoot)
        else {
            throw TransparencyError(
                .inconsistent,
                "the checkpoint of \(new.size) entries does not extend the pinned one of \(old.size): the log "
                    + "rewrote its history (a fork); keep both notes as evidence")
        }
        pinned = new
        return new
    }

    /// Verifies `proof` as the answer for `label` at the pinned checkpoint and returns the label's latest entry
    /// (nil if the label was never written).
    ///
    /// Throws `.missingProof` (no proof, or no checkpoint pinned), `.wrongLabel`, `.staleValue` (the proof shows a
    /// newer version exists), `.badProof` (a path that does not lead to the signed map root, or a bad inclusion
    /// proof).
    public func verifyLookup(_ proof: LookupProof?, for label: Label) throws -> Entry? {
        guard let proof else {
            throw TransparencyError(.missingProof, "the server sent no proof for \(label): no answer")
        }
        guard let checkpoint = pinned else {
            throw TransparencyError(.missingProof, "no checkpoint is pinned: accept one before verifying lookups")
        }
        guard proof.label == label, proof.entry.map({ $0.label == label }) ?? true else {
            throw TransparencyError(
                .wrongLabel, "the server answered about \(proof.entry?.label ?? proof.label), not \(label)")
        }
        let version = proof.entry?.version ?? 0
        if let entry = proof.entry {
            let key = entry.mapKey
            guard let membership = proof.membership, membership.terminal == .leaf(key: key, value: entry.leafHash),
                membership.root(for: key) == checkpoint.mapRoot
            else {
                throw TransparencyError(
                    .badProof,
                    "the proof does not show version \(version) of \(label) in the map of checkpoint \(checkpoint.size)"
                )
            }
        }
        let next = VerifiableMap.key(label: label, version: version + 1)
        if case .leaf(let key, _) = proof.nonMembership.terminal, key == next {
            throw TransparencyError(
                .staleValue,
                "the server answered version \(version) of \(label), but its own proof shows version \(version + 1) "
                    + "exists: an old value after an update")
        }
        guard proof.nonMembership.root(for: next) == checkpoint.mapRoot else {
            throw TransparencyError(
                .badProof,
                "the proof does not show that version \(version) is the latest of \(label) at checkpoint "
                    + "\(checkpoint.size)")
        }
        if let inclusion = proof.inclusion {
            guard let entry = proof.entry, inclusion.treeSize == checkpoint.size,
                inclusion.verify(leafHash: entry.leafHash, root: checkpoint.logRoot)
            else {
                throw TransparencyError(
                    .badProof, "the inclusion proof does not show the entry in the log of checkpoint \(checkpoint.size)"
                )
            }
        }
        return proof.entry
    }

    /// The device's whole check of one answer: accept the server's checkpoint (with the consistency proof from the
    /// pinned one), then verify the lookup against it. State changes only if both pass.
    public mutating func verify(
        label: Label, checkpoint note: String, consistencyProof: ConsistencyProof?, lookup: LookupProof?
    ) throws -> Entry? {
        var copy = self
        try copy.accept(checkpoint: note, consistencyProof: consistencyProof)
        let entry = try copy.verifyLookup(lookup, for: label)
        self = copy
        return entry
    }

    /// ``verify(label:checkpoint:consistencyProof:lookup:)`` on a server's ``LookupAnswer``; no answer is
    /// `.missingProof`.
    public mutating func verify(label: Label, answer: LookupAnswer?) throws -> Entry? {
        guard let answer else {
            throw TransparencyError(.missingProof, "the server sent no proof for \(label): no answer")
        }
        return try verify(
            label: label, checkpoint: answer.checkpoint, consistencyProof: answer.consistencyProof,
            lookup: answer.lookup)
    }
}
