import Foundation
import HTTPServer
import PixieServer
import PixieWire
@_spi(Testing) import PrivacyPass
import Processes
import SiblingsTestSupport
import Storage
import Testing
import WebSockets

@Suite("Relay: malformed frames, limits, and an outside client")
struct RelayProtocolTests {
    /// Sends `bytes` and expects an ERROR with `code`, then the close `closeCode` (nil: the connection stays).
    func expectRefusal(
        _ bytes: Data, code: RelayErrorCode, closeCode: WebSocketCloseCode?, relay: RelayHarness
    ) async throws {
        let client = try await relay.connect()
        try await client.socket.send(binary: bytes)
        let answer = try await client.next()
        guard case .error(_, let got, let reason) = answer else {
            Issue.record("\(bytes.prefix(8).map { String($0, radix: 16) }) was answered \(answer), not an ERROR")
            return
        }
        #expect(got == code, "the ERROR was \(got): \(reason)")
        #expect(!reason.isEmpty)
        if let closeCode {
            #expect(try await client.socket.receive() == nil)
            #expect(client.socket.closeCode == closeCode)
        } else {
            #expect(try await client.request { .ping(requestID: $0) } == .ok(requestID: 1))
            await client.close()
        }
    }

    @Test("malformed frames get an ERROR and a close 1002; text gets 1003; too long gets 1009")
    func malformed() async throws {
        let relay = try RelayHarness(maximumPayloadBytes: 2048)
        let subject = randomSubject().rawRepresentation
        let id = Data([0, 0, 0, 5])
        let cases: [(Data, RelayErrorCode)] = [
            (Data(), .malformed),
            (Data([0x01, 0, 0]), .malformed),
            (Data([0x09]) + id, .unknownType),
            (Data([0x81]) + id + subject, .unknownType),
            (Data([0x01]) + id + subject.prefix(31), .malformed),
            (Data([0x01]) + id + subject + Data([0, 0, 0xff]), .malformed),
            (Data([0x01]) + id + subject + Data([0x02, 0x01]), .malformed),
            (Data([0x02]) + id + subject + Data([0]), .malformed),
            (Data([0x03]) + id + subject + Data([7, 0, 1, 1]), .malformed),
            (Data([0x03]) + id + subject + Data([0, 0, 0]), .malformed),
            (Data([0x03]) + id + subject + Data([0, 0, 9, 1]), .malformed),
            (Data([0x04]) + id + Data([0]), .malformed),
        ]
        for (bytes, code) in cases {
            try await expectRefusal(bytes, code: code, closeCode: .protocolError, relay: relay)
        }
        // A text message is not a relay frame.
        let text = try await relay.connect()
        try await text.socket.send(text: "SUBSCRIBE")
        #expect(try await text.socket.receive() == nil)
        #expect(text.socket.closeCode == .unsupportedData)
        // A message past the frame limit closes with 1009 before it is read.
        let big = try await relay.connect()
        try await big.socket.send(binary: Data(repeating: 0, count: 2048 + 1025))
        _ = try? await big.socket.receive()
        #expect(big.socket.closeCode == .messageTooBig)
        #expect(relay.metrics.counter("pixie_relay_frames_dropped_total", labels: ["reason": "malformed"]) == 10)
        #expect(relay.metrics.counter("pixie_relay_frames_dropped_total", labels: ["reason": "unknown_type"]) == 2)
        try await relay.waitForNoConnections()
        await relay.server.shutdown()
    }

    @Test("limits: too many subjects, a payload too large, unsubscribing a stranger's subject")
    func limits() async throws {
        let relay = try RelayHarness(maximumSubjects: 2, maximumPayloadBytes: 2048)
        let client = try await relay.connect()
        try await client.subscribe(randomSubject())
        try await client.subscribe(randomSubject())
        guard case .error(3, .tooManySubjects, _) = try await client.subscribe(randomSubject()) else {
            Issue.record("a third subject was accepted")
            return
        }
        let token = relay.token()
        guard
            case .error(4, .frameTooLarge, _) = try await client.send(
                Data(count: 2049), to: randomSubject(), token: token)
        else {
            Issue.record("a payload past the limit was accepted")
            return
        }
        guard
            case .error(5, .notSubscribed, _) = try await client.request({
                .unsubscribe(requestID: $0, subject: randomSubject())
            })
        else {
            Issue.record("unsubscribing an unknown subject was accepted")
            return
        }
        // The refused SEND did not spend its token.
        #expect(try await client.send(Data(count: 2048), to: randomSubject(), token: token) == .ok(requestID: 6))
        await client.close()
        await relay.server.shutdown()
    }

