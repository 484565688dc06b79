/// Takes a ``WebSocket``'s messages on the socket's event-loop thread, in place of ``WebSocket/receive()`` (from
/// ``Router/webSocket(_:maximumMessageSize:consumer:)`` or
/// ``WebSocketClient/connect(port:path:headers:maximumMessageSize:handshakeTimeout:consumer:)``).
///
/// No task stands between the socket and the consumer: each call hands over every message that one read
/// completed, in order, so a burst of pipelined messages costs one call. The loop reads nothing while a call
/// runs, so a consumer that takes long slows its peer down rather than filling memory, and with it every
/// other socket on the same loop (a few serve them all): it may block briefly (a store write) but must hand
/// long waits elsewhere.
/// Calls for one socket never overlap.
public protocol WebSocketConsumer: Sendable {
    /// Messages that arrived, oldest first (never empty).
    func received(_ messages: [WebSocketMessage])

    /// The connection has ended and its socket is released; called once, after the last ``received(_:)``.
    /// `error` is nil after a close handshake (or a drop after our close frame), else what went wrong, as
    /// ``WebSocket/receive()`` would throw it.
    func ended(_ error: WebSocketError?)
}
