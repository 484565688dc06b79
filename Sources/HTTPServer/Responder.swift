import Foundation

/// Anything that answers a complete request: a ``Router``, or a type of the caller's own.
///
/// Thrown ``HTTPError``s become their JSON response; any other error becomes a 500 whose body says
/// nothing about it (the server and ``HTTPResponder/test(_:_:headers:body:)`` both do this).
public protocol HTTPResponder: Sendable {
    func respond(to request: HTTPRequest) async throws -> HTTPResponse
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
    public func test(
        _ method: HTTPMethod, _ path: String, headers: HTTPHeaders = HTTPHeaders(), body: Data = Data()
    ) async -> HTTPResponse {
        let (decodedPath, queryItems) = Self.split(target: path)
        let request = HTTPRequest(
            method: method, path: decodedPath, queryItems: queryItems, headers: headers, body: body)
        return await response(to: request)
    }

    /// ``test(_:_:headers:body:)`` with a UTF-8 text body.
    public func test(
        _ method: HTTPMethod, _ path: String, headers: HTTPHeaders = HTTPHeaders(), body: String
    ) async -> HTTPResponse {
        await test(method, path, headers: headers, body: Data(body.utf8))
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