    @Test("the relay alone spends credential-svc's tokens (same keys, same store): a real one once, nothing else")
    func credentialTokens() async throws {
        var configuration = PixieConfiguration()
        configuration.services = [.relay]
        let keys = ServiceKeys.generate()
        let application = try Application(
            configuration: configuration, keys: keys, database: try SQLiteDatabase.inMemory(),
            sms: RecordingSMSSender(), logger: .discard)
        // A token credential-svc would have issued: the same OPRF key, blind issuance.
        let issuer = TokenIssuer(privateKey: keys.tokenOPRF)
        let list = try KeyList(
            epoch: 1, entries: [KeyList.Entry(publicKey: issuer.publicKey, notBefore: 0, notAfter: 4_102_444_800)])
        let client = try TokenClient(publicKey: issuer.publicKey, keyList: list)
        let (request, pending) = try client.begin(count: 1)
        let token = try #require(try client.finish(try issuer.respond(to: request), pending: pending).first)

        let server = try HTTPServer(responder: application.router)
        let relay = try await RelayTestClient.connect(port: server.port)
        guard case .error(1, .tokenInvalid, _) = try await relay.send(Data(), to: randomSubject(), token: Data([1]))
        else {
            Issue.record("a SEND went through with a token that does not verify")
            return
        }
        #expect(try await relay.send(Data(), to: randomSubject(), token: token.rawRepresentation) == .ok(requestID: 2))
        guard
            case .error(3, .tokenSpent, _) = try await relay.send(
                Data(), to: randomSubject(), token: token.rawRepresentation)
        else {
            Issue.record("a token was spent twice")
            return
        }
        await relay.close()
        await server.shutdown()
    }

    @Test("Python websockets, framing by the spec: subscribe, send, deliver, spent token, ping")
    func pythonClient() async throws {
        let relay = try RelayHarness()
        let first = relay.token()
        let second = relay.token()
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try ReferenceOracle.python())
        process.arguments = [
            Vectors.packageRoot.appendingPathComponent("Tests/Reference/relay_interop.py").path, String(relay.port),
            first.map { String(format: "%02x", $0) }.joined(), second.map { String(format: "%02x", $0) }.joined(),
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let data = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                continuation.resume(returning: String(decoding: data, as: UTF8.self))
            }
        }
        #expect(process.terminationStatus == 0, "relay_interop.py failed; its error output says why")
        #expect(text.contains(#""ok": true"#))
        await relay.server.shutdown()
    }
}

@Suite("Relay: settings and pixie-server relay alone")
struct RelayProcessTests {
    @Test("relay settings parse, and refuse what does not")
    func settings() throws {
        var configuration = PixieConfiguration()
        #expect(configuration.services.contains(.relay))
        #expect(configuration.relayTokens == .credential)
        try configuration.set("services", "relay", source: "test")
        try configuration.set("relay_tokens", "insecure-dev", source: "test")
        try configuration.set("relay_max_subjects", "4", source: "test")
        try configuration.set("relay_max_queued_frames", "32", source: "test")
        try configuration.set("relay_max_payload_bytes", "4096", source: "test")
        try configuration.set("relay_push_webhook_url", "https://push.example/wake", source: "test")
        #expect(configuration.services == [.relay])
        #expect(configuration.relayTokens == .insecureDev)
        #expect(configuration.relayMaximumSubjects == 4)
        #expect(configuration.relayMaximumQueuedFrames == 32)
        #expect(configuration.relayMaximumPayloadBytes == 4096)
        for (name, value) in [
            ("relay_tokens", "any"), ("relay_max_subjects", "0"), ("relay_max_payload_bytes", "10"),
            ("relay_push_webhook_url", "ftp://x"),
        ] {
            #expect(throws: ServerError.self) { try configuration.set(name, value, source: "test") }
        }
    }

    @Test("pixie-server relay alone serves /v1/relay and warns loudly about insecure-dev tokens")
    func relayAlone() async throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(
            dataDirectory: directory, extraArguments: ["relay", "--relay-tokens", "insecure-dev"])
        #expect(server.logText.contains("DEVELOPMENT ONLY"))
        #expect(server.logText.contains(#""services":"relay""#))
        let port = UInt16(server.address.port!)
        let listener = try await RelayTestClient.connect(port: port)
        let sender = try await RelayTestClient.connect(port: port)
        let subject = randomSubject()
        #expect(try await listener.subscribe(subject) == .ok(requestID: 1))
        #expect(try await sender.send(Data("hi".utf8), to: subject, token: Data("t1".utf8)) == .ok(requestID: 1))
        #expect(try await listener.next() == .deliver(subject: subject, wake: .silent, payload: Data("hi".utf8)))
        guard case .error(2, .tokenSpent, _) = try await sender.send(Data(), to: subject, token: Data("t1".utf8))
        else {
            Issue.record("insecure-dev accepted a token twice")
            return
        }
        // Only the relay runs: identity's routes are absent.
        #expect(try await server.request("GET", "/v1/sync/siblings").status == 404)
        await listener.close()
        await sender.close()
        #expect(server.terminate() == 0)
    }
}
