import Foundation
import PixieWire
import SiblingsCrypto
import Testing
import WebAuthn

/// The JSON bodies both ends share: each decodes from the snake_case body docs/openapi.yaml documents, and
/// encodes back to the same bytes, so server and device read each other's bodies with one set of types.
@Suite("PixieWire JSON bodies")
struct APITests {
    static let b64 = "AAEC"  // [0, 1, 2]
    static let bytes = Base64URLBytes(Data([0, 1, 2]))

    /// Decodes `json` as `T`, checks it equals `expected`, and that encoding gives `json` back (keys sorted).
    func roundTrip<T: Codable & Equatable>(
        _ json: String, _ expected: T, sourceLocation: SourceLocation = #_sourceLocation
    )
        throws
    {
        let decoded = try JSONDecoder().decode(T.self, from: Data(json.utf8))
        #expect(decoded == expected, sourceLocation: sourceLocation)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let canonical = try JSONSerialization.data(
            withJSONObject: try JSONSerialization.jsonObject(with: Data(json.utf8)),
            options: [.sortedKeys, .withoutEscapingSlashes])
        #expect(
            String(decoding: try encoder.encode(decoded), as: UTF8.self) == String(decoding: canonical, as: UTF8.self),
            sourceLocation: sourceLocation)
    }

    @Test("phone-verify-svc")
    func phoneVerify() throws {
        try roundTrip(#"{"phone_number":"+14155550123"}"#, PhoneVerifyAPI.StartRequest(phoneNumber: "+14155550123"))
        try roundTrip(
            #"{"attempts_allowed":5,"code_length":6,"expires_at":1700000600,"verification_id":"v1"}"#,
            PhoneVerifyAPI.StartResponse(
                verificationID: "v1", expiresAt: 1_700_000_600, codeLength: 6, attemptsAllowed: 5))
        try roundTrip(
            #"{"code":"123456","verification_id":"v1"}"#,
            PhoneVerifyAPI.CheckRequest(verificationID: "v1", code: "123456"))
        try roundTrip(
            #"{"expires_at":1,"phone_cert":"AAEC","phone_id":"AAEC"}"#,
            PhoneVerifyAPI.CheckResponse(phoneCert: Self.bytes, phoneID: Self.bytes, expiresAt: 1))
    }

    @Test("credential-svc")
    func credential() throws {
        try roundTrip(
            #"{"expires_at":9,"sender_cert":"AAEC"}"#,
            CredentialAPI.SenderCertResponse(senderCert: Self.bytes, expiresAt: 9))
        try roundTrip(
            #"{"key_list":"AAEC","token_key_id":"AAEC"}"#,
            CredentialAPI.KeysResponse(keyList: Self.bytes, tokenKeyID: Self.bytes))
        try roundTrip(
            #"{"phone_cert":"AAEC","token_request":"AAEC"}"#,
            CredentialAPI.ApprovalTokenRequest(phoneCert: Self.bytes, tokenRequest: Self.bytes))
        try roundTrip(#"{"token_request":"AAEC"}"#, CredentialAPI.SessionTokenRequest(tokenRequest: Self.bytes))
        try roundTrip(#"{"token_response":"AAEC"}"#, CredentialAPI.TokenResponse(tokenResponse: Self.bytes))
    }

    @Test("key transparency: an absent since and consistency are left out, not null")
    func transparency() throws {
        try roundTrip(#"{"sizes":[1,5]}"#, TransparencyAPI.SizesResponse(sizes: [1, 5]))
        try roundTrip(#"{"proof":"AAEC"}"#, TransparencyAPI.ProofResponse(proof: Self.bytes))
        try roundTrip(#"{"entries":["AAEC"]}"#, TransparencyAPI.EntriesResponse(entries: [Self.bytes]))
        try roundTrip(#"{"label":"oprf-keys"}"#, TransparencyAPI.LookupRequest(label: "oprf-keys"))
        try roundTrip(#"{"label":"oprf-keys","since":3}"#, TransparencyAPI.LookupRequest(label: "oprf-keys", since: 3))
        try roundTrip(
            #"{"checkpoint":"note","lookup":"AAEC"}"#,
            TransparencyAPI.LookupResponse(checkpoint: "note", consistency: nil, lookup: Self.bytes))
        try roundTrip(
            #"{"checkpoint":"note","consistency":"AAEC","lookup":"AAEC"}"#,
            TransparencyAPI.LookupResponse(checkpoint: "note", consistency: Self.bytes, lookup: Self.bytes))
    }

    @Test("identity-svc: challenges, accounts, discovery, grants, register, login")
    func identity() throws {
        try roundTrip(#"{"purpose":"replace_all"}"#, IdentityAPI.ChallengeRequest(purpose: .replaceAll))
        try roundTrip(
            #"{"challenge":"AAEC","challenge_id":"c","expires_at":2,"rp_id":"localhost"}"#,
            IdentityAPI.ChallengeResponse(challengeID: "c", challenge: Self.bytes, rpID: "localhost", expiresAt: 2))
        let authenticator = SoftwareAuthenticator()
        let credential = authenticator.makeCredential(
            rpID: "localhost", origin: "https://localhost", challenge: Data([9]), userID: Data([1]))
        let credentialJSON = String(decoding: try JSONEncoder().encode(credential), as: UTF8.self)
        let device = IdentityAPI.DeviceFields(
            pubkey: Self.bytes, name: "phone", inbox: Self.bytes, sealingKey: Self.bytes)
        let deviceJSON = #"{"inbox":"AAEC","name":"phone","pubkey":"AAEC","sealing_key":"AAEC"}"#
        let passkey = IdentityAPI.PasskeyRegistration(challengeID: "c", credential: credential)
        let passkeyJSON = #"{"challenge_id":"c","credential":\#(credentialJSON)}"#
        try roundTrip(
            #"{"account_signing_pubkey":"AAEC","device":\#(deviceJSON),"discovery_inbox":"AAEC","#
                + #""discovery_xwing_pubkey":"AAEC","passkey":\#(passkeyJSON),"phone_cert":"AAEC"}"#,
            IdentityAPI.CreateAccountRequest(
                phoneCert: Self.bytes, discoveryInbox: Self.bytes, discoveryXWingPubkey: Self.bytes,
                accountSigningPubkey: Self.bytes, device: device, passkey: passkey))
        try roundTrip(
            #"{"account_id":"a","device_id":"d","kt_handle":"k","session_expires_at":7,"session_token":"t"}"#,
            IdentityAPI.EnrolledResponse(
                accountID: "a", deviceID: "d", sessionToken: "t", sessionExpiresAt: 7, ktHandle: "k"))
        try roundTrip(
            #"{"account_id":"a","device_id":"d","session_expires_at":7,"session_token":"t"}"#,
            IdentityAPI.EnrolledResponse(accountID: "a", deviceID: "d", sessionToken: "t", sessionExpiresAt: 7))
        try roundTrip(#"{"phone_cert":"AAEC"}"#, IdentityAPI.DiscoveryRequest(phoneCert: Self.bytes))
        try roundTrip(
            #"{"discovery_inbox":"AAEC","discovery_xwing_pubkey":"AAEC"}"#,
            IdentityAPI.DiscoveryResponse(discoveryInbox: Self.bytes, discoveryXWingPubkey: Self.bytes))
        try roundTrip(#"{}"#, IdentityAPI.GrantRequest())
        try roundTrip(#"{"kind":"code","scope":"add"}"#, IdentityAPI.GrantRequest(kind: .code, scope: .add))
        try roundTrip(
            #"{"expires_at":3,"grant":"g","kind":"token","scope":"replace_all"}"#,
            IdentityAPI.GrantResponse(grant: "g", kind: .token, scope: .replaceAll, expiresAt: 3))
        try roundTrip(
            #"{"device":\#(deviceJSON),"grant":"g","passkey":\#(passkeyJSON),"revoke_others":false}"#,
            IdentityAPI.RegisterRequest(grant: "g", device: device, passkey: passkey))
        try roundTrip(
            #"{"code":"123456","device":\#(deviceJSON),"passkey":\#(passkeyJSON),"phone_cert":"AAEC","#
                + #""revoke_others":true}"#,
            IdentityAPI.RegisterRequest(
                code: "123456", phoneCert: Self.bytes, device: device, passkey: passkey, revokeOthers: true))
        let assertion = try authenticator.getAssertion(
            rpID: "localhost", origin: "https://localhost", challenge: Data([9]))
        try roundTrip(
            #"{"challenge_id":"c","credential":\#(String(decoding: try JSONEncoder().encode(assertion), as: UTF8.self))}"#,
            IdentityAPI.PasskeyAssertion(challengeID: "c", credential: assertion))
    }

    @Test("a value outside a choice is refused with the choices named")
    func choices() throws {
        let error = try #require(throws: DecodingError.self) {
            try JSONDecoder().decode(IdentityAPI.GrantRequest.self, from: Data(#"{"scope":"all"}"#.utf8))
        }
        guard case .dataCorrupted(let context) = error else { Issue.record("\(error)"); return }
        #expect(context.codingPath.map(\.stringValue) == ["scope"])
        #expect(context.debugDescription == #"must be "add" or "replace_all""#)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(IdentityAPI.ChallengeRequest.self, from: Data(#"{"purpose":"Register"}"#.utf8))
        }
        #expect(
            IdentityAPI.PasskeyPurpose.allCases.map(\.rawValue) == [
                "register", "login", "replace_all", "remove_device",
            ])
    }

    @Test("siblings: every field carried, and a device without the optional ones written with nulls")
    func siblings() throws {
        let inbox = RelaySubjectKey().subject
        let devices = IdentityAPI.SiblingsResponse(devices: [
            .init(
                deviceID: "d1", pubkey: Self.bytes, inbox: Base64URLBytes(inbox.rawRepresentation),
                sealingKey: Self.bytes, name: "Ana's phone", family: "iPhone", addedAt: 1_796_000_000, addedBy: "d0",
                lastSeenAt: 1_796_003_600),
            .init(deviceID: "d0", pubkey: Base64URLBytes(Data([7])), inbox: nil, sealingKey: nil, name: "old"),
        ])
        try roundTrip(
            #"{"devices":[{"added_at":1796000000,"added_by":"d0","device_id":"d1","family":"iPhone","#
                + #""inbox":"\#(inbox.rawRepresentation.base64URLEncodedString())","last_seen_at":1796003600,"#
                + #""name":"Ana's phone","pubkey":"AAEC","sealing_key":"AAEC"},"#
                + #"{"added_at":null,"added_by":null,"device_id":"d0","family":null,"inbox":null,"last_seen_at":null,"#
                + #""name":"old","pubkey":"Bw","sealing_key":null}]}"#,
            devices)
        #expect(
            try devices.roster() == [
                RosterDevice(pubkey: Data([0, 1, 2]), inbox: inbox, sealingKey: Data([0, 1, 2])),
                RosterDevice(pubkey: Data([7]), inbox: nil, sealingKey: nil),
            ])
        // A server from before names were listed: the name reads as empty, the family as none.
        let older = try JSONDecoder().decode(
            IdentityAPI.SiblingsResponse.self,
            from: Data(#"{"devices":[{"device_id":"d0","inbox":null,"pubkey":"Bw","sealing_key":null}]}"#.utf8))
        #expect(older.devices.first?.name == "" && older.devices.first?.family == nil)
        var bad = devices
        bad.devices[0].inbox = Self.bytes
        #expect(throws: PixieWireError.self) { try bad.roster() }
    }

    @Test("errors and health")
    func errors() throws {
        try roundTrip(
            #"{"error":"rate_limited","reason":"try again in 5 seconds"}"#,
            APIErrorResponse(error: "rate_limited", reason: "try again in 5 seconds"))
        try roundTrip(#"{"status":"ok"}"#, HealthResponse(status: "ok"))
    }
}
