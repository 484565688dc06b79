import Foundation
import SiblingsCrypto
import Testing
import WebAuthn

@Suite("WebAuthnRelyingParty: registration (§7.1)")
struct RegistrationTests {
    let party = WebAuthnRelyingParty(
        rpID: "example.com", allowedOrigins: ["https://example.com", "https://login.example.com"],
        requiresUserVerification: true)

    func verify(_ fixture: RegistrationFixture, party: WebAuthnRelyingParty? = nil) throws -> RegisteredCredential {
        try (party ?? self.party).verifyRegistration(
            attestationObject: fixture.attestationObject, clientDataJSON: fixture.clientDataJSON,
            expectedChallenge: Data(repeating: 0x42, count: 32))
    }

    @Test("a well-formed registration is accepted and yields the credential")
    func accepted() throws {
        var fixture = RegistrationFixture()
        fixture.flags = [.userPresent, .userVerified, .backupEligible, .backupState]
        fixture.signCount = 5
        let credential = try verify(fixture)
        #expect(credential.credentialID == fixture.credentialID)
        #expect(credential.publicKey.publicKey == fixture.key.publicKey)
        #expect(credential.signCount == 5)
        #expect(credential.backupEligible && credential.backupState && credential.userVerified)
        #expect(credential.aaguid == Data(count: 16))
        fixture.origin = "https://login.example.com"
        fixture.crossOrigin = false
        #expect(try verify(fixture).credentialID == fixture.credentialID)
    }

    @Test("challenges are 32 fresh random bytes")
    func challenges() {
        let first = party.makeRegistrationChallenge()
        #expect(first.count == 32)
        #expect(first != party.makeRegistrationChallenge())
        #expect(party.makeAuthenticationChallenge().count == 32)
    }

    @Test("each failed check has its own error")
    func refusals() {
        func refused(_ code: WebAuthnError.Code, _ change: (inout RegistrationFixture) -> Void) {
            var fixture = RegistrationFixture()
            change(&fixture)
            expectError(code) { try verify(fixture) }
        }
        refused(.challengeMismatch) { $0.challenge = Data(repeating: 0x43, count: 32) }
        refused(.challengeMismatch) { $0.challenge = Data(repeating: 0x42, count: 31) }
        refused(.challengeMismatch) {
            $0.clientChallenge = Data(repeating: 0x42, count: 32).base64URLEncodedString() + "="
        }
        refused(.originNotAllowed) { $0.origin = "https://evil.example" }
        refused(.originNotAllowed) { $0.origin = "http://example.com" }
        refused(.originNotAllowed) { $0.origin = "https://example.com:8443" }
        refused(.typeMismatch) { $0.type = "webauthn.get" }
        refused(.typeMismatch) { $0.type = "payment.get" }
        refused(.crossOriginNotAllowed) { $0.crossOrigin = true }
        refused(.crossOriginNotAllowed) { $0.topOrigin = "https://other.example" }
        refused(.rpIDMismatch) { $0.rpID = "evil.example" }
        refused(.rpIDMismatch) { $0.rpID = "login.example.com" }
        refused(.userNotPresent) { $0.flags = [.userVerified] }
        refused(.userNotVerified) { $0.flags = [.userPresent] }
        refused(.invalidBackupFlags) { $0.flags = [.userPresent, .userVerified, .backupState] }
        refused(.unsupportedAttestationFormat) { $0.format = "packed" }
        refused(.unsupportedAttestationFormat) { $0.format = "fido-u2f" }
        refused(.invalidAttestationStatement) { $0.statement = [.text("alg"): CBOR(-7)] }
        refused(.unsupportedAlgorithm) {
            $0.publicKey = CBOR.map([
                CBOR(1): CBOR(1), CBOR(3): CBOR(-8), CBOR(-1): CBOR(6), CBOR(-2): .bytes(Data(count: 32)),
            ])
            .encoded()
        }
        refused(.invalidCredentialID) { $0.credentialID = Data(count: 1024) }
    }

    @Test("UV is not needed when the relying party does not require it; UP always is")
    func userVerificationPolicy() throws {
        let relaxed = WebAuthnRelyingParty(
            rpID: "example.com", allowedOrigins: ["https://example.com"], requiresUserVerification: false)
        var fixture = RegistrationFixture()
        fixture.flags = [.userPresent]
        #expect(try verify(fixture, party: relaxed).userVerified == false)
        fixture.flags = [.userVerified]
        expectError(.userNotPresent) { try verify(fixture, party: relaxed) }
    }

