import Foundation
import HTTPServer
import PixieServer
import PixieWire
import SiblingsCrypto
import Testing

@Suite("credential-svc")
struct CredentialServiceTests {
    @Test func aSenderCertBindsTheSessionsAccountToTheSessionsDevice() async throws {
        let fixture = try Fixture()
        var phone = TestDevice(name: "phone")
        let created = try await fixture.createAccount(&phone)
        let accountID = try #require(created.json["account_id"] as? String)
        // Extra fields cannot point elsewhere: the account and the key come from the session.
        let response = await fixture.post(
            "/v1/credentials/sender-cert",
            object: ["account_id": "someone-else", "device_key": Data(count: 32).base64URLEncodedString()],
            token: phone.session)
        #expect(response.status == .ok, "\(response.bodyText)")
        let raw = try #require((response.json["sender_cert"] as? String).flatMap(Data.init(base64URLEncoded:)))
        let cert = try SenderCert.Verifier(pinnedKeys: [fixture.keys.senderCert.publicKey])
            .verify(raw, now: fixture.clock.now)
        #expect(cert.userIDHash == SenderCert.computeUserIDHash(accountID))
        #expect(cert.deviceKey == phone.pubkey)
        #expect(cert.expiresAt == fixture.clock.now + 3600)
        // Not verifiable with the phone-verify key: each service signs with its own.
        #expect(throws: PixieWireError.self) {
            try SenderCert.Verifier(pinnedKeys: [fixture.keys.phoneVerify.publicKey]).verify(
                raw, now: fixture.clock.now)
        }
    }

    @Test func noSessionNoCert() async throws {
        let fixture = try Fixture()
        for token in [nil, "x", SecureRandom.bytes(count: 32).base64URLEncodedString()] {
            let response = await fixture.post("/v1/credentials/sender-cert", "{}", token: token)
            #expect(response.status == .unauthorized)
        }
        // A device removed from the roster loses its certs with its session.
        var phone = TestDevice(name: "phone")
        _ = try await fixture.createAccount(&phone)
        let grant = try #require(await fixture.grant(from: phone, scope: "replace_all").json["grant"] as? String)
        var replacement = TestDevice(name: "replacement")
        _ = try await fixture.register(&replacement, grant: ["grant": grant], revokeOthers: true)
        #expect(await fixture.post("/v1/credentials/sender-cert", "{}", token: phone.session).status == .unauthorized)
        #expect(await fixture.post("/v1/credentials/sender-cert", "{}", token: replacement.session).status == .ok)
    }
}
