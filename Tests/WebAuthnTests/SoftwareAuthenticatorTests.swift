import Foundation
import SiblingsCrypto
import Testing
import WebAuthn

@Suite("SoftwareAuthenticator")
struct SoftwareAuthenticatorTests {
    let party = WebAuthnRelyingParty(
        rpID: "example.com", allowedOrigins: ["https://example.com"], requiresUserVerification: true)

    @Test("register, then sign in three times through the JSON bodies; the counter climbs")
    func ceremonies() throws {
        let authenticator = SoftwareAuthenticator()
        let challenge = party.makeRegistrationChallenge()
        let registration = authenticator.makeCredential(
            rpID: "example.com", origin: "https://example.com", challenge: challenge, userID: Data("user-1".utf8))
        let body = try JSONEncoder().encode(registration)
        let credential = try party.verifyRegistration(
            try JSONDecoder().decode(RegistrationResponseJSON.self, from: body), expectedChallenge: challenge)
        #expect(credential.signCount == 0)
        #expect(!credential.backupEligible)
        #expect(authenticator.credentialIDs(rpID: "example.com") == [credential.credentialID])

        var stored = credential.signCount
        for expected: UInt32 in 1...3 {
            let challenge = party.makeAuthenticationChallenge()
            let assertion = try authenticator.getAssertion(
                rpID: "example.com", origin: "https://example.com", challenge: challenge,
                credentialID: credential.credentialID)
            let decoded = try JSONDecoder().decode(
                AuthenticationResponseJSON.self, from: try JSONEncoder().encode(assertion))
            let result = try party.verifyAssertion(
                decoded, expectedChallenge: challenge, credential: credential, storedSignCount: stored,
                expectedUserHandle: Data("user-1".utf8))
            #expect(result.newSignCount == expected)
            stored = result.newSignCount
        }
    }

    @Test("the JSON bodies have the WebAuthn serialization's shape: base64url without padding, type public-key")
    func jsonShape() throws {
        let authenticator = SoftwareAuthenticator()
        let registration = authenticator.makeCredential(
            rpID: "example.com", origin: "https://example.com", challenge: Data(count: 16), userID: Data([1]))
        let object = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(registration)) as! [String: Any]
        #expect(object["type"] as? String == "public-key")
        #expect(object["id"] as? String == object["rawId"] as? String)
        #expect((object["clientExtensionResults"] as? [String: Any])?.isEmpty == true)
        let response = object["response"] as! [String: Any]
        for field in ["clientDataJSON", "attestationObject"] {
            let text = response[field] as! String
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
        }
        let clientData = Data(base64URLEncoded: response["clientDataJSON"] as! String)!
        #expect(
            String(decoding: clientData, as: UTF8.self)
                == #"{"type":"webauthn.create","challenge":"AAAAAAAAAAAAAAAAAAAAAA","origin":"https://example.com","crossOrigin":false}"#
        )
    }

    @Test("mismatched JSON envelopes are refused")
    func envelopes() throws {
        let authenticator = SoftwareAuthenticator()
        let challenge = Data(count: 32)
        var registration = authenticator.makeCredential(
            rpID: "example.com", origin: "https://example.com", challenge: challenge, userID: Data([1]))
        let good = registration
        registration.type = "password"
        expectError(.invalidResponseJSON) { try party.verifyRegistration(registration, expectedChallenge: challenge) }
        registration = good
        registration.rawId = Data(count: 32).base64URLEncodedString()
        expectError(.invalidResponseJSON) { try party.verifyRegistration(registration, expectedChallenge: challenge) }
        registration.id = registration.rawId
        expectError(.credentialMismatch) { try party.verifyRegistration(registration, expectedChallenge: challenge) }
        registration = good
        registration.response.clientDataJSON += "="
        expectError(.invalidResponseJSON) { try party.verifyRegistration(registration, expectedChallenge: challenge) }

        let credential = try party.verifyRegistration(good, expectedChallenge: challenge)
        let assertion = try authenticator.getAssertion(
            rpID: "example.com", origin: "https://example.com", challenge: challenge)
        let other = RegisteredCredential(credentialID: Data(count: 32), publicKey: credential.publicKey, signCount: 0)
        expectError(.credentialMismatch) {
            try party.verifyAssertion(assertion, expectedChallenge: challenge, credential: other, storedSignCount: 0)
        }
        expectError(.credentialMismatch) {
            try party.verifyAssertion(
                assertion, expectedChallenge: challenge, credential: credential, storedSignCount: 0,
                expectedUserHandle: Data([2]))
        }
        // A replayed assertion: the counter does not move.
        _ = try party.verifyAssertion(
            assertion, expectedChallenge: challenge, credential: credential, storedSignCount: 0)
        expectError(.possibleClonedAuthenticator) {
            try party.verifyAssertion(
                assertion, expectedChallenge: challenge, credential: credential, storedSignCount: 1)
        }
    }

    @Test("state export and import keep the keys and counters; bad state is refused")
    func persistence() throws {
        let authenticator = SoftwareAuthenticator(backupEligible: true)
        let challenge = Data(count: 32)
        let credential = try party.verifyRegistration(
            authenticator.makeCredential(
                rpID: "example.com", origin: "https://example.com", challenge: challenge, userID: Data([7])),
            expectedChallenge: challenge)
        #expect(credential.backupEligible && credential.backupState)
        _ = try authenticator.getAssertion(rpID: "example.com", origin: "https://example.com", challenge: challenge)

        let restored = try SoftwareAuthenticator(state: authenticator.exportState())
        #expect(restored.exportState() == authenticator.exportState())
        let assertion = try restored.getAssertion(
            rpID: "example.com", origin: "https://example.com", challenge: challenge)
        #expect(
            try party.verifyAssertion(
                assertion, expectedChallenge: challenge, credential: credential, storedSignCount: 1
            )
            .newSignCount == 2)

        expectError(.unknownCredential) {
            try restored.getAssertion(rpID: "other.example", origin: "https://other.example", challenge: challenge)
        }
        expectError(.unknownCredential) {
            try restored.getAssertion(
                rpID: "example.com", origin: "https://example.com", challenge: challenge, credentialID: Data([1]))
        }
        expectError(.invalidState) { try SoftwareAuthenticator(state: Data("{}".utf8)) }
        var state = try JSONSerialization.jsonObject(with: authenticator.exportState()) as! [String: Any]
        state["version"] = 2
        expectError(.invalidState) {
            try SoftwareAuthenticator(state: try JSONSerialization.data(withJSONObject: state))
        }
    }

    @Test("one authenticator shared by concurrent tasks keeps every counter distinct")
    func concurrency() async throws {
        let authenticator = SoftwareAuthenticator()
        _ = authenticator.makeCredential(
            rpID: "example.com", origin: "https://example.com", challenge: Data(count: 16), userID: Data([1]))
        let counts = try await withThrowingTaskGroup(of: UInt32.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    let assertion = try authenticator.getAssertion(
                        rpID: "example.com", origin: "https://example.com", challenge: Data(count: 16))
                    let data = try AuthenticatorData(
                        rawRepresentation: Data(base64URLEncoded: assertion.response.authenticatorData)!)
                    return data.signCount
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(counts) == Set(1...20))
    }
}
