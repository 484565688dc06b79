import Foundation
import HTTPServer
import Synchronization
import Testing

@Suite("Router: matching, parameters, 404 and 405")
struct RouterTests {
    static func router() -> Router {
        var router = Router()
        router.get("/healthz") { _, _ in .text("ok") }
        router.post("/v1/discovery/own") { request, _ in .text("own \(request.bodyText)") }
        router.get("/v1/devices/:id") { _, context in .text("device \(try context.parameter("id"))") }
        router.get("/v1/devices/self") { _, _ in .text("self") }
        router.delete("/v1/devices/:id") { _, context in .text("deleted \(context.parameters["id"] ?? "")") }
        router.get("/v1/items") { request, _ in .text("limit=\(request.query("limit") ?? "none")") }
        return router
    }

    @Test func registeredRoutesListEveryRouteInOrder() {
        let routes = Self.router().registeredRoutes.map { "\($0.method.rawValue) \($0.pattern)" }
        #expect(
            routes == [
                "GET /healthz", "POST /v1/discovery/own", "GET /v1/devices/:id", "GET /v1/devices/self",
                "DELETE /v1/devices/:id", "GET /v1/items",
            ])
    }

    @Test func literalRoute() async {
        let response = await Self.router().test(.get, "/healthz")
        #expect(response.status == .ok)
        #expect(response.bodyText == "ok")
        #expect(response.headers["content-type"] == "text/plain; charset=utf-8")
    }

    @Test func postWithBody() async {
        let response = await Self.router().test(.post, "/v1/discovery/own", body: "hello")
        #expect(response.status == .ok)
        #expect(response.bodyText == "own hello")
    }

    @Test func parameterSegment() async {
        let response = await Self.router().test(.get, "/v1/devices/42")
        #expect(response.bodyText == "device 42")
        let decoded = await Self.router().test(.get, "/v1/devices/a%20b")
        #expect(decoded.bodyText == "device a b")
    }

    @Test func literalBeatsParameter() async {
        #expect(await Self.router().test(.get, "/v1/devices/self").bodyText == "self")
    }

    @Test func trailingAndDoubleSlashes() async {
        #expect(await Self.router().test(.get, "/healthz/").status == .ok)
        #expect(await Self.router().test(.get, "//v1//devices/7").bodyText == "device 7")
    }

    @Test func queryItems() async {
        #expect(await Self.router().test(.get, "/v1/items?limit=5&x").bodyText == "limit=5")
        #expect(await Self.router().test(.get, "/v1/items").bodyText == "limit=none")
    }

    @Test func unknownPathIs404() async throws {
        let response = await Self.router().test(.get, "/nope")
        #expect(response.status == .notFound)
        #expect(response.headers["Content-Type"] == "application/json")
        let body = try JSONDecoder().decode([String: String].self, from: response.body)
        #expect(body["error"] == "not_found")
        #expect(body["reason"]?.contains("/nope") == true)
        #expect(await Self.router().test(.get, "/v1/devices/1/extra").status == .notFound)
    }

    @Test func wrongMethodIs405WithAllow() async throws {
        let response = await Self.router().test(.put, "/v1/devices/3")
        #expect(response.status == .methodNotAllowed)
        #expect(response.headers["allow"] == "DELETE, GET, HEAD")
        let body = try JSONDecoder().decode([String: String].self, from: response.body)
        #expect(body["error"] == "method_not_allowed")
        let post = await Self.router().test(.get, "/v1/discovery/own")
        #expect(post.status == .methodNotAllowed)
        #expect(post.headers["Allow"] == "POST")
    }

    @Test func headFallsBackToGet() async {
        let response = await Self.router().test(.head, "/v1/devices/9")
        #expect(response.status == .ok)
        #expect(response.bodyText == "device 9")
        #expect(await Self.router().test(.head, "/v1/discovery/own").status == .methodNotAllowed)
    }

    @Test func thrownHTTPErrorBecomesItsResponse() async throws {
        var router = Router()
        router.get("/limited") { _, _ in
            throw HTTPError(
                .tooManyRequests, HTTPError.Code("rate_limited"), "wait a minute", headers: ["Retry-After": "60"])
        }
        let response = await router.test(.get, "/limited")
        #expect(response.status == .tooManyRequests)
        #expect(response.headers["retry-after"] == "60")
        #expect(response.bodyText == #"{"error":"rate_limited","reason":"wait a minute"}"#)
    }

    struct Opaque: Error {}

    @Test func otherErrorsAre500WithoutDetail() async {
        var router = Router()
        router.get("/boom") { _, _ in throw Opaque() }
        let response = await router.test(.get, "/boom")
        #expect(response.status == .internalServerError)
        #expect(!response.bodyText.contains("Opaque"))
    }

    @Test func headersIgnoreCase() {
        var headers: HTTPHeaders = ["Content-Type": "a"]
        headers.add("X-Many", "1")
        headers.add("x-many", "2")
        #expect(headers["CONTENT-TYPE"] == "a")
        #expect(headers.values(for: "X-MANY") == ["1", "2"])
        headers["x-many"] = "3"
        #expect(headers.values(for: "X-Many") == ["3"])
        headers["content-type"] = nil
        #expect(headers["Content-Type"] == nil)
    }
}

@Suite("Middleware")
struct MiddlewareTests {
    struct Recording: HTTPMiddleware {
        let name: String
        let log: Log

        func handle(
            _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPResponse
        ) async throws -> HTTPResponse {
            log.append("\(name) in")
            var request = request
            request.headers.add("X-Seen", name)
            do {
                var response = try await next(request)
                response.headers.add("X-Out", name)
                log.append("\(name) out")
                return response
            } catch {
                log.append("\(name) caught")
                throw error
            }
        }
    }

    final class Log: Sendable {
        let entries = Mutex<[String]>([])
        func append(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    struct Gate: HTTPMiddleware {
        func handle(
            _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPResponse
        ) async throws -> HTTPResponse {
            guard request.headers["Authorization"] == "yes" else {
                throw HTTPError(.unauthorized, HTTPError.Code("unauthorized"), "send Authorization: yes")
            }
            return try await next(request)
        }
    }

    @Test func firstAddedRunsOutermost() async {
        let log = Log()
        var router = Router()
        router.add(middleware: Recording(name: "a", log: log))
        router.add(middleware: Recording(name: "b", log: log))
        router.get("/x") { request, _ in
            log.append("handler")
            return .text(request.headers.values(for: "x-seen").joined(separator: ","))
        }
        let response = await router.test(.get, "/x")
        #expect(log.all == ["a in", "b in", "handler", "b out", "a out"])
        #expect(response.bodyText == "a,b")
        #expect(response.headers.values(for: "X-Out") == ["b", "a"])
    }

    @Test func middlewareSeesNotFound() async {
        let log = Log()
        var router = Router()
        router.add(middleware: Recording(name: "a", log: log))
        let response = await router.test(.get, "/missing")
        #expect(response.status == .notFound)
        #expect(log.all == ["a in", "a caught"])
    }

    @Test func middlewareCanAnswerAlone() async {
        var router = Router()
        router.add(middleware: Gate())
        router.get("/secret") { _, _ in .text("secret") }
        #expect(await router.test(.get, "/secret").status == .unauthorized)
        #expect(await router.test(.get, "/secret", headers: ["authorization": "yes"]).bodyText == "secret")
    }
}
