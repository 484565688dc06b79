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

    /// POSTs `body` to /devices as JSON.
    static func post(_ body: String) async -> HTTPResponse {
        await router().test(.post, "/devices", headers: ["Content-Type": "application/json"], body: body)
    }

    static func reason(_ response: HTTPResponse) throws -> String {
        let body = try JSONDecoder().decode([String: String].self, from: response.body)
        #expect(body["error"] == "invalid_json")
        return body["reason"] ?? ""
    }

    @Test func roundTrip() async throws {
        let response = await Self.post(#"{"id":"d1","keys":[{"kind":"x","size":32}]}"#)
        #expect(response.status == .created)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(response.bodyText == #"{"id":"d1","keys":[{"kind":"x","size":32}]}"#)
    }

    @Test func missingField() async throws {
        let response = await Self.post(#"{"keys":[]}"#)
        #expect(response.status == .badRequest)
        #expect(try Self.reason(response) == "missing field 'id'")
    }

    @Test func nestedWrongType() async throws {
        let response = await Self.post(#"{"id":"d","keys":[{"kind":"x","size":1},{"kind":"y","size":"big"}]}"#)
        #expect(response.status == .badRequest)
        #expect(try Self.reason(response) == "field 'keys[1].size' must be an integer")
    }

    @Test func nullField() async throws {
        let response = await Self.post(#"{"id":null,"keys":[]}"#)
        #expect(response.status == .badRequest)
        #expect(try Self.reason(response) == "field 'id' must not be null")
    }

    @Test func notJSON() async throws {
        let response = await Self.post("{nope")
        #expect(response.status == .badRequest)
        #expect(try Self.reason(response) == "the body is not valid JSON")
        let empty = await Self.post("")
        #expect(try Self.reason(empty) == "the body is empty; send a JSON value")
        let array = await Self.post("[]")
        #expect(try Self.reason(array) == "the body must be an object")
    }

    /// A JSON route takes only `application/json` (any case, any parameters): a browser sends `text/plain`
    /// and form bodies cross-origin without a preflight, so anything else is a 415 the route never sees.
    @Test func onlyApplicationJSON() async throws {
        let body = #"{"id":"d1","keys":[]}"#
        for type in ["application/json", "Application/JSON", "application/json; charset=utf-8"] {
            let response = await Self.router().test(.post, "/devices", headers: ["Content-Type": type], body: body)
            #expect(response.status == .created, "\(type)")
        }
        for type: String? in [
            nil, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "application/jsonx",
        ] {
            var headers = HTTPHeaders()
            if let type { headers["Content-Type"] = type }
            let response = await Self.router().test(.post, "/devices", headers: headers, body: body)
            #expect(response.status.code == 415, "\(type ?? "no Content-Type")")
            let decoded = try JSONDecoder().decode([String: String].self, from: response.body)
            #expect(decoded["error"] == "unsupported_media_type")
        }
    }
}
