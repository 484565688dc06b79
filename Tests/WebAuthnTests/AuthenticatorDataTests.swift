import Foundation
import SiblingsCrypto
import Testing
import WebAuthn

@Suite("authenticatorData (WebAuthn L3 §6.1)")
struct AuthenticatorDataTests {
    static let rpIDHash = SHA256.hash(data: Data("example.com".utf8)).rawRepresentation
    static let cose = COSEKey(publicKey: P256.Signing.PrivateKey().publicKey).cborRepresentation

    static func attested(_ id: Data = Data(repeating: 9, count: 20)) -> AttestedCredentialData {
        AttestedCredentialData(aaguid: Data(repeating: 0xaa, count: 16), credentialID: id, credentialPublicKey: cose)
    }

    @Test("built data parses back field for field, with and without attested data and extensions")
    func roundTrip() throws {
        let cases = [
            AuthenticatorData(rpIDHash: Self.rpIDHash, flags: [.userPresent], signCount: 7),
            AuthenticatorData(
                rpIDHash: Self.rpIDHash, flags: [.userPresent, .userVerified, .backupEligible, .backupState],
                signCount: 0xdead_beef, attestedCredentialData: Self.attested()),
            AuthenticatorData(
                rpIDHash: Self.rpIDHash, flags: [.userPresent], signCount: 1, attestedCredentialData: Self.attested(),
                extensions: .map([.text("credProtect"): CBOR(2)])),
            AuthenticatorData(
                rpIDHash: Self.rpIDHash, flags: [.userPresent], signCount: 1,
                extensions: .map([.text("hmac-secret"): .boolean(true)])),
            AuthenticatorData(
                rpIDHash: Self.rpIDHash, flags: [.userPresent], signCount: 1,
                attestedCredentialData: Self.attested(Data(repeating: 1, count: 1023))),
        ]
        for data in cases {
            let parsed = try AuthenticatorData(rawRepresentation: data.rawRepresentation)
            #expect(parsed == data)
        }
        #expect(cases[1].rawRepresentation[32] == 0x5d)
        #expect(cases[1].rawRepresentation[33..<37] == Data([0xde, 0xad, 0xbe, 0xef]))
    }

    @Test("every truncation is refused")
    func truncated() {
        let full = AuthenticatorData(
            rpIDHash: Self.rpIDHash, flags: [.userPresent], signCount: 1, attestedCredentialData: Self.attested(),
            extensions: .map([.text("credProtect"): CBOR(2)])
        ).rawRepresentation
        for length in 0..<full.count {
            let error = #expect(throws: WebAuthnError.self) {
                try AuthenticatorData(rawRepresentation: full.prefix(length))
            }
            #expect(error?.code == .invalidAuthenticatorData, "length \(length): \(String(describing: error))")
        }
    }

    @Test("trailing bytes are refused, whether or not AT and ED are set")
    func trailing() {
        let plain = AuthenticatorData(rpIDHash: Self.rpIDHash, flags: [.userPresent], signCount: 1)
        let attested = AuthenticatorData(
            rpIDHash: Self.rpIDHash, flags: [.userPresent], signCount: 1, attestedCredentialData: Self.attested())
        let extended = AuthenticatorData(
            rpIDHash: Self.rpIDHash, flags: [.userPresent], signCount: 1, extensions: .map([:]))
        for data in [plain, attested, extended] {
            expectError(.invalidAuthenticatorData) {
                try AuthenticatorData(rawRepresentation: data.rawRepresentation + Data([0]))
            }
        }
    }

    @Test("BS without BE is refused")
    func backupStateWithoutEligibility() {
        var raw = AuthenticatorData(rpIDHash: Self.rpIDHash, flags: [.userPresent], signCount: 1).rawRepresentation
        raw[32] |= 0x10
        expectError(.invalidBackupFlags) { try AuthenticatorData(rawRepresentation: raw) }
        raw[32] |= 0x08
        #expect((try? AuthenticatorData(rawRepresentation: raw)) != nil)
    }

    @Test("credential ID lengths of 0 and 1024 or more are refused")
    func credentialIDLength() {
        let prefix = Self.rpIDHash + Data([0x41, 0, 0, 0, 1]) + Data(count: 16)
        for length in [0, 1024, 0xffff] {
            let raw =
                prefix + Data([UInt8(length >> 8), UInt8(length & 0xff)]) + Data(count: min(length, 2000)) + Self.cose
            expectError(.invalidCredentialID) { try AuthenticatorData(rawRepresentation: raw) }
        }
    }

    @Test("a credential public key or extension block that is not a CBOR map is refused")
    func notMaps() {
        let prefix = Self.rpIDHash + Data([0x41, 0, 0, 0, 1]) + Data(count: 16) + Data([0, 1, 0xcc])
        expectError(.invalidAuthenticatorData) { try AuthenticatorData(rawRepresentation: prefix + Data([0x80])) }
        expectError(.invalidAuthenticatorData) { try AuthenticatorData(rawRepresentation: prefix + Data([0x5f])) }
        let extended = Self.rpIDHash + Data([0x81, 0, 0, 0, 1])
        expectError(.invalidAuthenticatorData) { try AuthenticatorData(rawRepresentation: extended + Data([0x01])) }
        expectError(.invalidAuthenticatorData) { try AuthenticatorData(rawRepresentation: extended) }
    }
}
