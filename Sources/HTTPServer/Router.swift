import WebSockets

/// What a route handler learns beyond the request: the values of its `:name` path segments.
public struct RequestContext: Sendable {
    /// The path parameters by name: for the route `/v1/devices/:id` and the path `/v1/devices/42`, `["id": "42"]`.
    public var parameters: [String: String]

    public init(parameters: [String: String] = [:]) { self.parameters = parameters }

    /// The parameter `name`, or a 400 that names it (for a route whose pattern does not have it).
    public func parameter(_ name: String) throws(HTTPError) -> String {
        guard let value = parameters[name] else {
            throw HTTPError(.badRequest, .badRequest, "the path has no parameter '\(name)'")
        }
        return value
    }
}

/// Routes requests by method and path to handlers, in hummingbird's shape.
///
/// Patterns are `/`-separated segments; a segment `:name` matches any one segment and is passed in
/// ``RequestContext/parameters``. A literal segment wins over a parameter where both match. A path no
/// route matches is a 404; a path that matches only with other methods is a 405 with `Allow`. A HEAD
/// request without a HEAD route is answered by the GET route.
/// Empty segments are ignored, so `/a/b/` and `/a//b` are `/a/b`.
public struct Router: HTTPResponder {
    public typealias Handler = @Sendable (HTTPRequest, RequestContext) async throws -> HTTPResponse

    private struct Route: Sendable {
        enum Segment: Sendable, Equatable {
            case literal(String)
            case parameter(String)
        }

        let method: HTTPMethod
        let pattern: String
        let segments: [Segment]
        let body: HTTPBodyPolicy
        let handler: Handler

        /// The parameters if `path` matches, and how many literal segments matched (more is more specific).
        func match(_ path: [Substring]) -> (parameters: [String: String], literals: Int)? {
            guard path.count == segments.count else { return nil }
            var parameters: [String: String] = [:]
            var literals = 0
            for (segment, part) in zip(segments, path) {
                switch segment {
                case .literal(let text):
                    guard text == part else { return nil }
                    literals += 1
                case .parameter(let name):
                    parameters[name] = String(part)
                }
            }
            return (parameters, literals)
        }
    }

    private var routes: [Route] = []
    private var middleware: [any HTTPMiddleware] = []

    public init() {}

    /// Adds a route. A second route with the same method and pattern never matches (the first one wins).
    ///
    /// `body` says how the route receives its body: collected (the default) or as a stream with a limit of
    /// its own (`router.post("/v1/blobs", body: .stream(limit: 4 << 30)) { request, _ in ... }`, reading
    /// ``HTTPRequest/bodyStream``).
    public mutating func on(
        _ method: HTTPMethod, _ pattern: String, body: HTTPBodyPolicy = .collect, use handler: @escaping Handler
    ) {
        let segments = Self.segments(of: pattern).map { part -> Route.Segment in
            part.hasPrefix(":") ? .parameter(String(part.dropFirst())) : .literal(String(part))
        }
        routes.append(Route(method: method, pattern: pattern, segments: segments, body: body, handler: handler))
    }

    public mutating func get(_ pattern: String, use handler: @escaping Handler) { on(.get, pattern, use: handler) }
    public mutating func post(_ pattern: String, body: HTTPBodyPolicy = .collect, use handler: @escaping Handler) {
        on(.post, pattern, body: body, use: handler)
    }
    public mutating func put(_ pattern: String, body: HTTPBodyPolicy = .collect, use handler: @escaping Handler) {
        on(.put, pattern, body: body, use: handler)
    }
    public mutating func patch(_ pattern: String, use handler: @escaping Handler) {
        on(.patch, pattern, use: handler)
    }
    public mutating func delete(_ pattern: String, use handler: @escaping Handler) {
        on(.delete, pattern, use: handler)
    }

    /// Every route's method and pattern, in the order they were added (a WebSocket endpoint is its GET), so a test can
    /// compare a router with the table of endpoints it should serve.
    public var registeredRoutes: [(method: HTTPMethod, pattern: String)] {
        routes.map { (method: $0.method, pattern: $0.pattern) }
    }

    /// Adds middleware around every route; the first added runs first.
    public mutating func add(middleware: some HTTPMiddleware) { self.middleware.append(middleware) }

