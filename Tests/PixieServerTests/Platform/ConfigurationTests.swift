import Foundation
import PixieServer
import PixieWire
import SiblingsCrypto
import Testing

@Suite("pixie-server configuration")
struct ConfigurationTests {
    @Test func laterSourcesWin() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(
            #"{"port": 9000, "data_dir": "/srv/pixie", "allowed_origins": ["https://a.example", "https://b.example"], "require_user_verification": true}"#
                .utf8
        ).write(to: file)
        var configuration = PixieConfiguration()
        try configuration.apply(file: file)
        #expect(configuration.port == 9000)
        #expect(configuration.dataDirectory == "/srv/pixie")
        #expect(configuration.allowedOrigins == ["https://a.example", "https://b.example"])
        #expect(configuration.requireUserVerification)
        try configuration.apply(environment: ["PIXIE_PORT": "9100", "HOME": "/root", "PIXIE_SERVICES": "identity"])
        #expect(configuration.port == 9100)
        #expect(configuration.services == [.identity])
        try configuration.set("port", "9200", source: "--port")
        #expect(configuration.port == 9200)
    }

    /// The embedded defaults are the seed's and the issues' numbers: every service on 127.0.0.1:8080, the
    /// 3-minute grant, checkpoints at most every second, a 4 GiB sync blob cap beside a small default, a
    /// 24-hour blob TTL, real tokens at the relay, and no pinned key or webhook until one is configured.
    @Test func theDefaultsAreTheSeedsNumbers() {
        let configuration = PixieConfiguration()
        #expect(configuration.services == PixieConfiguration.Service.allCases)
        #expect(configuration.port == 8080)
        #expect(configuration.grantLifetime == 180)
        #expect(configuration.checkpointInterval == .seconds(1))
        #expect(configuration.syncMaxBlobBytes == 4 << 30)
        #expect(configuration.blobMaxBytes == 16 << 20)
        #expect(configuration.blobTTL == 86_400)
        #expect(configuration.relayTokens == .credential)
        #expect(configuration.shutdownGrace == 30)
        #expect(configuration.phoneVerifyKeys.isEmpty)
        #expect(configuration.smsWebhookURL == nil)
        #expect(configuration.webhookTimeout == 10)
        #expect(!configuration.blobAllowAnonymousUploads)
    }

    @Test("a URL refused as a setting is echoed with its password masked")
    func refusedURLsKeepTheirSecret() {
        var configuration = PixieConfiguration()
        #expect {
            try configuration.set("relay_nats_url", "tls://relay:s3cret@nats.internal:4222", source: "a test")
        } throws: { error in
            let reason = (error as? ServerError)?.reason ?? ""
            return !reason.contains("s3cret") && reason.contains("relay:xxxxx@nats.internal")
        }
    }

    @Test func everyMistakeNamesItsSource() throws {
        var configuration = PixieConfiguration()
        let cases: [(String, String)] = [
            ("port", "eighty"), ("port", "70000"), ("services", "identity,mail"), ("services", ""),
            ("phone_verify_key", "AAAA"), ("sms_webhook_url", "ftp://x"), ("rp_id", "https://x"),
            ("allowed_origins", "example.com"), ("require_user_verification", "maybe"), ("log_level", "loud"),
            ("max_body_bytes", "10"), ("grant_lifetime", "0"), ("codes_per_number_per_hour", "-1"),
            ("webhook_timeout", "0"), ("address", "pixie.example"), ("tls_cert", ""),
            ("colour", "red"),
        ]
        for (name, value) in cases {
            do {
                try configuration.set(name, value, source: "--\(name)")
                Issue.record("\(name)=\(value) was accepted")
            } catch {
                #expect(error.code == .configuration)
                #expect(error.reason.hasPrefix("--\(name)"), "\(error.reason)")
            }
        }
        #expect(throws: ServerError.self) { try configuration.apply(environment: ["PIXIE_NO_SUCH": "1"]) }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("[1]".utf8).write(to: file)
        #expect(throws: ServerError.self) { try configuration.apply(file: file) }
        #expect(throws: ServerError.self) { try configuration.apply(file: file.appendingPathExtension("missing")) }
    }

    @Test("TLS settings go together, and plain HTTP is for 127.0.0.1 only")
    func tlsSettingsTogether() throws {
        var configuration = PixieConfiguration()
        try configuration.checkTogether()
        try configuration.set("address", "0.0.0.0", source: "--address")
        let plainElsewhere = #expect(throws: ServerError.self) { try configuration.checkTogether() }
        #expect(plainElsewhere?.reason.contains("needs tls_cert and tls_key") == true)
        try configuration.set("tls_cert", "fullchain.pem", source: "--tls-cert")
        let noKey = #expect(throws: ServerError.self) { try configuration.checkTogether() }
        #expect(noKey?.reason.contains("tls_cert needs tls_key") == true)
        try configuration.set("tls_key", "privkey.pem", source: "--tls-key")
        try configuration.checkTogether()
        var keyAlone = PixieConfiguration()
        try keyAlone.set("tls_key", "privkey.pem", source: "--tls-key")
        #expect(throws: ServerError.self) { try keyAlone.checkTogether() }
    }

    @Test func aPinnedKeyParsesFromItsTrustBundleForm() throws {
        let key = HybridSignature.PrivateKey().publicKey
        var configuration = PixieConfiguration()
        try configuration.set("phone_verify_key", key.rawRepresentation.base64URLEncodedString(), source: "test")
        #expect(configuration.phoneVerifyKeys == [key])
        try configuration.set("services", "identity, phone-verify, identity", source: "test")
        #expect(configuration.services == [.phoneVerify, .identity])
    }
}

