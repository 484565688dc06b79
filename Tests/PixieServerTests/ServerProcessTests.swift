import Foundation
import HTTPServer
import PixieDevice
import PixieServer
import PixieWire
import SiblingsCrypto
import SiblingsTestSupport
import Synchronization
import Testing
import Transparency
import WebAuthn

#if canImport(Glibc)
    import Glibc
#endif

/// pixie-server started as README.md says (`pixie-server --data-dir DIR --port 0`), spoken to over real HTTP.
@Suite("pixie-server, run as a process")
struct ServerProcessTests {
    @Test("health, metrics, a phone verification through the outbox, a discovery lookup, the trust bundle, SIGTERM")
    func endToEnd() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(dataDirectory: directory)

        let health = try await server.request("GET", "/healthz")
        #expect(health.status == 200)
        #expect((health.headers["Content-Type"] as? String)?.hasPrefix("application/json") == true)
        #expect(health.body.jsonObject["status"] as? String == "ok")

        let number = "+14155550123"
        let started = try await server.request("POST", "/v1/phone/verifications", json: ["phone_number": number])
        #expect(started.status == 201)
        let verificationID = try #require(started.body.jsonObject["verification_id"] as? String)
        let code = try #require(try Self.lastCode(to: number, in: directory))
        let checked = try await server.request(
            "POST", "/v1/phone/verifications/check", json: ["verification_id": verificationID, "code": code])
        #expect(checked.status == 200)
        let certText = try #require(checked.body.jsonObject["phone_cert"] as? String)
        let cert = try #require(Data(base64URLEncoded: certText))
        let phoneID = try #require(
            (checked.body.jsonObject["phone_id"] as? String).flatMap(Data.init(base64URLEncoded:)))

        let again = try await server.request(
            "POST", "/v1/phone/verifications/check", json: ["verification_id": verificationID, "code": code])
        #expect(again.status == 409)
        #expect(again.body.jsonObject["error"] as? String == "code_already_used")

        let lookup = try await server.request("POST", "/v1/discovery/own", json: ["phone_cert": certText])
        #expect(lookup.status == 404)
        #expect(lookup.body.jsonObject["error"] as? String == "no_account")

        let metrics = try await server.request("GET", "/metrics")
        #expect(metrics.status == 200)
        let exposition = String(decoding: metrics.body, as: UTF8.self)
        #expect(exposition.contains("pixie_http_requests_total{"))
        #expect(exposition.contains("route=\"/v1/phone/verifications/check\""))

        #expect(server.terminate() == 0)
        #expect(server.logText.contains("\"msg\":\"stopped\""), "\(server.logText)")

        // The trust bundle of the same data directory pins the key that signed the cert.
        let bundle = try ServerProcess.run(["trust-bundle", "--data-dir", directory.path])
        #expect(bundle.status == 0, "\(bundle.err)")
        let trust = try JSONDecoder().decode(TrustBundle.self, from: Data(bundle.out.utf8))
        // It ships the log's latest checkpoint, signed by the key it pins: a new device starts from it.
        #expect(trust.version == 2)
        #expect(try TransparencyVerifier(trustBundle: trust).pinned != nil)
        let verified = try PhoneOwnershipCert.Verifier(pinnedKeys: [trust.phoneVerifyKey]).verify(cert, now: Date())
        #expect(verified.phoneID == phoneID)
        let stranger = HybridSignature.PrivateKey().publicKey
        #expect(throws: PixieWireError.self) {
            try PhoneOwnershipCert.Verifier(pinnedKeys: [stranger]).verify(cert, now: Date())
        }
    }

    @Test("pixie-server audit follows a running server's log over HTTP, and refuses a log signed by another key")
    func audit() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(
            dataDirectory: directory, extraArguments: ["--checkpoint-interval-ms", "5"])
        defer { _ = server.terminate() }

        // A first device creates an account over real HTTP: three bindings reach the log, after the OPRF key
        // list credential-svc logged at start.
        let cert = try await server.phoneCert(for: "+14155550123")
        let challenge = try await server.request("POST", "/v1/auth/passkey/challenge", json: ["purpose": "register"])
        let challengeBytes = try #require(
            (challenge.body.jsonObject["challenge"] as? String).flatMap(Data.init(base64URLEncoded:)))
        let credential = SoftwareAuthenticator().makeCredential(
            rpID: "localhost", origin: "https://localhost", challenge: challengeBytes, userID: Data([1]))
        let created = try await server.request(
            "POST", "/v1/accounts",
            json: [
                "phone_cert": cert, "discovery_inbox": SecureRandom.bytes(count: 32).base64URLEncodedString(),
                "discovery_xwing_pubkey": XWing.PrivateKey().publicKey.rawRepresentation.base64URLEncodedString(),
                "account_signing_pubkey": HybridSignature.PrivateKey().publicKey.rawRepresentation
                    .base64URLEncodedString(),
                "device": [
                    "pubkey": SecureRandom.bytes(count: 32).base64URLEncodedString(), "name": "phone",
                    "inbox": RelaySubjectKey().subject.rawRepresentation.base64URLEncodedString(),
                    "sealing_key": XWing.PrivateKey().publicKey.rawRepresentation.base64URLEncodedString(),
                ],
                "passkey": [
                    "challenge_id": try #require(challenge.body.jsonObject["challenge_id"] as? String),
                    "credential": try JSONSerialization.jsonObject(with: JSONEncoder().encode(credential)),
                ],
            ])
        #expect(created.status == 201, "\(String(decoding: created.body, as: UTF8.self))")

        let bundle = try ServerProcess.run(["trust-bundle", "--data-dir", directory.path])
        let bundleFile = directory.appendingPathComponent("trust.json")
        try Data(bundle.out.utf8).write(to: bundleFile)
        let audit = try ServerProcess.run(
            ["audit", "--url", server.address.absoluteString, "--trust-bundle", bundleFile.path, "--json"])
        #expect(audit.status == 0, "\(audit.err)")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(audit.out.utf8)) as? [String: Any])
        #expect(result["ok"] as? Bool == true)
        // The two OPRF key lists (send and upload, logged at start) and the account's three bindings.
        #expect(result["entries"] as? Int == 5)

        // Another server's bundle: the checkpoints do not verify, and the audit says so.
        let otherDirectory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: otherDirectory) }
        let other = try ServerProcess.run(["trust-bundle", "--data-dir", otherDirectory.path])
        let otherFile = otherDirectory.appendingPathComponent("trust.json")
        try Data(other.out.utf8).write(to: otherFile)
        let refused = try ServerProcess.run(
            ["audit", "--url", server.address.absoluteString, "--trust-bundle", otherFile.path])
        #expect(refused.status == 1)
        #expect(refused.err.contains("audit failed"), "\(refused.err)")

        // --timeout is whole seconds, 1 to a day.
        for bad in ["0", "soon", "86401"] {
            let usage = try ServerProcess.run(
                ["audit", "--url", server.address.absoluteString, "--trust-bundle", bundleFile.path, "--timeout", bad])
            #expect(usage.status == 64)
            #expect(usage.err.contains("--timeout must be a number of seconds"), "\(usage.err)")
        }
        let patient = try ServerProcess.run(
            ["audit", "--url", server.address.absoluteString, "--trust-bundle", bundleFile.path, "--timeout", "5"])
        #expect(patient.status == 0, "\(patient.err)")
    }

    @Test("pixie-server audit passes an honest log served over HTTP and catches one rewritten byte of an entry")
    func auditCatchesARewrittenEntry() async throws {
        let fixture = try Fixture()
        var phone = TestDevice(name: "phone")
        _ = try await fixture.createAccount(&phone)
        // A server in front of identity-svc's log that passes everything through, or rewrites the last byte
        // (the end of the value) of every entry it serves.
        let rewrite = Mutex(false)
        var router = Router()
        for path in ["/v1/kt/checkpoint", "/v1/kt/checkpoints", "/v1/kt/consistency", "/v1/kt/entries"] {
            router.get(path) { [upstream = fixture.router] request, _ in
                var components = URLComponents()
                components.queryItems = request.queryItems.map { URLQueryItem(name: $0.name, value: $0.value) }
                var response = await upstream.test(.get, path + (components.string ?? ""))
                guard path == "/v1/kt/entries", rewrite.withLock({ $0 }),
                    let object = try JSONSerialization.jsonObject(with: response.body) as? [String: [String]]
                else { return response }
                let entries = try (object["entries"] ?? []).map { text in
                    var entry = try #require(Data(base64URLEncoded: text))
                    entry[entry.count - 1] ^= 1
                    return entry.base64URLEncodedString()
                }
                response.body = try JSONSerialization.data(withJSONObject: ["entries": entries])
                return response
            }
        }
        let proxy = try HTTPServer(responder: router)
        defer { Task { await proxy.shutdown() } }
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let bundle = directory.appendingPathComponent("trust.json")
        try JSONEncoder().encode(await fixture.application.trustBundle()).write(to: bundle)
        let arguments = ["audit", "--url", "http://127.0.0.1:\(proxy.port)", "--trust-bundle", bundle.path, "--json"]

        // The audit process calls back into this one: it runs off the concurrency pool the proxy answers on.
        let honest = try await onThread { try ServerProcess.run(arguments) }
        #expect(honest.status == 0, "\(honest.err)")
        #expect(Data(honest.out.utf8).jsonObject["ok"] as? Bool == true)
        rewrite.withLock { $0 = true }
        let caught = try await onThread { try ServerProcess.run(arguments) }
        #expect(caught.status == 1)
        #expect(Data(caught.out.utf8).jsonObject["ok"] as? Bool == false)
        #expect(caught.err.contains("audit failed"), "\(caught.err)")
    }

    @Test("--sms-webhook-url sends the codes to the gateway with its bearer secret, and no outbox is written")
    func smsWebhookIsSelectedByItsSetting() async throws {
        let received = Mutex<[(authorization: String?, body: Data)]>([])
        var router = Router()
        router.post("/sms") { request, _ in
            received.withLock { $0.append((request.headers["Authorization"], request.body)) }
            return .text("queued", status: .accepted)
        }
        let gateway = try HTTPServer(responder: router)
        defer { Task { await gateway.shutdown() } }
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(
            dataDirectory: directory,
            extraArguments: [
                "phone-verify", "--sms-webhook-url", "http://127.0.0.1:\(gateway.port)/sms", "--sms-webhook-secret",
                "s3cret", "--webhook-timeout", "120",
            ])
        defer { _ = server.terminate() }
        let started = try await server.request(
            "POST", "/v1/phone/verifications", json: ["phone_number": "+14155550123"])
        #expect(started.status == 201, "\(String(decoding: started.body, as: UTF8.self))")
        let messages = received.withLock { $0 }
        #expect(messages.count == 1)
        #expect(messages.first?.authorization == "Bearer s3cret")
        let message = try #require(messages.first?.body.jsonObject)
        #expect(message["to"] as? String == "+14155550123")
        #expect((message["text"] as? String)?.contains { $0.isNumber } == true)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("sms-outbox.jsonl").path))
    }

    @Test("an unknown flag is a usage error: exit 64 and a message that names it")
    func badFlag() throws {
        let result = try ServerProcess.run(["--frobnicate"])
        #expect(result.status == 64)
        #expect(result.err.contains("--frobnicate"))
        #expect(result.err.contains("--help"))
    }

    @Test("a key file of the wrong size stops the server with exit 1, names the file and is left as it was")
    func corruptKeyFile() throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = directory.appendingPathComponent("keys")
        try FileManager.default.createDirectory(
            at: keys, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let keyFile = keys.appendingPathComponent("phone-id.key")
        let corrupt = Data("short".utf8)
        try corrupt.write(to: keyFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)

        let result = try ServerProcess.run(["--data-dir", directory.path, "--port", "0"])
        #expect(result.status == 1)
        #expect(result.err.contains("phone-id.key"), "\(result.err)")
        #expect(!result.err.contains("\"msg\":\"listening\""))
        #expect(try Data(contentsOf: keyFile) == corrupt)
    }

    @Test("SIGTERM refuses new connections, lets an upload in flight finish and keep its blob, then exits 0")
    func sigtermFinishesTheRequestInFlight() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(
            dataDirectory: directory, extraArguments: ["--blob-allow-anonymous-uploads", "true"])
        let port = try #require(server.address.port)
        let socket = try #require(RawSocket(port: port))
        let body = SecureRandom.bytes(count: 64 << 10)
        let head =
            "POST /v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Length: \(body.count)\r\n\r\n"
        #expect(socket.send(Data(head.utf8) + body.prefix(1000)))
        // Nothing here suspends until the upload is done: a test task starved by the rest of the suite for 30 s
        // would let the server's idle timeout close the connection. The upload is in flight once blob-svc has its
        // file in tmp/.
        let uploads = directory.appendingPathComponent("blobs/tmp")
        for _ in 0..<24_000 where ((try? FileManager.default.contentsOfDirectory(atPath: uploads.path)) ?? []).isEmpty {
            usleep(5000)
        }
        #expect(kill(server.processIdentifier, SIGTERM) == 0)
        var refused = false
        for _ in 0..<24_000 where !refused {
            if RawSocket(port: port) == nil { refused = true } else { usleep(5000) }
        }
        #expect(refused, "pixie-server still took new connections after SIGTERM")
        #expect(socket.send(body.dropFirst(1000)))
        let reply = socket.receive { Self.jsonBody($0)?["blob_id"] != nil }
        #expect(String(decoding: reply.prefix(12), as: UTF8.self) == "HTTP/1.1 201")
        let blobID = try #require(Self.jsonBody(reply)?["blob_id"] as? String)
        #expect(server.waitForExit() == 0)
        #expect(server.logText.contains("\"msg\":\"stopped\""), "\(server.logText)")
        #expect(!server.logText.contains("cut off"), "\(server.logText)")

        // The blob was kept: the next start serves it.
        let restarted = try await ServerProcess(dataDirectory: directory)
        defer { _ = restarted.terminate() }
        let fetched = try await restarted.request("GET", "/v1/blobs/\(blobID)")
        #expect(fetched.status == 200)
        #expect(fetched.body == body)
    }

    /// The JSON object after the head of an HTTP response, once all of it has arrived.
    static func jsonBody(_ response: Data) -> [String: Any]? {
        guard let end = response.range(of: Data("\r\n\r\n".utf8)) else { return nil }
        return try? JSONSerialization.jsonObject(with: response[end.upperBound...]) as? [String: Any]
    }

    @Test("pixie-server --help and serve --help list the services and every setting")
    func help() throws {
        let top = try ServerProcess.run(["--help"])
        #expect(top.status == 0, "\(top.err)")
        for service in ["phone-verify", "identity", "credential", "blob", "relay", "trust-bundle", "audit"] {
            #expect(top.out.contains(service), "--help does not mention \(service)")
        }
        let serve = try ServerProcess.run(["serve", "--help"])
        #expect(serve.status == 0, "\(serve.err)")
        for setting in PixieConfiguration.settings.map(\.name) {
            let flag = setting.replacingOccurrences(of: "_", with: "-")
            #expect(serve.out.contains(flag), "serve --help lacks \(flag)")
        }
    }

    @Test("phone-verify and identity run alone in two processes: identity takes the cert under the pinned key only")
    func servicesAlone() async throws {
        let verifyDirectory = try ServerProcess.temporaryDirectory()
        let identityDirectory = try ServerProcess.temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: verifyDirectory)
            try? FileManager.default.removeItem(at: identityDirectory)
        }
        let phoneVerify = try await ServerProcess(dataDirectory: verifyDirectory, extraArguments: ["phone-verify"])
        defer { _ = phoneVerify.terminate() }
        let bundle = try ServerProcess.run(["trust-bundle", "--data-dir", verifyDirectory.path])
        #expect(bundle.status == 0, "\(bundle.err)")
        let pinned = try #require(Data(bundle.out.utf8).jsonObject["phone_verify_key"] as? String)

        let identity = try await ServerProcess(
            dataDirectory: identityDirectory, extraArguments: ["identity", "--phone-verify-key", pinned])
        defer { _ = identity.terminate() }
        // Without a pinned key identity-svc refuses certs, never skips the check.
        let unpinnedDirectory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: unpinnedDirectory) }
        let unpinned = try await ServerProcess(dataDirectory: unpinnedDirectory, extraArguments: ["identity"])
        defer { _ = unpinned.terminate() }

        // Each process serves its own service only.
        #expect(
            try await identity.request("POST", "/v1/phone/verifications", json: ["phone_number": "+1"]).status == 404)
        #expect(try await phoneVerify.request("POST", "/v1/discovery/own", json: ["phone_cert": "x"]).status == 404)

        let cert = try await phoneVerify.phoneCert(for: "+14155550123")

        // The cert from the other process verifies under the pinned key: no account yet, which is a 404.
        let lookup = try await identity.request("POST", "/v1/discovery/own", json: ["phone_cert": cert])
        #expect(lookup.status == 404)
        #expect(lookup.body.jsonObject["error"] as? String == "no_account")
        let refused = try await unpinned.request("POST", "/v1/discovery/own", json: ["phone_cert": cert])
        #expect(refused.status == 503)
        #expect(refused.body.jsonObject["error"] as? String == "phone_verify_key_not_pinned")
        // A cert from a phone-verify the identity process does not pin is refused.
        let strangerDirectory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: strangerDirectory) }
        let stranger = try await ServerProcess(dataDirectory: strangerDirectory, extraArguments: ["phone-verify"])
        defer { _ = stranger.terminate() }
        let foreign = try await stranger.phoneCert(for: "+14155550123")
        let forged = try await identity.request("POST", "/v1/discovery/own", json: ["phone_cert": foreign])
        #expect(forged.status == 401, "\(String(decoding: forged.body, as: UTF8.self))")
    }

    /// The six digits of the last development SMS to `number` in `<data_dir>/sms-outbox.jsonl`.
    static func lastCode(to number: String, in directory: URL) throws -> String? {
        DevelopmentOutbox.latestCode(
            in: try Data(contentsOf: directory.appendingPathComponent("sms-outbox.jsonl")), to: number)
    }
}

extension ServerProcess {
    /// A PhoneOwnershipCert (base64url) for `number` from this process's phone-verify-svc: a verification
    /// started, its code read from the development outbox, and checked.
    func phoneCert(for number: String) async throws -> String {
        let started = try await request("POST", "/v1/phone/verifications", json: ["phone_number": number])
        let verificationID = try #require(started.body.jsonObject["verification_id"] as? String)
        let code = try #require(try ServerProcessTests.lastCode(to: number, in: dataDirectory))
        let checked = try await request(
            "POST", "/v1/phone/verifications/check", json: ["verification_id": verificationID, "code": code])
        return try #require(checked.body.jsonObject["phone_cert"] as? String)
    }
}
