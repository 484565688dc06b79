import Foundation
import PixieWire
import SiblingsCrypto
import Testing

@Suite("PhoneOwnershipCert")
struct PhoneOwnershipCertTests {
    let key = HybridSignature.PrivateKey()
    let phoneID = Data((0..<32).map { UInt8($0) })
    let issued = Date(timeIntervalSince1970: 1_800_000_000)

    func mint(lifetime: TimeInterval = 3600) throws -> PhoneOwnershipCert {
        try PhoneOwnershipCert(
            phoneID: phoneID, issuedAt: issued, expiresAt: issued + lifetime, signedBy: key)
    }

    @Test func layoutIsTheDocumentedOne() throws {
        let cert = try mint()
        let raw = cert.rawRepresentation
        #expect(raw.count == 3430)
        #expect(raw[0] == 1)
        #expect(raw.subdata(in: 1..<33) == phoneID)
        #expect(raw.subdata(in: 33..<41) == Data([0, 0, 0, 0, 0x6B, 0x49, 0xD2, 0x00]))  // 1_800_000_000
        #expect(raw.subdata(in: 49..<57) == Data(SHA256.hash(data: key.publicKey.rawRepresentation).prefix(8)))
        // The signature is the hybrid one over the first 57 bytes with the cert's context.
        let signature = try HybridSignature.Signature(rawRepresentation: raw.suffix(3373))
        #expect(
            key.publicKey.isValidSignature(
                signature, for: raw.prefix(57), context: Data("pixie/phone-ownership-cert/v1".utf8)))
    }

    @Test func verifiesWithThePinnedKey() throws {
        let cert = try mint()
        let verified = try PhoneOwnershipCert.Verifier(pinnedKeys: [key.publicKey])
            .verify(cert.rawRepresentation, now: issued + 10)
        #expect(verified.phoneID == phoneID)
        #expect(verified.expiresAt == issued + 3600)
        #expect(verified == cert)
    }

    @Test func refusesWithoutAPinnedKey() throws {
        let cert = try mint()
        #expect(throws: PixieWireError.self) {
            try PhoneOwnershipCert.Verifier(pinnedKeys: []).verify(cert.rawRepresentation, now: issued)
        }
        do {
            _ = try PhoneOwnershipCert.Verifier(pinnedKeys: []).verify(cert.rawRepresentation, now: issued)
        } catch {
            #expect(error.code == .noPinnedKey)
        }
    }

    @Test func refusesAnotherSigner() throws {
        let cert = try mint()
        let other = HybridSignature.PrivateKey()
        #expect(code(of: cert.rawRepresentation, pinned: [other.publicKey]) == .unknownSigner)
    }

    @Test func refusesExpiredAndFutureCerts() throws {
        let cert = try mint()
        #expect(code(of: cert.rawRepresentation, now: issued + 3600) == .expired)
        #expect(code(of: cert.rawRepresentation, now: issued - 61) == .notYetValid)
        #expect(code(of: cert.rawRepresentation, now: issued - 59) == nil)
    }

    @Test func eitherHalfOfTheSignatureBrokenIsRefused() throws {
        let raw = try mint().rawRepresentation
        var classical = raw
        classical[57] ^= 1  // inside the Ed25519 half
        #expect(code(of: classical) == .badSignature)
        var postQuantum = raw
        postQuantum[57 + 64 + 100] ^= 1  // inside the ML-DSA-65 half
        #expect(code(of: postQuantum) == .badSignature)
        var field = raw
        field[5] ^= 1  // the phone_id
        #expect(code(of: field) == .badSignature)
        var expiry = raw
        expiry[48] &+= 1  // a later expiry
        #expect(code(of: expiry) == .badSignature)
    }

    @Test func refusesMalformedBytes() throws {
        let raw = try mint().rawRepresentation
        #expect(code(of: Data()) == .malformed)
        #expect(code(of: raw.dropLast()) == .malformed)
        #expect(code(of: raw + [0]) == .malformed)
        var version = raw
        version[0] = 2
        #expect(code(of: version) == .malformed)
        for length in [0, 1, 56, 57, 3429] {
            #expect(code(of: Data(repeating: 1, count: length)) == .malformed)
        }
    }

    @Test func mintRefusesBadInput() {
        #expect(throws: PixieWireError.self) {
            try PhoneOwnershipCert(phoneID: Data(count: 31), issuedAt: issued, expiresAt: issued + 1, signedBy: key)
        }
        #expect(throws: PixieWireError.self) {
            try PhoneOwnershipCert(phoneID: phoneID, issuedAt: issued, expiresAt: issued, signedBy: key)
        }
    }

    @Test func aRotatedKeySetAcceptsEitherKey() throws {
        let cert = try mint()
        let other = HybridSignature.PrivateKey()
        #expect(code(of: cert.rawRepresentation, pinned: [other.publicKey, key.publicKey]) == nil)
    }

    func code(
        of raw: some DataProtocol, pinned: [HybridSignature.PublicKey]? = nil, now: Date? = nil
    ) -> PixieWireError.Code? {
        do {
            _ = try PhoneOwnershipCert.Verifier(pinnedKeys: pinned ?? [key.publicKey])
                .verify(raw, now: now ?? issued + 1)
            return nil
        } catch {
            return error.code
        }
    }
}
