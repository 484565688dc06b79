import Foundation
import PixieWire
import SiblingsCrypto
import Testing

@Suite("SenderCert")
struct SenderCertTests {
    let key = HybridSignature.PrivateKey()
    let issued = Date(timeIntervalSince1970: 1_800_000_000)

    func mint(deviceKey: Data = Data(repeating: 7, count: 64)) throws -> SenderCert {
        try SenderCert(
            userIDHash: SenderCert.computeUserIDHash("account-1"), deviceKey: deviceKey, issuedAt: issued,
            expiresAt: issued + 3600, signedBy: key)
    }

    func code(
        _ raw: some DataProtocol, pinned: [HybridSignature.PublicKey]? = nil, now: Date? = nil
    )
        -> PixieWireError.Code?
    {
        do {
            _ = try SenderCert.Verifier(pinnedKeys: pinned ?? [key.publicKey]).verify(raw, now: now ?? issued + 1)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func layoutAndRoundTrip() throws {
        let cert = try mint()
        let raw = cert.rawRepresentation
        #expect(raw.count == 59 + 64 + 3373)
        #expect(raw[0] == 1)
        #expect(raw.subdata(in: 1..<33) == SenderCert.computeUserIDHash("account-1"))
        #expect(raw[33] == 0 && raw[34] == 64)
        #expect(raw.subdata(in: 35..<99) == Data(repeating: 7, count: 64))
        let verified = try SenderCert.Verifier(pinnedKeys: [key.publicKey]).verify(raw, now: issued + 10)
        #expect(verified == cert)
        #expect(verified.userIDHash.count == 32)
    }

    @Test func userIDHashesSeparateAccounts() {
        #expect(SenderCert.computeUserIDHash("a") != SenderCert.computeUserIDHash("b"))
        #expect(SenderCert.computeUserIDHash("a") == SenderCert.computeUserIDHash("a"))
        // The documented definition, spelled out.
        #expect(
            SenderCert.computeUserIDHash("a")
                == Data(SHA256.hash(data: Data("pixie/user-id-hash/v1\u{0}a".utf8))))
    }

    @Test func everyRefusal() throws {
        let raw = try mint().rawRepresentation
        #expect(code(raw, pinned: []) == .noPinnedKey)
        #expect(code(raw, pinned: [HybridSignature.PrivateKey().publicKey]) == .unknownSigner)
        #expect(code(raw, now: issued + 3600) == .expired)
        #expect(code(raw, now: issued - 120) == .notYetValid)
        for index in [1, 40, 100, raw.count - 3373 + 5, raw.count - 10] {
            var tampered = raw
            tampered[index] ^= 0x01
            #expect(code(tampered) != nil, "byte \(index)")
        }
        #expect(code(raw.dropLast()) == .malformed)
        var version = raw
        version[0] = 9
        #expect(code(version) == .malformed)
        var length = raw
        length[34] = 65  // declares one more key byte than the cert has
        #expect(code(length) == .malformed)
        #expect(code(Data()) == .malformed)
        #expect(throws: PixieWireError.self) { try mint(deviceKey: Data()) }
        #expect(throws: PixieWireError.self) { try mint(deviceKey: Data(count: 4097)) }
    }
}
