import Foundation
import SiblingsCrypto

/// The checks every hybrid-signed credential of Pixie shares (PhoneOwnershipCert, SenderCert), in the order
/// docs/pixie-protocol.md gives: a pinned key at all, a pinned key with the credential's key id, both halves of
/// the signature over the signed prefix for the credential's context, then the validity window.
enum SignedCredential {
    struct Fields {
        /// "PhoneOwnershipCert", "SenderCert": for the error reasons.
        let name: String
        /// What the holder should do when the credential is refused (ends each reason).
        let remedy: String
        let raw: Data
        let signedByteCount: Int
        let signerKeyID: Data
        let issuedAt: Date
        let expiresAt: Date
        let context: Data
    }

    static func verify(
        _ fields: Fields, pinnedKeys: [HybridSignature.PublicKey], allowedClockSkew: TimeInterval, now: Date
    ) throws(PixieWireError) {
        guard !pinnedKeys.isEmpty else {
            throw PixieWireError(
                .noPinnedKey,
                "no key is pinned to check a \(fields.name) with, so none is accepted; pin the key the trust bundle "
                    + "gives (pixie-server trust-bundle prints it)")
        }
        guard let key = pinnedKeys.first(where: { PhoneOwnershipCert.keyID(of: $0) == fields.signerKeyID }) else {
            throw PixieWireError(
                .unknownSigner, "the \(fields.name) was signed by a key that is not pinned; \(fields.remedy)")
        }
        guard
            let signature = try? HybridSignature.Signature(
                rawRepresentation: fields.raw.dropFirst(fields.signedByteCount)),
            key.isValidSignature(signature, for: fields.raw.prefix(fields.signedByteCount), context: fields.context)
        else {
            throw PixieWireError(.badSignature, "the \(fields.name)'s signature does not verify")
        }
        guard fields.issuedAt.timeIntervalSince(now) <= allowedClockSkew else {
            throw PixieWireError(
                .notYetValid, "the \(fields.name) is issued in the future; check this machine's clock")
        }
        guard now < fields.expiresAt else {
            throw PixieWireError(.expired, "the \(fields.name) has expired; \(fields.remedy)")
        }
    }
}
