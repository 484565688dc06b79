import Foundation
import PixieWire
import Transparency

extension TransparencyVerifier {
    /// A new device's verifier, pinned to the checkpoint its app shipped with (``PixieWire/TrustBundle``), so that
    /// its very first answer from the log must extend a history the app already knows: the seed's "one moment with
    /// no prior state to contradict the server" (000_e422bd9a7c930342.txt) has a prior state after all. Every later
    /// checkpoint must be consistent with it (``accept(checkpoint:consistencyProof:)``): one of the same size with
    /// another root is a `fork`, a smaller one a `rollback`, a larger one that does not extend it `inconsistent`.
    ///
    /// Throws when the bundle ships no checkpoint (a version-1 bundle: make a new one with `pixie-server
    /// trust-bundle`), or when its checkpoint is not signed by the bundle's log key under its origin.
    public init(trustBundle: TrustBundle) throws {
        guard let note = trustBundle.transparencyCheckpoint else {
            throw TransparencyError(
                .missingProof,
                "the trust bundle ships no transparency checkpoint, so a new device would trust the first one the "
                    + "server shows it; ship a bundle from `pixie-server trust-bundle` (version 2)")
        }
        let logKey = try LogKey(origin: trustBundle.transparencyLogOrigin, publicKey: trustBundle.transparencyLogKey)
        try self.init(logKey: logKey, state: Data(note.utf8))
    }
}
