import HTTPServer
import PixieWire
import WebSockets

/// Routes from PixieWire's table of endpoints (``PixieWire/PixieAPI``), so that the server and the device's
/// `PixieClient` spell each method and path once.
extension Router {
    /// Adds the route of `endpoint`: its method and its path as a pattern (`/v1/blobs/{blob_id}` is
    /// `/v1/blobs/:blob_id`, whose `blob_id` the handler reads from ``HTTPServer/RequestContext``).
    mutating func on<Request, Response>(
        _ endpoint: PixieAPI.Endpoint<Request, Response>, body: HTTPBodyPolicy = .collect,
        use handler: @escaping Handler
    ) {
        on(HTTPMethod(endpoint.method.rawValue), endpoint.routePattern, body: body, use: handler)
    }

    /// Adds the WebSocket `endpoint` (a GET), whose messages go to a ``WebSockets/WebSocketConsumer`` made for each
    /// connection by `consumer`, as ``HTTPServer/Router/webSocket(_:maximumMessageSize:consumer:)`` does.
    mutating func webSocket<Request>(
        _ endpoint: PixieAPI.Endpoint<Request, PixieAPI.WebSocketFrames>, maximumMessageSize: Int,
        consumer: @escaping @Sendable (HTTPRequest, WebSocket) -> any WebSocketConsumer
    ) {
        precondition(endpoint.method == .get, "the WebSocket endpoint \(endpoint) must be a GET (RFC 6455)")
        webSocket(endpoint.routePattern, maximumMessageSize: maximumMessageSize, consumer: consumer)
    }
}