    /// Adds a WebSocket endpoint (RFC 6455) at `pattern`, answering GET.
    ///
    /// A valid upgrade (version 13, a 16-byte `Sec-WebSocket-Key`) is answered 101 and `handler` runs with
    /// the connection; when it returns the socket is closed with 1000 (1011 if it threw). A request that is
    /// not an upgrade, or asks for another version, is a 426 (with `Sec-WebSocket-Version: 13`); a missing
    /// or malformed key is a 400. Messages longer than `maximumMessageSize` bytes close the connection with
    /// 1009. Over the in-memory client the route answers the 101 but runs nothing.
    public mutating func webSocket(
        _ pattern: String, maximumMessageSize: Int = 1 << 20,
        handler: @escaping @Sendable (HTTPRequest, WebSocket) async throws -> Void
    ) {
        on(.get, pattern) { request, _ in
            try WebSocketHandshake.upgrade(request, maximumMessageSize: maximumMessageSize, run: .handler(handler))
        }
    }

    /// Adds a WebSocket endpoint as ``webSocket(_:maximumMessageSize:handler:)`` does, whose messages go to a
    /// ``WebSocketConsumer`` made for each connection by `consumer`, on the connection's event-loop thread (no
    /// task per message). The socket stays open until either side closes it (``WebSocket/startClosing(code:reason:)``).
    public mutating func webSocket(
        _ pattern: String, maximumMessageSize: Int = 1 << 20,
        consumer: @escaping @Sendable (HTTPRequest, WebSocket) -> any WebSocketConsumer
    ) {
        on(.get, pattern) { request, _ in
            try WebSocketHandshake.upgrade(request, maximumMessageSize: maximumMessageSize, run: .consumer(consumer))
        }
    }

    /// The policy of the route that `head` would be dispatched to; `.collect` where none matches.
    public func bodyPolicy(for head: HTTPRequest) -> HTTPBodyPolicy {
        Self.choose(head, routes: routes)?.route.body ?? .collect
    }

    /// Runs the middleware and the route. Before the middleware run, ``HTTPRequest/route`` is set to the pattern of
    /// the route the request will be dispatched to (`nil` for a 404 or 405), so middleware can label by
    /// `/v1/blobs/:blob_id` rather than by a path that carries an identifier.
    public func respond(to request: HTTPRequest) async throws -> HTTPResponse {
        var request = request
        request.route = Self.choose(request, routes: routes)?.route.pattern
        let dispatch: @Sendable (HTTPRequest) async throws -> HTTPResponse = { [routes] request in
            try await Self.dispatch(request, routes: routes)
        }
        let chain = middleware.reversed().reduce(dispatch) { next, middleware in
            { @Sendable request in try await middleware.handle(request, next: next) }
        }
        return try await chain(request)
    }

    private typealias Match = (route: Route, parameters: [String: String], literals: Int)

    /// The most specific route for each method whose pattern matches `request`'s path.
    private static func candidates(_ request: HTTPRequest, routes: [Route]) -> [HTTPMethod: Match] {
        let path = segments(of: request.path)
        var best: [HTTPMethod: Match] = [:]
        for route in routes {
            guard let match = route.match(path) else { continue }
            if let current = best[route.method], current.literals >= match.literals { continue }
            best[route.method] = (route, match.parameters, match.literals)
        }
        return best
    }

    private static func choose(_ request: HTTPRequest, routes: [Route]) -> Match? {
        let best = candidates(request, routes: routes)
        // HEAD falls back to GET; the server sends the headers without the body.
        return best[request.method] ?? (request.method == .head ? best[.get] : nil)
    }

    private static func dispatch(_ request: HTTPRequest, routes: [Route]) async throws -> HTTPResponse {
        if let chosen = choose(request, routes: routes) {
            return try await chosen.route.handler(request, RequestContext(parameters: chosen.parameters))
        }
        let best = candidates(request, routes: routes)
        if best.isEmpty {
            throw HTTPError(.notFound, .notFound, "no route for \(request.path); check the path")
        }
        var allowed = Set(best.keys.map(\.rawValue))
        if allowed.contains("GET") { allowed.insert("HEAD") }
        let allow = allowed.sorted().joined(separator: ", ")
        throw HTTPError(
            .methodNotAllowed, .methodNotAllowed, "\(request.path) does not accept \(request.method); use \(allow)",
            headers: ["Allow": allow])
    }

    private static func segments(of path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }
}