    @Test("malformed inputs: client data, attestation object shape, missing attested data")
    func malformed() {
        let fixture = RegistrationFixture()
        let challenge = Data(repeating: 0x42, count: 32)
        expectError(.invalidClientData) {
            try party.verifyRegistration(
                attestationObject: fixture.attestationObject, clientDataJSON: Data("[]".utf8),
                expectedChallenge: challenge)
        }
        expectError(.invalidClientData) {
            try party.verifyRegistration(
                attestationObject: fixture.attestationObject, clientDataJSON: Data([0xff, 0xfe]),
                expectedChallenge: challenge)
        }
        expectError(.invalidAttestationObject) {
            try party.verifyRegistration(
                attestationObject: fixture.attestationObject + Data([0]), clientDataJSON: fixture.clientDataJSON,
                expectedChallenge: challenge)
        }
        expectError(.invalidAttestationObject) {
            try party.verifyRegistration(
                attestationObject: CBOR.map([.text("fmt"): .text("none")]).encoded(),
                clientDataJSON: fixture.clientDataJSON, expectedChallenge: challenge)
        }
        let noAttested = CBOR.map([
            .text("fmt"): .text("none"), .text("attStmt"): .map([:]),
            .text("authData"): .bytes(
                AuthenticatorData(
                    rpIDHash: SHA256.hash(data: Data("example.com".utf8)).rawRepresentation,
                    flags: [.userPresent, .userVerified], signCount: 0
                ).rawRepresentation),
        ]).encoded()
        expectError(.attestedCredentialDataMissing) {
            try party.verifyRegistration(
                attestationObject: noAttested, clientDataJSON: fixture.clientDataJSON, expectedChallenge: challenge)
        }
    }
}

@Suite("WebAuthnRelyingParty: assertion (§7.2)")
struct AssertionTests {
    let party = WebAuthnRelyingParty(
        rpID: "example.com", allowedOrigins: ["https://example.com"], requiresUserVerification: true)
    let key = P256.Signing.PrivateKey()
    var credential: RegisteredCredential {
        RegisteredCredential(
            credentialID: Data(repeating: 1, count: 16), publicKey: COSEKey(publicKey: key.publicKey), signCount: 0)
    }

    func verify(
        _ fixture: AssertionFixture, stored: UInt32 = 0, signature: Data? = nil, party: WebAuthnRelyingParty? = nil
    ) throws -> VerifiedAssertion {
        try (party ?? self.party).verifyAssertion(
            authenticatorData: fixture.authenticatorData, clientDataJSON: fixture.clientDataJSON,
            signature: signature ?? fixture.signature, expectedChallenge: Data(repeating: 0x24, count: 32),
            credential: credential, storedSignCount: stored)
    }

    @Test("a valid assertion is accepted and returns the new counter")
    func accepted() throws {
        var fixture = AssertionFixture(key: key)
        fixture.signCount = 8
        let result = try verify(fixture, stored: 7)
        #expect(result.newSignCount == 8)
        #expect(result.userVerified)
        #expect(result.credentialID == credential.credentialID)
        fixture.signCount = 0
        #expect(try verify(fixture, stored: 0).newSignCount == 0)
    }

    @Test("each failed check has its own error")
    func refusals() {
        func refused(_ code: WebAuthnError.Code, stored: UInt32 = 0, _ change: (inout AssertionFixture) -> Void) {
            var fixture = AssertionFixture(key: key)
            change(&fixture)
            expectError(code) { try verify(fixture, stored: stored) }
        }
        refused(.challengeMismatch) { $0.challenge = Data(repeating: 0x25, count: 32) }
        refused(.originNotAllowed) { $0.origin = "https://evil.example" }
        refused(.typeMismatch) { $0.type = "webauthn.create" }
        refused(.crossOriginNotAllowed) { $0.crossOrigin = true }
        refused(.rpIDMismatch) { $0.rpID = "evil.example" }
        refused(.userNotPresent) { $0.flags = [.userVerified] }
        refused(.userNotVerified) { $0.flags = [.userPresent] }
        refused(.invalidBackupFlags) { $0.flags = [.userPresent, .userVerified, .backupState] }
        refused(.invalidSignature) { $0.key = P256.Signing.PrivateKey() }
        refused(.possibleClonedAuthenticator, stored: 5) { $0.signCount = 5 }
        refused(.possibleClonedAuthenticator, stored: 5) { $0.signCount = 4 }
        refused(.possibleClonedAuthenticator, stored: 5) { $0.signCount = 0 }
    }

    @Test("a tampered signature or signed data is refused")
    func tampered() throws {
        let fixture = AssertionFixture(key: key)
        var signature = fixture.signature
        signature[signature.count - 1] ^= 0x01
        expectError(.invalidSignature) { try verify(fixture, signature: signature) }
        expectError(.invalidSignature) { try verify(fixture, signature: Data(count: 8)) }
        let raw = try P256.Signing.ECDSASignature(derRepresentation: fixture.signature).rawRepresentation
        expectError(.invalidSignature) { try verify(fixture, signature: raw) }
        // Same counter and flags, but the signature was made over another client data.
        var other = fixture
        other.challenge = Data(repeating: 0x25, count: 32)
        expectError(.invalidSignature) { try verify(fixture, signature: other.signature) }
    }
}
