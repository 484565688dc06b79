import Foundation
import PixieWire
import Transparency

extension LookupAnswer {
    /// The proofs of a `POST /v1/kt/lookup` answer, decoded for ``TransparencyVerifier/verify(label:answer:)``.
    /// Throws a ``TransparencyError`` if a proof is not in the encoding docs/pixie-protocol.md ("Proofs") gives.
    public init(_ response: TransparencyAPI.LookupResponse) throws {
        self.init(
            checkpoint: response.checkpoint,
            consistencyProof: try response.consistency.map { try ConsistencyProof(encoded: $0.data) },
            lookup: try LookupProof(encoded: response.lookup.data))
    }
}
