import Foundation

/// The frames of one WebSocket connection's inbound byte stream, parsed apart from the socket (RFC 6455 §5):
/// header checks, unmasking, fragmentation, control frames, UTF-8 of text messages and close reasons. The
/// socket's reader (``WebSocket``) feeds it the bytes it read and acts on each ``Event``; the fuzz target
/// `websocket` (Tests/Fuzzer, docs/fuzzing.md) feeds it arbitrary bytes.
///
/// Violations are judged from a frame's header, before its payload has arrived, so a peer that announces a
/// message past the limit is refused without the connection reading it.
package struct WebSocketFrameParser: Sendable {
    package enum Event: Sendable, Equatable {
        /// A whole text or binary message (its fragments joined).
        case message(WebSocketMessage)
        /// A ping, to be answered with a pong carrying `payload`.
        case ping([UInt8])
        case pong
        /// A valid close frame: its code (``WebSocketCloseCode/noStatusReceived`` when it carried none).
        case close(WebSocketCloseCode)
        /// The peer broke the protocol: the connection closes with `code`.
        case failed(WebSocketCloseCode, String)
    }

    package let role: WebSocket.Role
    package let maximumMessageSize: Int
    /// The opcode of the fragmented message under way, and its payload so far.
    private var fragmentOpcode: UInt8?
    private var fragments: [UInt8] = []

    package init(role: WebSocket.Role, maximumMessageSize: Int) {
        self.role = role
        self.maximumMessageSize = Swift.max(0, maximumMessageSize)
    }

    /// Forgets a fragmented message under way (the connection ended).
    package mutating func reset() {
        fragmentOpcode = nil
        fragments = []
    }

    /// The next event from the frames in `inbound` from `start`, moving `start` past each frame it takes; nil
    /// when the frame at `start` is not all there yet. After ``Event/failed(_:_:)`` or ``Event/close(_:)``
    /// nothing more should be parsed.
    package mutating func next(_ inbound: [UInt8], start: inout Int) -> Event? {
        while true {
            let available = inbound.count - start
            guard available >= 2 else { return nil }
            let base = start
            let head0 = inbound[base]
            let head1 = inbound[base + 1]
            let fin = head0 & 0x80 != 0
            let opcode = head0 & 0x0F
            let masked = head1 & 0x80 != 0
            guard head0 & 0x70 == 0 else {
                return .failed(.protocolError, "reserved bits are set, but no extension was negotiated")
            }
            guard [0x0, 0x1, 0x2, 0x8, 0x9, 0xA].contains(opcode) else {
                return .failed(.protocolError, "opcode \(opcode) is reserved")
            }
            if role == .server, !masked { return .failed(.protocolError, "client frames must be masked") }
            if role == .client, masked { return .failed(.protocolError, "server frames must not be masked") }
            var length = UInt64(head1 & 0x7F)
            var headerLength = 2
            if length == 126 {
                guard available >= 4 else { return nil }
                length = UInt64(inbound[base + 2]) << 8 | UInt64(inbound[base + 3])
                headerLength = 4
            } else if length == 127 {
                guard available >= 10 else { return nil }
                length = inbound[(base + 2)..<(base + 10)].reduce(0) { $0 << 8 | UInt64($1) }
                guard length >> 63 == 0 else { return .failed(.protocolError, "the 64-bit length has its top bit set") }
                headerLength = 10
            }
            let isControl = opcode >= 0x8
            if isControl, !fin || length > 125 {
                return .failed(.protocolError, "control frames must be unfragmented and at most 125 bytes")
            }
            if opcode == WebSocket.Opcode.continuation, fragmentOpcode == nil {
                return .failed(.protocolError, "a continuation frame arrived with no message to continue")
            }
            if opcode == WebSocket.Opcode.text || opcode == WebSocket.Opcode.binary, fragmentOpcode != nil {
                return .failed(.protocolError, "a new message began before the fragmented one ended")
            }
            if !isControl {
                let sofar = opcode == WebSocket.Opcode.continuation ? fragments.count : 0
                guard length <= UInt64(maximumMessageSize - sofar) else {
                    return .failed(.messageTooBig, "messages are limited to \(maximumMessageSize) bytes")
                }
            }
            let keyStart = base + headerLength
            let payloadStart = keyStart + (masked ? 4 : 0)
            guard UInt64(available) >= UInt64(payloadStart - base) + length else { return nil }
            var payload = Array(inbound[payloadStart..<(payloadStart + Int(length))])
            if masked {
                let key = inbound[keyStart..<(keyStart + 4)].map { $0 }
                for index in payload.indices { payload[index] ^= key[index & 3] }
            }
            start = payloadStart + Int(length)

            switch opcode {
            case WebSocket.Opcode.ping:
                return .ping(payload)
            case WebSocket.Opcode.pong:
                return .pong
            case WebSocket.Opcode.close:
                return Self.close(payload)
            case WebSocket.Opcode.continuation:
                fragments.append(contentsOf: payload)
                guard fin, let opcode = fragmentOpcode else { continue }
                fragmentOpcode = nil
                let message = fragments
                fragments = []
                return Self.message(opcode: opcode, payload: message)
            default:
                guard fin else {
                    fragmentOpcode = opcode
                    fragments = payload
                    continue
                }
                return Self.message(opcode: opcode, payload: payload)
            }
        }
    }

    private static func message(opcode: UInt8, payload: [UInt8]) -> Event {
        guard opcode == WebSocket.Opcode.text else { return .message(.binary(Data(payload))) }
        guard let text = String(validating: payload, as: UTF8.self) else {
            return .failed(.invalidPayload, "a text message is not valid UTF-8")
        }
        return .message(.text(text))
    }

    /// A close frame's payload: none, or a code allowed on the wire and a UTF-8 reason (RFC 6455 §5.5.1, §7.4).
    private static func close(_ payload: [UInt8]) -> Event {
        guard payload.count != 1 else { return .failed(.protocolError, "a close frame has a 1-byte payload") }
        guard payload.count >= 2 else { return .close(.noStatusReceived) }
        let code = WebSocketCloseCode(UInt16(payload[0]) << 8 | UInt16(payload[1]))
        guard code.isAllowedOnTheWire else {
            return .failed(.protocolError, "close code \(code) may not be sent (RFC 6455, 7.4)")
        }
        guard String(validating: payload[2...], as: UTF8.self) != nil else {
            return .failed(.invalidPayload, "the close reason is not valid UTF-8")
        }
        return .close(code)
    }
}
