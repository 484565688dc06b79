import Foundation
import WebSockets

/// WebSocket frames (RFC 6455 §5) as the server's and a client's reader parse them (``WebSocketFrameParser``,
/// the parser the socket uses): headers, lengths, masks, fragments, control frames, UTF-8 of text and close
/// reasons. The first byte of an input picks the role and where the rest is cut in two; the events must be the
/// same whether the bytes arrive at once or in those two reads, as a socket may deliver them.
let webSocketTarget = FuzzTarget(
    name: "websocket",
    summary: "WebSocket frames, server and client side (WebSockets WebSocketFrameParser)",
    maximumLength: 140_000,
    seeds: {
        let key: [UInt8] = [1, 2, 3, 4]
        let text = webSocketFrame(fin: true, opcode: 0x1, Array("hello".utf8), mask: key)
        let start = webSocketFrame(fin: false, opcode: 0x2, [1, 2, 3], mask: key)
        let more = webSocketFrame(fin: true, opcode: 0x0, [4, 5], mask: key)
        let ping = webSocketFrame(fin: true, opcode: 0x9, [9], mask: key)
        let close = webSocketFrame(fin: true, opcode: 0x8, [0x03, 0xE8] + Array("bye".utf8), mask: key)
        let long = webSocketFrame(fin: true, opcode: 0x2, [UInt8](repeating: 7, count: 300), mask: key)
        let server = webSocketFrame(fin: true, opcode: 0x2, [UInt8](repeating: 8, count: 70_000), mask: nil)
        return [
            Data([0]) + text + start + ping + more + close, Data([2]) + long, Data([1]) + server,
            Data([4]) + webSocketFrame(fin: true, opcode: 0xA, [], mask: key),
        ]
    },
    run: { input in
        guard let selector = input.first else { return }
        let bytes = [UInt8](input.dropFirst())
        let role: WebSocket.Role = selector & 1 == 0 ? .server : .client
        let whole = webSocketEvents(role: role, reads: [bytes])
        let cut = bytes.isEmpty ? 0 : Int(selector >> 1) % (bytes.count + 1)
        let split = webSocketEvents(role: role, reads: [Array(bytes[..<cut]), Array(bytes[cut...])])
        guard whole == split else {
            finding("the frames parse differently when the bytes arrive in two reads (cut at \(cut))")
        }
    })

/// Every event the parser gives for the bytes arriving in `reads`, as the socket's reader asks for them.
func webSocketEvents(role: WebSocket.Role, reads: [[UInt8]]) -> [WebSocketFrameParser.Event] {
    var parser = WebSocketFrameParser(role: role, maximumMessageSize: 64 << 10)
    var inbound: [UInt8] = []
    var start = 0
    var events: [WebSocketFrameParser.Event] = []
    for read in reads {
        inbound += read
        while let event = parser.next(inbound, start: &start) {
            events.append(event)
            switch event {
            case .failed, .close: return events
            default: continue
            }
        }
    }
    return events
}

/// A frame as a peer writes it (RFC 6455 §5.2), masked with `mask` when given.
func webSocketFrame(fin: Bool, opcode: UInt8, _ payload: [UInt8], mask: [UInt8]?) -> Data {
    var frame = Data([(fin ? 0x80 : 0) | opcode])
    let maskBit: UInt8 = mask == nil ? 0 : 0x80
    if payload.count < 126 {
        frame.append(maskBit | UInt8(payload.count))
    } else if payload.count <= 0xFFFF {
        frame.append(maskBit | 126)
        frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
    } else {
        frame.append(maskBit | 127)
        frame += (0..<8).reversed().map { UInt8(truncatingIfNeeded: payload.count >> ($0 * 8)) }
    }
    guard let mask else { return frame + payload }
    return frame + mask + payload.enumerated().map { $0.element ^ mask[$0.offset & 3] }
}
