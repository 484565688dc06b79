import Foundation
import HTTPServer
import PixieServer
import PixieWire
import Synchronization
import Testing

@Suite("SMS senders")
struct SMSSenderTests {
    @Test func theWebhookGetsTheNumberTheTextAndTheSecret() async throws {
        let received = Mutex<[HTTPRequest]>([])
        var router = Router()
        router.post("/sms") { request, _ in
            received.withLock { $0.append(request) }
            return HTTPResponse(status: .accepted)
        }
        router.post("/down") { _, _ in HTTPResponse(status: .serviceUnavailable) }
        let server = try HTTPServer(responder: router)
        let base = "http://127.0.0.1:\(server.port)"
        let sender = WebhookSMSSender(url: URL(string: base + "/sms")!, bearerSecret: "s3cret", timeout: 120)
        try await sender.send("Your Pixie code is 123456.", to: try PhoneNumber("+14155550123"))
        let request = try #require(received.withLock { $0.first })
        #expect(request.headers["Authorization"] == "Bearer s3cret")
        let body = try #require(try JSONSerialization.jsonObject(with: request.body) as? [String: String])
        #expect(body == ["to": "+14155550123", "text": "Your Pixie code is 123456."])

        let down = WebhookSMSSender(url: URL(string: base + "/down")!, timeout: 120)
        await #expect(throws: ServerError.self) { try await down.send("x", to: try PhoneNumber("+14155550123")) }
        await server.shutdown()
        await #expect(throws: ServerError.self) {
            try await sender.send("x", to: try PhoneNumber("+14155550123"))
        }
    }

    @Test("a gateway that takes the request and never answers fails it after the timeout", .timeLimit(.minutes(1)))
    func aStalledGatewayFailsAfterTheTimeout() async throws {
        let gateway = try StalledGateway()
        // Whole seconds, at least one (FoundationNetworking's granularity).
        #expect(WebhookSMSSender(url: gateway.url, timeout: 0.2).timeout == 1)
        #expect(WebhookSMSSender(url: gateway.url, timeout: 2.5).timeout == 3)
        let sender = WebhookSMSSender(url: gateway.url, timeout: 1)
        let error = await #expect(throws: ServerError.self) {
            try await sender.send("x", to: try PhoneNumber("+14155550123"))
        }
        #expect(error?.code == .upstream)
        #expect(error?.reason.contains("did not answer within 1 s") == true, "\(String(describing: error))")
        await gateway.stop()
    }

    /// `webhook_timeout` reaches the webhook the server builds: a stalled gateway makes the start request a
    /// 502 `sms_failed`, and the log says the webhook gave up after the configured second (not the default 10).
    @Test(.timeLimit(.minutes(1)))
    func theServersWebhookHasWebhookTimeout() async throws {
        let gateway = try StalledGateway()
        let directory = try TemporaryDirectory()
        var configuration = PixieConfiguration()
        configuration.dataDirectory = directory.url.path
        configuration.services = [.phoneVerify]
        try configuration.set("sms_webhook_url", gateway.url.absoluteString, source: "test")
        try configuration.set("webhook_timeout", "1", source: "test")
        let lines = Mutex<[String]>([])
        let logger = Logger(service: "test", minimumLevel: .info) { line in lines.withLock { $0.append(line) } }
        let application = try Application.open(configuration: configuration, logger: logger)
        let started = await application.router.test(
            .post, "/v1/phone/verifications", headers: ["Content-Type": "application/json"],
            body: #"{"phone_number":"+14155550123"}"#)
        #expect(started.status.code == 502, "\(started.bodyText)")
        #expect(started.errorCode == "sms_failed")
        #expect(lines.withLock { $0 }.contains { $0.contains("did not answer within 1 s") }, "\(lines.withLock { $0 })")
        await gateway.stop()
    }

    @Test func theDevelopmentSinkAppendsJSONLines() async throws {
        let outbox = FileManager.default.temporaryDirectory.appendingPathComponent("sms-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: outbox) }
        let sink = DevelopmentSMSSink(outbox: outbox, logger: .discard)
        try await sink.send("one", to: try PhoneNumber("+14155550123"))
        try await sink.send("two", to: try PhoneNumber("+442079460958"))
        let lines = try String(contentsOf: outbox, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        let second = try #require(try JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as? [String: Any])
        #expect(second["to"] as? String == "+442079460958")
        #expect(second["text"] as? String == "two")
        let unwritable = DevelopmentSMSSink(outbox: URL(fileURLWithPath: "/proc/no/such/outbox"), logger: .discard)
        await #expect(throws: ServerError.self) { try await unwritable.send("x", to: try PhoneNumber("+14155550123")) }
    }
}
