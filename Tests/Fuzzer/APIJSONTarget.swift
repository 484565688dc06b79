import Foundation
import PixieWire
import SiblingsCrypto
import WebAuthn

/// Every JSON body of the HTTP API (PixieWire's `…API` types, docs/pixie-protocol.md): the requests
/// pixie-server decodes (`HTTPRequest.decode`), and the responses and trust bundle a device decodes. Each input
/// is decoded as every type. A refusal must be a `DecodingError`, and a body that is accepted must encode to
/// JSON that decodes again to the same value.
let apiJSONTarget = FuzzTarget(
    name: "api-json",
    summary: "every JSON request and response body of the HTTP API, and the trust bundle (PixieWire)",
    maximumLength: 16_384,
    seeds: {
        let bytes = { (count: Int, fill: UInt8) in Base64URLBytes(Data(repeating: fill, count: count)) }
        let device = IdentityAPI.DeviceFields(
            pubkey: bytes(32, 1), name: "Pixel", inbox: bytes(32, 2), sealingKey: bytes(1216, 3))
        let registration = IdentityAPI.PasskeyRegistration(
            challengeID: "c1",
            credential: RegistrationResponseJSON(
                id: "AQID", rawId: "AQID",
                response: .init(clientDataJSON: "e30", attestationObject: "oA", transports: ["internal"]),
                authenticatorAttachment: "platform"))
        let assertion = IdentityAPI.PasskeyAssertion(
            challengeID: "c2",
            credential: AuthenticationResponseJSON(
                id: "AQID", rawId: "AQID",
                response: .init(clientDataJSON: "e30", authenticatorData: "AA", signature: "MAA", userHandle: "AQ")))
        let key = HybridSignature.PrivateKey().publicKey
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let bodies: [any Encodable] = [
            CredentialAPI.ApprovalTokenRequest(phoneCert: bytes(64, 4), tokenRequest: bytes(40, 5)),
            CredentialAPI.SessionTokenRequest(tokenRequest: bytes(40, 5)),
            IdentityAPI.ChallengeRequest(purpose: .replaceAll),
            IdentityAPI.CreateAccountRequest(
                phoneCert: bytes(64, 4), discoveryInbox: bytes(32, 6), discoveryXWingPubkey: bytes(1216, 7),
                accountSigningPubkey: bytes(1984, 8), device: device, passkey: registration),
            IdentityAPI.DiscoveryRequest(phoneCert: bytes(64, 4)),
            IdentityAPI.GrantRequest(kind: .code, scope: .add, passkey: assertion),
            assertion,
            IdentityAPI.RegisterRequest(
                code: "123456", phoneCert: bytes(64, 4), device: device, passkey: registration, revokeOthers: true),
            PhoneVerifyAPI.StartRequest(phoneNumber: "+15555550100"),
            PhoneVerifyAPI.CheckRequest(verificationID: "v1", code: "000000"),
            TransparencyAPI.LookupRequest(label: "phone/ab", since: 7),
            APIErrorResponse(error: "rate_limited", reason: "wait"),
            HealthResponse(status: "ok"),
            BlobAPI.UploadResponse(
                blobID: "b1", sizeBytes: 1 << 20, sha256: String(repeating: "ab", count: 32), expiresAt: 9),
            CredentialAPI.SenderCertResponse(senderCert: bytes(90, 9), expiresAt: 9),
            CredentialAPI.KeysResponse(keyList: bytes(70, 10), tokenKeyID: bytes(32, 11)),
            CredentialAPI.TokenResponse(tokenResponse: bytes(100, 12)),
            IdentityAPI.ChallengeResponse(
                challengeID: "c1", challenge: bytes(32, 13), rpID: "example.com", expiresAt: 9),
            IdentityAPI.EnrolledResponse(
                accountID: "a1", deviceID: "d1", sessionToken: "s", sessionExpiresAt: 9, ktHandle: "kt"),
            IdentityAPI.DiscoveryResponse(discoveryInbox: bytes(32, 6), discoveryXWingPubkey: bytes(1216, 7)),
            IdentityAPI.GrantResponse(grant: "g", kind: .token, scope: .replaceAll, expiresAt: 9),
            IdentityAPI.SiblingsResponse(devices: [
                .init(
                    deviceID: "d1", pubkey: bytes(32, 1), inbox: bytes(32, 2), sealingKey: nil, name: "phone",
                    family: "iPhone")
            ]),
            PhoneVerifyAPI.StartResponse(verificationID: "v1", expiresAt: 9, codeLength: 6, attemptsAllowed: 5),
            PhoneVerifyAPI.CheckResponse(phoneCert: bytes(64, 4), phoneID: bytes(32, 14), expiresAt: 9),
            TransparencyAPI.SizesResponse(sizes: [1, 2, 4]),
            TransparencyAPI.ProofResponse(proof: bytes(64, 15)),
            TransparencyAPI.EntriesResponse(entries: [bytes(10, 16), bytes(0, 0)]),
            TransparencyAPI.LookupResponse(checkpoint: "origin\n1\nAAAA\n", consistency: nil, lookup: bytes(80, 17)),
            TrustBundle(
                phoneVerifyKey: key, transparencyLogKey: key, transparencyLogOrigin: "pixie.example/log",
                senderCertKey: key, transparencyCheckpoint: "origin\n1\nAAAA\n"),
        ]
        return try bodies.map { try encoder.encode($0) }
    },
    run: { input in
        // One call per type, not a loop over metatypes: each call is specialized, so coverage tells the types'
        // paths apart, and no existential is opened per input.
        roundTrip(CredentialAPI.ApprovalTokenRequest.self, input)
        roundTrip(CredentialAPI.SessionTokenRequest.self, input)
        roundTrip(IdentityAPI.ChallengeRequest.self, input)
        roundTrip(IdentityAPI.CreateAccountRequest.self, input)
        roundTrip(IdentityAPI.DiscoveryRequest.self, input)
        roundTrip(IdentityAPI.GrantRequest.self, input)
        roundTrip(IdentityAPI.PasskeyAssertion.self, input)
        roundTrip(IdentityAPI.RegisterRequest.self, input)
        roundTrip(PhoneVerifyAPI.StartRequest.self, input)
        roundTrip(PhoneVerifyAPI.CheckRequest.self, input)
        roundTrip(TransparencyAPI.LookupRequest.self, input)
        roundTrip(APIErrorResponse.self, input)
        roundTrip(HealthResponse.self, input)
        roundTrip(BlobAPI.UploadResponse.self, input)
        roundTrip(CredentialAPI.SenderCertResponse.self, input)
        roundTrip(CredentialAPI.KeysResponse.self, input)
        roundTrip(CredentialAPI.TokenResponse.self, input)
        roundTrip(IdentityAPI.ChallengeResponse.self, input)
        roundTrip(IdentityAPI.EnrolledResponse.self, input)
        roundTrip(IdentityAPI.DiscoveryResponse.self, input)
        roundTrip(IdentityAPI.GrantResponse.self, input)
        roundTrip(IdentityAPI.SiblingsResponse.self, input)
        roundTrip(PhoneVerifyAPI.StartResponse.self, input)
        roundTrip(PhoneVerifyAPI.CheckResponse.self, input)
        roundTrip(TransparencyAPI.SizesResponse.self, input)
        roundTrip(TransparencyAPI.ProofResponse.self, input)
        roundTrip(TransparencyAPI.EntriesResponse.self, input)
        roundTrip(TransparencyAPI.LookupResponse.self, input)
        roundTrip(TrustBundle.self, input)
    })

/// Decodes `input` as `T`; a refusal other than a `DecodingError` is a finding, and so is a value that does not
/// come back the same from its own JSON.
private func roundTrip<T: Codable & Equatable>(_ type: T.Type, _ input: Data) {
    let value: T
    do {
        value = try JSONDecoder().decode(T.self, from: input)
    } catch is DecodingError {
        return
    } catch {
        finding("decoding \(T.self) threw \(Swift.type(of: error)), not a DecodingError: \(error)")
    }
    do {
        guard try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value)) == value else {
            finding("\(T.self) decodes to another value from its own JSON")
        }
    } catch {
        finding("\(T.self) accepted a body whose value does not survive its own JSON: \(error)")
    }
}
