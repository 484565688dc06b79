import Foundation
import SiblingsCrypto
import SiblingsTestSupport
import Testing
import WebAuthn

/// Expects `body` to throw a ``WebAuthnError`` with `code`.
func expectError(
    _ code: WebAuthnError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> some Any
) {
    let error = #expect(throws: WebAuthnError.self, sourceLocation: sourceLocation) { _ = try body() }
    #expect(error?.code == code, "got \(String(describing: error))", sourceLocation: sourceLocation)
}

func hex(_ text: String) -> Data { try! Data(hexString: text) }

/// The WebAuthn reference oracle (Tests/Reference/webauthn_oracle.py): fails, never skips, when the venv
/// or its fido2 / webauthn packages are missing.
func webAuthnOracle() throws -> ReferenceOracle {
    let oracle = try ReferenceOracle(script: "webauthn_oracle.py")
    do {
        _ = try oracle.call("check")
    } catch {
        throw MissingReference(
            description: "the WebAuthn references (python-fido2, py_webauthn) are not in the venv: \(error)"
        )
    }
    return oracle
}

struct MissingReference: Error, CustomStringConvertible {
    let description: String
}

/// A registration built field by field, so each test can break exactly one thing.
struct RegistrationFixture {
    var rpID = "example.com"
    var origin = "https://example.com"
    var type = "webauthn.create"
    var challenge = Data(repeating: 0x42, count: 32)
    var clientChallenge: String?
    var crossOrigin: Bool?
    var topOrigin: String?
    var flags: AuthenticatorData.Flags = [.userPresent, .userVerified]
    var signCount: UInt32 = 0
    var format = "none"
    var statement: [CBOR: CBOR] = [:]
    var key = P256.Signing.PrivateKey()
    var credentialID = Data(repeating: 0x01, count: 16)
    var publicKey: Data?

    var clientDataJSON: Data {
        var object: [String: Any] = [
            "type": type, "challenge": clientChallenge ?? Data(challenge).base64URLEncodedString(), "origin": origin,
        ]
        if let crossOrigin { object["crossOrigin"] = crossOrigin }
        if let topOrigin { object["topOrigin"] = topOrigin }
        // Sorted keys: two Swift dictionaries with the same keys may iterate in different orders (per-instance
        // hash seeds), and the signature must cover the same bytes the verifier is given.
        return try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    var authenticatorData: AuthenticatorData {
        AuthenticatorData(
            rpIDHash: SHA256.hash(data: Data(rpID.utf8)).rawRepresentation, flags: flags, signCount: signCount,
            attestedCredentialData: AttestedCredentialData(
                aaguid: Data(count: 16), credentialID: credentialID,
                credentialPublicKey: publicKey ?? COSEKey(publicKey: key.publicKey).cborRepresentation))
    }

    var attestationObject: Data {
        CBOR.map([
            .text("fmt"): .text(format), .text("attStmt"): .map(statement),
            .text("authData"): .bytes(authenticatorData.rawRepresentation),
        ]).encoded()
    }
}

/// An assertion built field by field.
struct AssertionFixture {
    var rpID = "example.com"
    var origin = "https://example.com"
    var type = "webauthn.get"
    var challenge = Data(repeating: 0x24, count: 32)
    var crossOrigin: Bool?
    var flags: AuthenticatorData.Flags = [.userPresent, .userVerified]
    var signCount: UInt32 = 1
    var key: P256.Signing.PrivateKey

    var clientDataJSON: Data {
        var object: [String: Any] = [
            "type": type, "challenge": Data(challenge).base64URLEncodedString(), "origin": origin,
        ]
        if let crossOrigin { object["crossOrigin"] = crossOrigin }
        // Sorted keys: two Swift dictionaries with the same keys may iterate in different orders (per-instance
        // hash seeds), and the signature must cover the same bytes the verifier is given.
        return try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    var authenticatorData: Data {
        AuthenticatorData(
            rpIDHash: SHA256.hash(data: Data(rpID.utf8)).rawRepresentation, flags: flags, signCount: signCount
        ).rawRepresentation
    }

    var signature: Data {
        try! key.signature(for: authenticatorData + SHA256.hash(data: clientDataJSON).rawRepresentation)
            .derRepresentation
    }
}
