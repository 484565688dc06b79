import Foundation

/// The JSON bodies of the key-transparency routes under /v1/kt (docs/pixie-protocol.md, "Key transparency";
/// proofs encoded as its "Proofs" says). The checkpoint itself is a text/plain signed note.
public enum TransparencyAPI {}

extension TransparencyAPI {
    /// 200 to GET /v1/kt/checkpoints?after=&limit=: the sizes of the checkpoints the log signed.
    public struct SizesResponse: Codable, Sendable, Equatable {
        public var sizes: [UInt64]
        public init(sizes: [UInt64]) { self.sizes = sizes }
    }

    /// 200 to GET /v1/kt/consistency?from=&to=: an RFC 9162 §2.1.4 consistency proof.
    public struct ProofResponse: Codable, Sendable, Equatable {
        public var proof: Base64URLBytes
        public init(proof: Base64URLBytes) { self.proof = proof }
    }

    /// 200 to GET /v1/kt/entries?start=&end=: encoded log entries, for auditors.
    public struct EntriesResponse: Codable, Sendable, Equatable {
        public var entries: [Base64URLBytes]
        public init(entries: [Base64URLBytes]) { self.entries = entries }
    }

    /// POST /v1/kt/lookup: a label's value at the latest checkpoint, proven.
    public struct LookupRequest: Codable, Sendable, Equatable {
        /// A ``KeyTransparencyLabel`` (for example `devices/<kt_handle>`).
        public var label: String
        /// The size of the checkpoint the device pinned; the answer then carries a consistency proof from it.
        public var since: UInt64?

        public init(label: String, since: UInt64? = nil) {
            self.label = label
            self.since = since
        }
    }

    /// 200 to ``LookupRequest``: everything a verifier needs in one answer.
    public struct LookupResponse: Codable, Sendable, Equatable {
        /// The signed note of the latest checkpoint.
        public var checkpoint: String
        /// From `since` to the checkpoint; absent without `since`.
        public var consistency: Base64URLBytes?
        public var lookup: Base64URLBytes

        public init(checkpoint: String, consistency: Base64URLBytes?, lookup: Base64URLBytes) {
            self.checkpoint = checkpoint
            self.consistency = consistency
            self.lookup = lookup
        }
    }
}
