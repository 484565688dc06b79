import Foundation
import PixieWire
import SiblingsCrypto

/// PhoneOwnershipCert and SenderCert, parsed and then verified under a fixed pinned key: the seeds are certs
/// that key signed, so mutations of them reach the signature checks (one ML-DSA-65 and one Ed25519 verification,
/// tens of microseconds); anything else stops at the parser or the key ID.
let certTarget = FuzzTarget(
    name: "cert",
    summary: "PhoneOwnershipCert and SenderCert (PixieWire), parsed and verified under a fixed key",
    maximumLength: 8192,
    seeds: {
        let issued = Date(timeIntervalSince1970: 1_800_000_000)
        return [
            try PhoneOwnershipCert(
                phoneID: Data(repeating: 3, count: 32), issuedAt: issued, expiresAt: issued + 86_400, signedBy: certKey
            ).rawRepresentation,
            try SenderCert(
                userIDHash: Data(repeating: 4, count: 32), deviceKey: Data(repeating: 5, count: 32), issuedAt: issued,
                expiresAt: issued + 86_400, signedBy: certKey
            ).rawRepresentation,
        ]
    },
    run: { input in
        let now = Date(timeIntervalSince1970: 1_800_000_100)
        _ = try? PhoneOwnershipCert(unverifiedRepresentation: input)
        _ = try? SenderCert(unverifiedRepresentation: input)
        _ = try? PhoneOwnershipCert.Verifier(pinnedKeys: [certKey.publicKey]).verify(input, now: now)
        _ = try? SenderCert.Verifier(pinnedKeys: [certKey.publicKey]).verify(input, now: now)
    })

/// The fixed signing key of the cert target's seeds.
let certKey: HybridSignature.PrivateKey = {
    do {
        return try HybridSignature.PrivateKey(seedRepresentation: Data(repeating: 7, count: 32))
    } catch {
        fatalError("the fuzz target's fixed key does not derive: \(error)")
    }
}()
