import Foundation
import HTTPServer
import PixieServer
import PixieWire
import Storage
import Synchronization
import Testing

/// Fails the first `failures` wakes, then records.
final class FlakyPushGateway: PushGateway {
    let failures: Mutex<Int>
    let delivered = Mutex(0)

    init(failures: Int) { self.failures = Mutex(failures) }

    func wake(_ subject: RelaySubject, pushToken: Data) async throws(ServerError) {
        let fail = failures.withLock { left -> Bool in
            defer { left = max(0, left - 1) }
            return left > 0
        }
        if fail { throw ServerError(.upstream, "the test push provider is down") }
        delivered.withLock { $0 += 1 }
    }
}

@Suite("Relay push gateways")
struct RelayPushTests {
    @Test("the webhook gets the subject, the wake class, the push token and the secret; non-2xx throws")
    func webhook() async throws {
        let received = Mutex<[HTTPRequest]>([])
        var router = Router()
        router.post("/push") { request, _ in
            received.withLock { $0.append(request) }
            return HTTPResponse(status: .accepted)
        }
        router.post("/down") { _, _ in HTTPResponse(status: .serviceUnavailable) }
        let server = try HTTPServer(responder: router)
        let base = "http://127.0.0.1:\(server.port)"
        let subject = randomSubject()
        let gateway = WebhookPushGateway(url: URL(string: base + "/push")!, bearerSecret: "s3cret", timeout: 120)
        try await gateway.wake(subject, pushToken: Data([1, 2, 3]))
        let request = try #require(received.withLock { $0.first })
        #expect(request.headers["Authorization"] == "Bearer s3cret")
        #expect(request.headers["Content-Type"] == "application/json")
        let body = try #require(try JSONSerialization.jsonObject(with: request.body) as? [String: String])
        #expect(
            body == [
                "subject": subject.rawRepresentation.base64URLEncodedString(), "wake": "sync", "push_token": "AQID",
            ])
        let down = WebhookPushGateway(url: URL(string: base + "/down")!, timeout: 120)
        await #expect(throws: ServerError.self) { try await down.wake(subject, pushToken: Data([1])) }
        await server.shutdown()
        await #expect(throws: ServerError.self) { try await gateway.wake(subject, pushToken: Data([1])) }
    }

    @Test("a push gateway that takes the wake and never answers fails it after the timeout", .timeLimit(.minutes(1)))
    func stalledPushGateway() async throws {
        let gateway = try StalledGateway()
        let push = WebhookPushGateway(url: gateway.url, timeout: 1)
        let error = await #expect(throws: ServerError.self) {
            try await push.wake(randomSubject(), pushToken: Data([1]))
        }
        #expect(error?.reason.contains("push webhook") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("did not answer within 1 s") == true)
        await gateway.stop()
    }

    @Test("a push that fails ends the episode: the next Sync frame tries again")
    func failedPushRetries() async throws {
        var configuration = PixieConfiguration()
        configuration.services = [.relay]
        let tokens = InMemoryTokenSpender()
        let push = FlakyPushGateway(failures: 1)
        let metrics = Metrics()
        let application = try Application(
            configuration: configuration, keys: ServiceKeys.generate(), database: try SQLiteDatabase.inMemory(),
            sms: RecordingSMSSender(), logger: .discard, metrics: metrics, tokens: tokens, push: push)
        let server = try HTTPServer(responder: application.router)
        func token() -> Data {
            let token = Data(UUID().uuidString.utf8)
            tokens.issue([token])
            return token
        }
        let subject = randomSubject()
        let device = try await RelayTestClient.connect(port: server.port)
        try await device.subscribe(subject, pushToken: Data("device".utf8))
        await device.close()
        try await eventually("the device is still connected") { metrics.counter("pixie_relay_connections") == 0 }
        let sender = try await RelayTestClient.connect(port: server.port)
        try await sender.send(Data(), to: subject, wake: .sync, token: token())
        try await eventually("the first push did not fail") {
            metrics.counter("pixie_relay_pushes_total", labels: ["outcome": "failed"]) == 1
        }
        try await sender.send(Data(), to: subject, wake: .sync, token: token())
        try await eventually("the retry was not pushed") { push.delivered.withLock { $0 } == 1 }
        try await sender.send(Data(), to: subject, wake: .sync, token: token())
        #expect(metrics.counter("pixie_relay_pushes_total", labels: ["outcome": "deduplicated"]) == 1)
        await sender.close()
        await server.shutdown()
    }
}
