import Foundation
import Testing
import WebSockets

/// ``WebSocketFrameParser`` on its own (RFC 6455 §5): the same events however the bytes are cut into reads,
/// and violations judged from a frame's header before its payload arrives.
@Suite("WebSocket frames parsed apart from the socket")
struct WebSocketFrameParserTests {
    /// A frame as a peer writes it, masked with `mask` when given.
    static func frame(fin: Bool = true, _ opcode: UInt8, _ payload: [UInt8], mask: [UInt8]? = [7, 1, 9, 3]) -> [UInt8] {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        if payload.count < 126 {
            frame.append(maskBit | UInt8(payload.count))
        } else {
            frame += [maskBit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        guard let mask else { return frame + payload }
        return frame + mask + payload.enumerated().map { $0.element ^ mask[$0.offset & 3] }
    }

    /// Every event for `reads` arriving one after another, until a close or a violation.
    static func events(
        _ reads: [[UInt8]], role: WebSocket.Role = .server, maximum: Int = 1 << 16
    ) -> [WebSocketFrameParser.Event] {
        var parser = WebSocketFrameParser(role: role, maximumMessageSize: maximum)
        var inbound: [UInt8] = []
        var start = 0
        var events: [WebSocketFrameParser.Event] = []
        for read in reads {
            inbound += read
            while let event = parser.next(inbound, start: &start) {
                events.append(event)
                if case .failed = event { return events }
                if case .close = event { return events }
            }
        }
        return events
    }

    @Test("a message in three fragments with a ping between them: the same events fed whole or a byte at a time")
    func fragmentsAcrossReads() {
        let bytes =
            Self.frame(fin: false, 0x2, [1, 2, 3]) + Self.frame(0x9, [42]) + Self.frame(fin: false, 0x0, [4])
            + Self.frame(0x0, Array(repeating: 5, count: 300)) + Self.frame(0x8, [0x03, 0xE8] + Array("bye".utf8))
        let expected: [WebSocketFrameParser.Event] = [
            .ping([42]), .message(.binary(Data([1, 2, 3, 4] + Array(repeating: 5, count: 300)))),
            .close(.normalClosure),
        ]
        #expect(Self.events([bytes]) == expected)
        #expect(Self.events(bytes.map { [$0] }) == expected)
    }

    @Test("a frame announcing more than the limit is refused from its header, before any payload arrives")
    func judgedFromTheHeader() {
        // 127: a 64-bit length follows; 2^40 bytes announced, none sent.
        let header: [UInt8] = [0x82, 0x80 | 127, 0, 0, 1, 0, 0, 0, 0, 0, 7, 1, 9, 3]
        guard case .failed(let code, _)? = Self.events([header]).first else {
            Issue.record("a frame announcing 2^40 bytes was not refused from its header")
            return
        }
        #expect(code == .messageTooBig)
        // A header alone that is within the limit waits for its payload.
        #expect(Self.events([Array(Self.frame(0x2, Array(repeating: 1, count: 200)).prefix(8))]).isEmpty)
    }

    @Test("masking, reserved bits and close frames are held to RFC 6455")
    func violations() {
        func failure(_ bytes: [UInt8], role: WebSocket.Role = .server) -> WebSocketCloseCode? {
            guard case .failed(let code, _)? = Self.events([bytes], role: role).last else { return nil }
            return code
        }
        #expect(failure(Self.frame(0x2, [1], mask: nil)) == .protocolError)
        #expect(failure(Self.frame(0x2, [1]), role: .client) == .protocolError)
        #expect(failure([0xC2, 0x80, 0, 0, 0, 0]) == .protocolError)
        #expect(failure(Self.frame(0x3, [])) == .protocolError)
        #expect(failure(Self.frame(0x0, [1])) == .protocolError)
        #expect(failure(Self.frame(fin: false, 0x9, [])) == .protocolError)
        #expect(failure(Self.frame(0x1, [0xFF])) == .invalidPayload)
        #expect(failure(Self.frame(0x8, [0x03])) == .protocolError)
        #expect(failure(Self.frame(0x8, [0x03, 0xED])) == .protocolError)  // 1005 is never sent
        #expect(failure(Self.frame(0x8, [0x03, 0xE8, 0xC3])) == .invalidPayload)
        #expect(Self.events([Self.frame(0x8, [])]) == [.close(.noStatusReceived)])
        #expect(Self.events([Self.frame(0x1, Array("hé".utf8), mask: nil)], role: .client) == [.message(.text("hé"))])
    }
}