@Suite("pixie-server keys")
struct ServiceKeysTests {
    func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("pixie-keys-\(UUID().uuidString)")
    }

    @Test func keysAreMadeOnceAndReadAfterwards() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try ServiceKeys.loadOrCreate(in: directory, logger: .discard)
        let second = try ServiceKeys.loadOrCreate(in: directory, logger: .discard)
        #expect(first.trustBundle(logOrigin: "o") == second.trustBundle(logOrigin: "o"))
        for name in [
            "phone-verify.seed", "phone-id.key", "transparency-log.seed", "sender-cert.seed", "token-oprf.seed",
        ] {
            let path = directory.appendingPathComponent(name).path
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(name)")
            #expect((attributes[.size] as? Int) == 32, "\(name)")
        }
        let mode = try FileManager.default.attributesOfItem(atPath: directory.path)[.posixPermissions] as? Int
        #expect(mode == 0o700)
    }

    @Test func aDamagedKeyStopsTheServerAndIsKept() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try ServiceKeys.loadOrCreate(in: directory, logger: .discard)
        let damaged = directory.appendingPathComponent("phone-id.key")
        try Data([1, 2, 3]).write(to: damaged)
        do {
            _ = try ServiceKeys.loadOrCreate(in: directory, logger: .discard)
            Issue.record("a 3-byte key was accepted")
        } catch {
            #expect(error.reason.contains("phone-id.key"))
            #expect(error.reason.contains("restore it from a backup"))
        }
        #expect(try Data(contentsOf: damaged) == Data([1, 2, 3]))
    }

    @Test func theTrustBundleRoundTripsAndRefusesGarbage() throws {
        let bundle = ServiceKeys.generate().trustBundle(logOrigin: "example.com/kt")
        let data = try JSONEncoder().encode(bundle)
        #expect(try JSONDecoder().decode(TrustBundle.self, from: data) == bundle)
        var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        object["sender_cert_key"] = "AAAA"
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(TrustBundle.self, from: try JSONSerialization.data(withJSONObject: object))
        }
        // Version 2 must carry its checkpoint; an unknown version is refused.
        for version in [2, 3] {
            object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            object["version"] = version
            #expect(throws: DecodingError.self) {
                try JSONDecoder().decode(TrustBundle.self, from: try JSONSerialization.data(withJSONObject: object))
            }
        }
    }
}
