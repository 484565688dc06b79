import Foundation
import SiblingsCrypto
import WebAuthn

/// WebAuthn's parsers (docs/webauthn.md): CBOR, COSE keys, authenticator data, and a registration's
/// attestation object and client data JSON through the relying party (format "none": no signature to pay for).
/// Every error must be a `WebAuthnError`; a CBOR value accepted must decode again, once encoded, to itself.
let webAuthnTarget = FuzzTarget(
    name: "webauthn",
    summary: "CBOR, COSE keys, authenticator data, attestation objects and client data JSON (WebAuthn)",
    maximumLength: 8192,
    seeds: {
        let point = P256.Signing.PrivateKey().publicKey.x963Representation
        let cose = CBOR.map([
            CBOR(1): CBOR(2), CBOR(3): CBOR(-7), CBOR(-1): CBOR(1),
            CBOR(-2): .bytes(point.subdata(in: 1..<33)), CBOR(-3): .bytes(point.subdata(in: 33..<65)),
        ]).encoded()
        var authenticatorData = Data(SHA256.hash(data: Data(webAuthnRPID.utf8)))
        authenticatorData += [0x45, 0, 0, 0, 0] + Data(count: 16) + [0, 16] + Data(repeating: 6, count: 16) + cose
        let attestation = CBOR.map([
            .text("fmt"): .text("none"), .text("attStmt"): .map([:]), .text("authData"): .bytes(authenticatorData),
        ]).encoded()
        return [cose, authenticatorData, attestation, webAuthnClientData]
    },
    run: { input in
        expectOnly(WebAuthnError.self, "CBORDecoder.decode") {
            let value = try CBORDecoder().decode(input)
            guard (try? CBORDecoder().decode(value.encoded())) == value else {
                finding("a CBOR value does not survive encoding: \(value)")
            }
        }
        expectOnly(WebAuthnError.self, "COSEKey(cborRepresentation:)") { _ = try COSEKey(cborRepresentation: input) }
        expectOnly(WebAuthnError.self, "AuthenticatorData(rawRepresentation:)") {
            _ = try AuthenticatorData(rawRepresentation: input)
        }
        expectOnly(WebAuthnError.self, "verifyRegistration(attestationObject:)") {
            _ = try webAuthnParty.verifyRegistration(
                attestationObject: input, clientDataJSON: webAuthnClientData, expectedChallenge: webAuthnChallenge)
        }
        expectOnly(WebAuthnError.self, "verifyRegistration(clientDataJSON:)") {
            _ = try webAuthnParty.verifyRegistration(
                attestationObject: Data(), clientDataJSON: input, expectedChallenge: webAuthnChallenge)
        }
    })

let webAuthnRPID = "fuzz.example"
let webAuthnChallenge = Data(repeating: 0x42, count: 32)
let webAuthnParty = WebAuthnRelyingParty(
    rpID: webAuthnRPID, allowedOrigins: ["https://fuzz.example"], requiresUserVerification: true)
/// A client data JSON the relying party accepts for ``webAuthnChallenge``.
let webAuthnClientData = Data(
    #"{"type":"webauthn.create","challenge":"\#(webAuthnChallenge.base64URLEncodedString())","origin":"https://fuzz.example","crossOrigin":false}"#
        .utf8)
