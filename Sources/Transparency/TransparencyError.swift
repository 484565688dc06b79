import Foundation

/// The one error type of the Transparency module. Each way a log can misbehave has its own code, so a device or
/// an auditor can say what happened (docs/transparency.md, "Verifier rules and errors").
///
/// Shaped like `PixieWireError`: a `code` that can grow, a `reason` for a person, and where it was thrown.
public struct TransparencyError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }

        /// Bytes or text that are not the structure they claim to be (checkpoint, proof, entry, label).
        public static let malformed = Code("malformed")
        /// The checkpoint's signature from the pinned log key is missing or does not verify (either half of the
        /// hybrid signature failing counts).
        public static let badSignature = Code("bad_signature")
        /// The server gave no proof, so there is no answer (fail closed).
        public static let missingProof = Code("missing_proof")
        /// Two checkpoints of one size with different roots: the log showed two histories.
        public static let fork = Code("fork")
        /// A checkpoint smaller than the one pinned: the log went back in time.
        public static let rollback = Code("rollback")
        /// A newer checkpoint whose consistency proof does not show it grew from the pinned one.
        public static let inconsistent = Code("inconsistent")
        /// A lookup proof for a label other than the one asked about.
        public static let wrongLabel = Code("wrong_label")
        /// A lookup answered with an old value: the proof shows a newer version of the label exists.
        public static let staleValue = Code("stale_value")
        /// A Merkle proof (inclusion, consistency, map path) that does not lead to the signed root.
        public static let badProof = Code("bad_proof")
        /// The log's entries do not hash to the checkpoint's log root (an entry rewritten or missing).
        public static let logRootMismatch = Code("log_root_mismatch")
        /// The map recomputed from the entries differs from the checkpoint's map root (an update withheld from
        /// the map, or a binding added without an entry).
        public static let mapRootMismatch = Code("map_root_mismatch")
        /// Versions of a label that do not run 1, 2, 3, ... without gaps.
        public static let versionGap = Code("version_gap")
        /// A request the log cannot answer (a size beyond the tree, an unknown checkpoint).
        public static let outOfRange = Code("out_of_range")
        /// A logged value breaks its service's rule (``AuditRule``): an account key that changed without a rotation
        /// signed by the old key and the new.
        public static let badValue = Code("bad_value")

        public var description: String { rawValue }
    }

    public let code: Code
    public let reason: String
    public let file: String
    public let line: UInt

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String { "TransparencyError.\(code): \(reason) (\(file):\(line))" }

    public static func == (lhs: TransparencyError, rhs: TransparencyError) -> Bool {
        lhs.code == rhs.code && lhs.reason == rhs.reason
    }
}
