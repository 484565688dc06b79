import Foundation
import SiblingsCrypto
import Testing
import WebAuthn

/// Both directions against implementations no one here wrote (Tests/Reference/webauthn_oracle.py):
/// python-fido2 builds registrations and assertions our relying party verifies, and py_webauthn verifies
/// what our SoftwareAuthenticator produces.
@Suite("WebAuthn against python-fido2 and py_webauthn")
struct ReferenceTests {
    let party = WebAuthnRelyingParty(
        rpID: "example.com", allowedOrigins: ["https://example.com"], requiresUserVerification: true)

    @Test("registrations and assertions built by python-fido2 are accepted")
    func fido2Accepted() throws {
        let oracle = try webAuthnOracle()
        for _ in 0..<5 {
            let challenge = party.makeRegistrationChallenge()
            let made = try oracle.call(
                "fido2_registration",
                ["rp_id": "example.com", "origin": "https://example.com", "challenge": challenge, "be": true])
            let credential = try party.verifyRegistration(
                attestationObject: hex(made["attestation_object"] as! String),
                clientDataJSON: hex(made["client_data_json"] as! String), expectedChallenge: challenge)
            #expect(credential.credentialID == hex(made["credential_id"] as! String))
            #expect(credential.publicKey.publicKey.x963Representation == hex(made["public"] as! String))
            #expect(credential.backupEligible && !credential.backupState)

            var stored = credential.signCount
            for counter in [0, 1, 7] where counter > stored || (counter == 0 && stored == 0) {
                let challenge = party.makeAuthenticationChallenge()
                let assertion = try oracle.call(
                    "fido2_assertion",
                    [
                        "rp_id": "example.com", "origin": "https://example.com", "challenge": challenge,
                        "private": made["private"] as! String, "counter": counter,
                    ])
                let result = try party.verifyAssertion(
                    authenticatorData: hex(assertion["authenticator_data"] as! String),
                    clientDataJSON: hex(assertion["client_data_json"] as! String),
                    signature: hex(assertion["signature"] as! String), expectedChallenge: challenge,
                    credential: credential, storedSignCount: stored)
                #expect(result.newSignCount == UInt32(counter))
                stored = result.newSignCount
            }
        }
    }

    @Test("python-fido2 registrations that break one rule are refused for that rule")
    func fido2Refused() throws {
        let oracle = try webAuthnOracle()
        let challenge = party.makeRegistrationChallenge()
        func refused(_ code: WebAuthnError.Code, _ args: [String: any Sendable]) throws {
            var request: [String: any Sendable] = [
                "rp_id": "example.com", "origin": "https://example.com", "challenge": challenge,
            ]
            request.merge(args) { $1 }
            let made = try oracle.call("fido2_registration", request)
            expectError(code) {
                try party.verifyRegistration(
                    attestationObject: hex(made["attestation_object"] as! String),
                    clientDataJSON: hex(made["client_data_json"] as! String), expectedChallenge: challenge)
            }
        }
        try refused(.rpIDMismatch, ["rp_id": "evil.example"])
        try refused(.originNotAllowed, ["origin": "https://evil.example"])
        try refused(.typeMismatch, ["type": "webauthn.get"])
        try refused(.challengeMismatch, ["challenge": Data(count: 32)])
        try refused(.userNotVerified, ["uv": false])
        try refused(.userNotPresent, ["up": false])
        try refused(.invalidBackupFlags, ["bs": true])
        try refused(.unsupportedAttestationFormat, ["fmt": "packed"])
        try refused(.invalidCredentialID, ["id_length": 1024])
    }

