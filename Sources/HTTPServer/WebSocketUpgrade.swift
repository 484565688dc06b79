import Foundation
import WebSockets

/// What the server runs on a connection once it is upgraded (carried by the 101 response).
struct WebSocketUpgrade: Sendable {
    /// What takes the connection's messages.
    enum Run: Sendable {
        /// A task that calls ``WebSocket/receive()``; the socket closes when it returns.
        case handler(@Sendable (HTTPRequest, WebSocket) async throws -> Void)
        /// A ``WebSocketConsumer`` called on the socket's event-loop thread.
        case consumer(@Sendable (HTTPRequest, WebSocket) -> any WebSocketConsumer)
    }

    let request: HTTPRequest
    let maximumMessageSize: Int
    let run: Run
}

/// The server's half of the opening handshake (RFC 6455, section 4.2).
enum WebSocketHandshake {
    /// The 101 answer to a valid upgrade request, or the 426/400 that says what is wrong with it.
    static func upgrade(
        _ request: HTTPRequest, maximumMessageSize: Int, run: WebSocketUpgrade.Run
    ) throws(HTTPError) -> HTTPResponse {
        let connection = request.headers.values(for: "Connection")
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard request.headers["Upgrade"]?.lowercased() == "websocket", connection.contains("upgrade") else {
            throw HTTPError(
                .upgradeRequired, .upgradeRequired,
                "\(request.path) is a WebSocket endpoint; send GET with Upgrade: websocket and Connection: Upgrade",
                headers: ["Upgrade": "websocket", "Sec-WebSocket-Version": "13"])
        }
        guard request.headers["Sec-WebSocket-Version"]?.trimmingCharacters(in: .whitespaces) == "13" else {
            throw HTTPError(
                .upgradeRequired, .upgradeRequired,
                "only WebSocket version 13 (RFC 6455) is supported; send Sec-WebSocket-Version: 13",
                headers: ["Sec-WebSocket-Version": "13"])
        }
        guard let key = request.headers["Sec-WebSocket-Key"]?.trimmingCharacters(in: .whitespaces),
            let nonce = Data(base64Encoded: key), nonce.count == 16
        else {
            throw HTTPError(
                .badRequest, .badRequest, "Sec-WebSocket-Key must be 16 random bytes in base64 (RFC 6455, 4.1)")
        }
        var response = HTTPResponse(
            status: .switchingProtocols,
            headers: [
                "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Accept": WebSocket.acceptKey(for: key),
            ])
        response.webSocket = WebSocketUpgrade(request: request, maximumMessageSize: maximumMessageSize, run: run)
        return response
    }

}
