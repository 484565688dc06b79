import Foundation
import WebSockets

/// The server's answer to a client's WebSocket handshake (RFC 6455, section 4.1), as the client parses its head
/// and checks it against the key it sent (``WebSocketUpgradeResponse``): the status line, header fields with
/// repeats, folds and bare LFs, and the checks of Upgrade, Connection, the accept key, extensions and
/// subprotocols. The parser must take any bytes, and an answer it lets through must carry what the checks name.
let webSocketUpgradeTarget = FuzzTarget(
    name: "websocket-upgrade",
    summary: "the server's answer to the WebSocket handshake, as the client checks it (WebSockets)",
    maximumLength: 16_384,
    seeds: {
        let accept = WebSocket.acceptKey(for: webSocketUpgradeKey)
        return [
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: \(accept)\r\n\r\n",
            "HTTP/1.1 101\nupgrade: WebSocket\nconnection: keep-alive,\n Upgrade\nSec-WebSocket-Accept: \(accept)\n"
                + "Sec-WebSocket-Protocol: chat\n\n",
            "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 12\r\nSec-WebSocket-Version: 13\r\n\r\n",
        ].map { Data($0.utf8) }
    },
    run: { input in
        let response = WebSocketUpgradeResponse(head: [UInt8](input))
        _ = response.refusalBodyByteCount
        for offered in [[], ["chat"]] {
            do {
                try response.validate(key: webSocketUpgradeKey, offeredProtocols: offered)
            } catch {
                continue
            }
            guard response.status == 101,
                response.fields["sec-websocket-accept"] == WebSocket.acceptKey(for: webSocketUpgradeKey),
                response.fields["upgrade"]?.lowercased() == "websocket",
                response.fields["sec-websocket-protocol"].map(offered.contains) ?? true
            else { finding("an answer that is no WebSocket server's handshake passed the client's checks") }
        }
    })

/// RFC 6455, section 1.3's example key.
let webSocketUpgradeKey = "dGhlIHNhbXBsZSBub25jZQ=="
