import Foundation

/// The server's answer to a client's opening handshake (RFC 6455, section 4.1), parsed from its head: the status
/// line and the header fields up to the empty line (RFC 9112, sections 4 and 5). ``WebSocketClient`` reads the
/// head from the socket and hands it here; the parser itself is pure, so it is fuzzed (docs/fuzzing.md).
package struct WebSocketUpgradeResponse: Sendable, Equatable {
    /// The longest head the client reads before it gives up on the server.
    package static let maximumHeadByteCount = 16 << 10

    /// The status line as sent, for error messages (control characters replaced).
    package let statusLine: String
    /// The status code, when the status line is `HTTP/<digit>.<digit> <three digits>[ <reason>]` (RFC 9112,
    /// section 4); nil otherwise.
    package let status: Int?
    /// True when the status line's version is `HTTP/1.1`, the only version with a 101 upgrade.
    package let isHTTP11: Bool
    /// The fields by lower-cased name (names compare case-insensitively, RFC 9110, section 5.1). A field sent more
    /// than once has its values joined with ", ", as RFC 9110, section 5.3, allows a recipient to do; a line
    /// that is not `name: value` with a token for its name is left out, and an obsolete folded line (one that
    /// starts with a space or tab) continues the field before it (RFC 9112, section 5.2).
    package let fields: [String: String]

    /// Parses `head`, the bytes up to and including the empty line (or fewer, when the server sent no more).
    package init(head: [UInt8]) {
        // RFC 9112, section 2.2: lines end in CRLF; a lone LF is accepted too.
        var lines = head.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        }
        if let end = lines.firstIndex(where: \.isEmpty) { lines = Array(lines[..<end]) }
        let first = lines.first ?? []
        statusLine = String(decoding: first.map { $0 < 0x20 || $0 == 0x7F ? UInt8(ascii: "?") : $0 }, as: UTF8.self)
        (status, isHTTP11) = Self.status(of: Array(first))

        var fields: [String: String] = [:]
        var last: String?
        for line in lines.dropFirst() {
            if let lead = line.first, lead == UInt8(ascii: " ") || lead == UInt8(ascii: "\t") {
                if let name = last { fields[name, default: ""] += " " + Self.trimmed(line) }
                continue
            }
            last = nil
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                line[..<colon].allSatisfy(Self.isTokenByte)
            else { continue }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            let value = Self.trimmed(line[(colon + 1)...])
            fields[name] = fields[name].map { $0 + ", " + value } ?? value
            last = name
        }
        self.fields = fields
    }

    /// The body's length a refusal declares (`Content-Length`), when it is a plain decimal under 64 KiB, so the
    /// client can read it into its error.
    package var refusalBodyByteCount: Int? {
        guard let text = fields["content-length"], !text.isEmpty, text.utf8.count <= 5,
            text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let count = Int(text),
            count > 0, count < 64 << 10
        else { return nil }
        return count
    }

    /// Throws unless this response completes the handshake the client opened with `key` (RFC 6455, section 4.1,
    /// the client's checks 1 to 6): status 101 over HTTP/1.1, `Upgrade: websocket`, a `Connection` that lists
    /// `upgrade`, the `Sec-WebSocket-Accept` for `key`, no extension (this client offers none), and a subprotocol
    /// only if it is one of `offeredProtocols`. `body` is what followed a refusal, for its message.
    package func validate(key: String, offeredProtocols: [String] = [], body: [UInt8] = []) throws(WebSocketError) {
        guard status == 101, isHTTP11 else {
            let said = body.isEmpty ? "" : ": " + String(decoding: body, as: UTF8.self)
            throw WebSocketError("the server answered \(statusLine) instead of 101 Switching Protocols\(said)")
        }
        guard fields["upgrade"]?.lowercased() == "websocket" else {
            throw WebSocketError(
                "the server switched protocols without Upgrade: websocket (it sent \(fields["upgrade"] ?? "none")); "
                    + "it is no WebSocket server")
        }
        guard Self.tokens(fields["connection"]).contains("upgrade") else {
            throw WebSocketError("the server's 101 has no Connection: Upgrade; it is no WebSocket server")
        }
        guard fields["sec-websocket-accept"] == WebSocket.acceptKey(for: key) else {
            throw WebSocketError(
                "the server's Sec-WebSocket-Accept does not match the key sent; it is no WebSocket server")
        }
        if let extensions = fields["sec-websocket-extensions"], !extensions.isEmpty {
            throw WebSocketError(
                "the server chose the extension \(extensions), which this client did not offer and does not support")
        }
        if let chosen = fields["sec-websocket-protocol"], !offeredProtocols.contains(chosen) {
            throw WebSocketError(
                "the server chose the subprotocol \(chosen), which the client did not offer"
                    + (offeredProtocols.isEmpty ? "" : " (it offered \(offeredProtocols.joined(separator: ", ")))"))
        }
    }

    /// The comma-separated tokens of a field's value, lower-cased.
    private static func tokens(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }

    /// `HTTP/d.d ddd[ reason]` (RFC 9112, section 4): the status code, and whether the version is 1.1.
    private static func status(of line: [UInt8]) -> (Int?, Bool) {
        let digit = { (byte: UInt8) in byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        guard line.count >= 12, line.starts(with: Array("HTTP/".utf8)), digit(line[5]), line[6] == UInt8(ascii: "."),
            digit(line[7]), line[8] == UInt8(ascii: " "), line[9...11].allSatisfy(digit),
            line.count == 12 || line[12] == UInt8(ascii: " ")
        else { return (nil, false) }
        let code = line[9...11].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        return (code, line[5] == UInt8(ascii: "1") && line[7] == UInt8(ascii: "1"))
    }

    /// RFC 9110, section 5.6.2: tchar.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// The bytes as text with the optional whitespace around a field value removed (RFC 9110, section 5.5).
    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> String {
        let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let start = bytes.firstIndex { !isSpace($0) } ?? bytes.endIndex
        let end = bytes.lastIndex { !isSpace($0) }.map { $0 + 1 } ?? start
        return String(decoding: bytes[start..<max(start, end)], as: UTF8.self)
    }
}
