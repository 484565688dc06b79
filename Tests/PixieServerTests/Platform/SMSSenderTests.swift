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