    @Test("py_webauthn verifies our SoftwareAuthenticator's registration and assertions")
    func pyWebAuthnAccepts() throws {
        let oracle = try webAuthnOracle()
        let authenticator = SoftwareAuthenticator(backupEligible: true)
        let challenge = party.makeRegistrationChallenge()
        let registration = authenticator.makeCredential(
            rpID: "example.com", origin: "https://example.com", challenge: challenge, userID: Data("u".utf8))
        let verified = try oracle.call(
            "pywebauthn_verify_registration",
            [
                "json": String(decoding: try JSONEncoder().encode(registration), as: UTF8.self),
                "challenge": challenge, "rp_id": "example.com", "origin": "https://example.com", "require_uv": true,
            ])
        let ours = try party.verifyRegistration(registration, expectedChallenge: challenge)
        #expect(verified["credential_id"] as? String == ours.credentialID.hexString)
        #expect(verified["public_key"] as? String == ours.publicKey.cborRepresentation.hexString)
        #expect(verified["fmt"] as? String == "none")
        #expect(verified["user_verified"] as? Bool == true)
        #expect(verified["backed_up"] as? Bool == true)

        var stored = 0
        for _ in 0..<3 {
            let challenge = party.makeAuthenticationChallenge()
            let assertion = try authenticator.getAssertion(
                rpID: "example.com", origin: "https://example.com", challenge: challenge)
            let result = try oracle.call(
                "pywebauthn_verify_authentication",
                [
                    "json": String(decoding: try JSONEncoder().encode(assertion), as: UTF8.self),
                    "challenge": challenge, "rp_id": "example.com", "origin": "https://example.com",
                    "public_key": ours.publicKey.cborRepresentation, "sign_count": stored, "require_uv": true,
                ])
            let newCount = result["new_sign_count"] as! Int
            #expect(newCount == stored + 1)
            stored = newCount
        }
    }

    @Test("py_webauthn refuses our assertion for the wrong challenge, origin or counter")
    func pyWebAuthnRefuses() throws {
        let oracle = try webAuthnOracle()
        let authenticator = SoftwareAuthenticator()
        let challenge = party.makeRegistrationChallenge()
        let registration = authenticator.makeCredential(
            rpID: "example.com", origin: "https://example.com", challenge: challenge, userID: Data("u".utf8))
        let key = try party.verifyRegistration(registration, expectedChallenge: challenge).publicKey.cborRepresentation
        let assertion = try authenticator.getAssertion(
            rpID: "example.com", origin: "https://example.com", challenge: challenge)
        let json = String(decoding: try JSONEncoder().encode(assertion), as: UTF8.self)
        let base: [String: any Sendable] = [
            "json": json, "challenge": challenge, "rp_id": "example.com", "origin": "https://example.com",
            "public_key": key, "sign_count": 0,
        ]
        #expect(throws: (any Error).self) {
            try oracle.call("pywebauthn_verify_authentication", base.merging(["challenge": Data(count: 32)]) { $1 })
        }
        #expect(throws: (any Error).self) {
            try oracle.call("pywebauthn_verify_authentication", base.merging(["origin": "https://evil.example"]) { $1 })
        }
        #expect(throws: (any Error).self) {
            try oracle.call("pywebauthn_verify_authentication", base.merging(["sign_count": 1]) { $1 })
        }
        _ = try oracle.call("pywebauthn_verify_authentication", base)
    }
}

@Suite("WebAuthn options JSON")
struct OptionsTests {
    @Test("python-fido2 reads our creation and request options as the policy we verify")
    func fido2ReadsOptions() throws {
        let oracle = try webAuthnOracle()
        let party = WebAuthnRelyingParty(
            rpID: "example.com", allowedOrigins: ["https://example.com"], requiresUserVerification: true)
        let challenge = party.makeRegistrationChallenge()
        let creation = party.registrationOptions(
            challenge: challenge, userID: Data([1, 2, 3]), userName: "ada", userDisplayName: "Ada",
            excludeCredentials: [Data([9, 9])])
        let read = try oracle.call(
            "fido2_parse_options",
            ["kind": "creation", "json": String(decoding: try JSONEncoder().encode(creation), as: UTF8.self)])
        #expect(read["rp_id"] as? String == "example.com")
        #expect(read["user_id"] as? String == "010203")
        #expect(read["challenge"] as? String == challenge.hexString)
        #expect(read["algs"] as? [Int] == [-7])
        #expect(read["exclude"] as? [String] == ["0909"])
        #expect(read["resident_key"] as? String == "required")
        #expect(read["user_verification"] as? String == "required")
        #expect(read["attestation"] as? String == "none")
        #expect(read["timeout"] as? Int == 300_000)

        let relaxed = WebAuthnRelyingParty(
            rpID: "example.com", allowedOrigins: ["https://example.com"], requiresUserVerification: false)
        let request = relaxed.authenticationOptions(challenge: challenge, allowCredentials: [Data([7])])
        let readRequest = try oracle.call(
            "fido2_parse_options",
            ["kind": "request", "json": String(decoding: try JSONEncoder().encode(request), as: UTF8.self)])
        #expect(readRequest["rp_id"] as? String == "example.com")
        #expect(readRequest["challenge"] as? String == challenge.hexString)
        #expect(readRequest["allow"] as? [String] == ["07"])
        #expect(readRequest["user_verification"] as? String == "preferred")
    }
}
