import Foundation

/// Anything that answers a complete request: a ``Router``, or a type of the caller's own.
///
/// Thrown ``HTTPError``s become their JSON response; any other error becomes a 500 whose body says
/// nothing about it (the server and ``HTTPResponder/test(_:_:headers:body:remoteAddress:)`` both do this).
///
/// A responder that wants some bodies as a stream says so in ``bodyPolicy(for:)``, which the server asks
/// when only the head is in (the default collects every body).
public protocol HTTPResponder: Sendable {
    func respond(to request: HTTPRequest) async throws -> HTTPResponse

    /// How the body of the request whose head is `head` is received (`head.body` is empty, and so
    /// is `head.bodyStream`). Called on libmicrohttpd's connection thread before any of the body is read:
    /// decide from the method, path and headers alone, quickly.
    func bodyPolicy(for head: HTTPRequest) -> HTTPBodyPolicy
}

/// Wraps the responders after it: runs code before and after `next`, or answers without calling it.
///
/// In a ``Router`` the first middleware added is the outermost, and middleware see every request,
/// including ones that end in 404 or 405 (thrown as ``HTTPError`` out of `next`).
public protocol HTTPMiddleware: Sendable {
    func handle(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPResponse
    ) async throws -> HTTPResponse
}

extension HTTPResponder {
    /// Every body is collected (``HTTPBodyPolicy/collect``).
    public func bodyPolicy(for head: HTTPRequest) -> HTTPBodyPolicy { .collect }

    /// The response a client gets, with errors turned into responses as described on ``HTTPResponder``.
    func response(to request: HTTPRequest) async -> HTTPResponse {
        do {
            return try await respond(to: request)
        } catch let error as HTTPError {
            return error.response
        } catch {
            return HTTPError(.internalServerError, .internalError, "the server failed to answer; try again later")
                .response
        }
    }

    /// The in-memory test client: sends a request straight to this responder, with no sockets, and
    /// returns what a client would receive (errors already turned into responses).
    ///
    /// `path` may carry a query (`/v1/items?limit=5`); the path part is percent-decoded as the server does.
    /// On a streaming route (``bodyPolicy(for:)``) `body` arrives in ``HTTPRequest/bodyStream`` in 64 KiB
    /// chunks, and a body (or a declared `Content-Length`) past the route's limit is a 413 as on the server.
    /// A streamed response is returned collected into ``HTTPResponse/body`` (a producer that throws, or
    /// writes other than its declared length, gives a 500). `remoteAddress` is the peer address the request
    /// appears to come from (``HTTPRequest/remoteAddress``; nil, as by default, for none).
    public func test(
        _ method: HTTPMethod, _ path: String, headers: HTTPHeaders = HTTPHeaders(), body: Data = Data(),
        remoteAddress: String? = nil
    ) async -> HTTPResponse {
        let (decodedPath, queryItems) = Self.split(target: path)
        var request = HTTPRequest(
            method: method, path: decodedPath, queryItems: queryItems, headers: headers, remoteAddress: remoteAddress)
        switch bodyPolicy(for: request) {
        case .collect:
            request.body = body
        case .stream(let limit):
            let declared = headers["Content-Length"].flatMap { Int($0) } ?? 0
            guard body.count <= limit, declared <= limit else { return HTTPError.tooLarge(limit: limit).response }
            request.bodyStream = HTTPBodyStream(preloaded: body)
        }
        let response = await response(to: request)
        request.bodyStream?.queue.abandon()
        guard response.bodyStream != nil else { return response }
        do {
            return try await response.collected()
        } catch let error as HTTPError {
            return error.response
        } catch {
            return HTTPError(.internalServerError, .internalError, "the server failed to answer; try again later")
                .response
        }
    }

    /// ``test(_:_:headers:body:remoteAddress:)`` with a UTF-8 text body.
    public func test(
        _ method: HTTPMethod, _ path: String, headers: HTTPHeaders = HTTPHeaders(), body: String,
        remoteAddress: String? = nil
    ) async -> HTTPResponse {
        await test(method, path, headers: headers, body: Data(body.utf8), remoteAddress: remoteAddress)
    }

    private static func split(target: String) -> (String, [(name: String, value: String)]) {
        guard let mark = target.firstIndex(of: "?") else {
            return (target.removingPercentEncoding ?? target, [])
        }
        let path = String(target[..<mark])
        var components = URLComponents()
        components.percentEncodedQuery = String(target[target.index(after: mark)...])
        let items = (components.queryItems ?? []).map { (name: $0.name, value: $0.value ?? "") }
        return (path.removingPercentEncoding ?? path, items)
    }
}
