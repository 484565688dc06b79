import Foundation
import HTTPServer
import Testing

@Suite("JSON bodies")
struct JSONTests {
    struct Device: Codable, Equatable {
        var id: String
        var keys: [Key]
    }

    struct Key: Codable, Equatable {
        var kind: String
        var size: Int
    }

    static func router() -> Router {
        var router = Router()
        router.post("/devices") { request, _ in
            let device: Device = try request.decode()
            return try .json(device, status: .created)
        }
        return router
    }

    static func reason(_ response: HTTPResponse) throws -> String {
        let body = try JSONDecoder().decode([String: String].self, from: response.body)
        #expect(body["error"] == "invalid_json")
        return body["reason"] ?? ""
    }

    @Test func roundTrip() async throws {
        let response = await Self.router().test(
            .post, "/devices", body: #"{"id":"d1","keys":[{"kind":"x","size":32}]}"#)
        #expect(response.status == .created)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(response.bodyText == #"{"id":"d1","keys":[{"kind":"x","size":32}]}"#)
    }

    @Test func missingField() async throws {
        let response = await Self.router().test(.post, "/devices", body: #"{"keys":[]}"#)
        #expect(response.status == .badRequest)
        #expect(try Self.reason(response) == "missing field 'id'")
    }

    @Test func nestedWrongType() async throws {
        let response = await Self.router().test(
            .post, "/devices", body: #"{"id":"d","keys":[{"kind":"x","size":1},{"kind":"y","size":"big"}]}"#)
        #expect(response.status == .badRequest)
        #expect(try Self.reason(response) == "field 'keys[1].size' must be an integer")
    }

    @Test func nullField() async throws {
        let response = await Self.router().test(.post, "/devices", body: #"{"id":null,"keys":[]}"#)
        #expect(response.status == .badRequest)
        #expect(try Self.reason(response) == "field 'id' must not be null")
    }

    @Test func notJSON() async throws {
        let response = await Self.router().test(.post, "/devices", body: "{nope")
        #expect(response.status == .badRequest)
        #expect(try Self.reason(response) == "the body is not valid JSON")
        let empty = await Self.router().test(.post, "/devices")
        #expect(try Self.reason(empty) == "the body is empty; send a JSON value")
        let array = await Self.router().test(.post, "/devices", body: "[]")
        #expect(try Self.reason(array) == "the body must be an object")
    }
}
