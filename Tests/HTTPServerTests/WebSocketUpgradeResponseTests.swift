import Foundation
import Testing
import WebSockets

#if canImport(Glibc)
    import Glibc
#endif

/// The client's checks of the server's handshake answer (RFC 6455, section 4.1), on ``WebSocketUpgradeResponse``
/// and through ``WebSocketClient`` against a raw socket that answers what a test gives it.
@Suite("WebSocket upgrade response")
struct WebSocketUpgradeResponseTests {
    /// RFC 6455, section 1.3's example key and its accept value.
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="
    static let accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

    static func response(_ lines: [String]) -> WebSocketUpgradeResponse {
        WebSocketUpgradeResponse(head: Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8))
    }

    static let valid = [
        "HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
        "Sec-WebSocket-Accept: \(accept)",
    ]

    @Test("a server's answer in any case and spacing, with folded and LF-only lines, is accepted")
    func accepted() throws {
        try Self.response(Self.valid).validate(key: Self.key)
        let loose = WebSocketUpgradeResponse(
            head: Array(
                ("HTTP/1.1 101\nupgrade:WebSocket \r\nCONNECTION: keep-alive,\r\n\tUpgrade\n"
                    + "sec-websocket-accept:\t\(Self.accept)\n\n").utf8))
        #expect(loose.status == 101)
        #expect(loose.fields["connection"] == "keep-alive, Upgrade")
        try loose.validate(key: Self.key)
        try Self.response(Self.valid + ["Sec-WebSocket-Protocol: chat"]).validate(
            key: Self.key, offeredProtocols: ["superchat", "chat"])
    }

    @Test("a 101 that is not a WebSocket server's is refused (each check would let it through without it)")
    func refused() {
        func reason(_ lines: [String], offered: [String] = []) -> String? {
            do {
                try Self.response(lines).validate(key: Self.key, offeredProtocols: offered)
                return nil
            } catch {
                return error.reason
            }
        }
        let upgrade = Self.valid.filter { !$0.hasPrefix("Upgrade") }
        #expect(reason(upgrade)?.contains("without Upgrade: websocket") == true)
        #expect(reason(upgrade + ["Upgrade: h2c"])?.contains("it sent h2c") == true)
        let connection = Self.valid.filter { !$0.hasPrefix("Connection") }
        #expect(reason(connection)?.contains("no Connection: Upgrade") == true)
        #expect(reason(connection + ["Connection: keep-alive"])?.contains("no Connection: Upgrade") == true)
        // The last of a repeated field used to win: a right accept after a wrong one passed.
        #expect(
            reason([Self.valid[0], "Sec-WebSocket-Accept: AAAA"] + Self.valid.dropFirst())?.contains(
                "does not match the key sent") == true)
        #expect(reason(Array(Self.valid.dropLast()) + ["Sec-WebSocket-Accept : \(Self.accept)"]) != nil)
        #expect(reason(Self.valid + ["Sec-WebSocket-Extensions: permessage-deflate"])?.contains("extension") == true)
        #expect(reason(Self.valid + ["Sec-WebSocket-Protocol: chat"])?.contains("did not offer") == true)
        #expect(reason(Self.valid + ["Sec-WebSocket-Protocol: Chat"], offered: ["chat"]) != nil)
        for status in ["HTTP/1.1 +101 OK", "HTTP/1.1 1010 OK", "HTTP/1.0 101 Switching Protocols", "HTTP/1.1  101"] {
            #expect(reason([status] + Self.valid.dropFirst())?.contains("instead of 101") == true, "\(status)")
        }
    }

    @Test("a refusal's status line and body go into the error; a Content-Length that is not plain digits reads none")
    func refusal() throws {
        let notFound = Self.response(["HTTP/1.1 404 Not Found", "Content-Length: 5"])
        #expect(notFound.status == 404)
        #expect(notFound.refusalBodyByteCount == 5)
        #expect(throws: WebSocketError.self) { try notFound.validate(key: Self.key, body: Array("gone!".utf8)) }
        do {
            try notFound.validate(key: Self.key, body: Array("gone!".utf8))
        } catch {
            #expect(
                error.reason == "the server answered HTTP/1.1 404 Not Found instead of 101 Switching Protocols: gone!")
        }
        for length in ["+5", "-1", "0", "65536", "5 5", ""] {
            #expect(Self.response(["HTTP/1.1 400 Bad", "Content-Length: \(length)"]).refusalBodyByteCount == nil)
        }
        #expect(Self.response(["HTTP/1.1 400 Bad\u{7}\u{1b}[2J"]).statusLine == "HTTP/1.1 400 Bad??[2J")
        #expect(WebSocketUpgradeResponse(head: []).status == nil)
    }

    @Test("the client refuses a server that answers 101 with the right accept but no Upgrade: websocket")
    func clientRefusesANonWebSocketUpgrade() async throws {
        let server = try OneAnswerServer { key in
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
                + WebSocket.acceptKey(for: key) + "\r\n\r\n"
        }
        let error = await #expect(throws: WebSocketError.self) {
            _ = try await WebSocketClient.connect(port: server.port, path: "/")
        }
        #expect(error?.reason.contains("without Upgrade: websocket") == true)

        let refusing = try OneAnswerServer { _ in
            "HTTP/1.1 403 Forbidden\r\nContent-Length: 12\r\n\r\nno such user"
        }
        let refused = await #expect(throws: WebSocketError.self) {
            _ = try await WebSocketClient.connect(port: refusing.port, path: "/")
        }
        #expect(
            refused?.reason
                == "the server answered HTTP/1.1 403 Forbidden instead of 101 Switching Protocols: no such user")
    }
}

/// A loopback listener that accepts one connection, reads the upgrade request's head, and writes what `answer`
/// makes of the request's `Sec-WebSocket-Key`.
private final class OneAnswerServer: Sendable {
    let port: UInt16
    private let fd: Int32

    init(answer: @escaping @Sendable (String) -> String) throws {
        guard let (fd, port) = loopbackListener() else {
            throw WebSocketError("the test's listener could not start (errno \(errno))")
        }
        self.fd = fd
        self.port = port
        Thread.detachNewThread {
            let connection = accept(fd, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            var head: [UInt8] = []
            var byte: UInt8 = 0
            while !head.ends(with: Array("\r\n\r\n".utf8)), read(connection, &byte, 1) == 1 { head.append(byte) }
            let key =
                String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
                .first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
            let reply = Array(answer(key).utf8)
            _ = reply.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            // Held open until the client has read the answer and closed its side.
            while read(connection, &byte, 1) == 1 {}
        }
    }

    deinit { close(fd) }
}

/// A TCP socket listening on 127.0.0.1 at a port the kernel picks: its descriptor and port, or nil (the socket
/// closed) if it could not listen.
func loopbackListener() -> (fd: Int32, port: UInt16)? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else {
        close(fd)
        return nil
    }
    return (fd, UInt16(bigEndian: address.sin_port))
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
