import Foundation

/// The one error type of the HTTPServer module.
///
/// Shaped like ``SiblingsCrypto/CryptoError``: a `code` that can grow without breaking callers, a
/// `reason` that says what was wrong and what to do, and where it was thrown. It also carries the HTTP
/// `status` it answers with; thrown from a handler it becomes a JSON body `{"error": code, "reason": reason}`.
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is, sent as the `error` field. Services add their own with `Code("...")`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String

        /// A code of the caller's own (a short `snake_case` word, stable across releases).
        public init(_ rawValue: String) { self.rawValue = rawValue }

        /// The request is malformed (a missing parameter, a header that does not parse).
        public static let badRequest = Code("bad_request")
        /// The body is not the JSON the route expects; the reason names the field.
        public static let invalidJSON = Code("invalid_json")
        /// A JSON route got a body whose `Content-Type` is not `application/json` (a 415).
        public static let unsupportedMediaType = Code("unsupported_media_type")
        /// No route has this path.
        public static let notFound = Code("not_found")
        /// A route has this path but not this method; the response lists the allowed ones in `Allow`.
        public static let methodNotAllowed = Code("method_not_allowed")
        /// A WebSocket endpoint got a request that is no upgrade, or asks for a version other than 13 (a 426).
        public static let upgradeRequired = Code("upgrade_required")
        /// The body is longer than the server accepts.
        public static let contentTooLarge = Code("content_too_large")
        /// The client disconnected before the whole body was received or sent (thrown out of
        /// ``HTTPBodyStream`` and ``HTTPBodyWriter/write(_:)``; nobody is left to read a response).
        public static let clientDisconnected = Code("client_disconnected")
        /// A WebSocket upgrade past the server's limits: the client's address holds its share (429), or the
        /// server holds all it can (503).
        public static let tooManyConnections = Code("too_many_connections")
        /// The handler took longer than ``HTTPServer/Configuration/responderTimeout`` (a 503).
        public static let timeout = Code("timeout")
        /// A handler failed in a way it did not describe; details stay in the server's log.
        public static let internalError = Code("internal_error")
        /// libmicrohttpd could not start, or refused a response.
        public static let server = Code("server")

        public var description: String { rawValue }
    }

    public let code: Code
    public let status: HTTPResponse.Status
    public let reason: String
    /// Headers the response carries besides `Content-Type` (`Allow` on a 405, `Retry-After` on a 429).
    public var headers: HTTPHeaders
    /// Fields the body carries beside `error` and `reason` (a `401 device_removed`'s `removed_at` and
    /// `removed_by`); they never replace those two.
    public var details: [String: Detail] = [:]
    public let file: String
    public let line: UInt

    public init(
        _ status: HTTPResponse.Status, _ code: Code, _ reason: String, headers: HTTPHeaders = HTTPHeaders(),
        file: String = #fileID, line: UInt = #line
    ) {
        self.status = status
        self.code = code
        self.reason = reason
        self.headers = headers
        self.file = file
        self.line = line
    }

    /// A value of ``details``: JSON's string, integer or null.
    public enum Detail: Sendable, Equatable, Encodable {
        case text(String)
        case integer(Int64)
        case null

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .text(let text): try container.encode(text)
            case .integer(let value): try container.encode(value)
            case .null: try container.encodeNil()
            }
        }
    }

    public var description: String { "HTTPError.\(code) (\(status.code)): \(reason) (\(file):\(line))" }

    /// The response a client sees: the status and `{"error": "...", "reason": "..."}`.
    public var response: HTTPResponse {
        var headers = self.headers
        headers["Content-Type"] = "application/json"
        var fields = details
        fields["error"] = .text(code.rawValue)
        fields["reason"] = .text(reason)
        let body = (try? JSONEncoder.sortedKeys.encode(fields)) ?? Data()
        return HTTPResponse(status: status, headers: headers, body: body)
    }
}

extension HTTPError {
    /// The 413 for a body past `limit` bytes.
    static func tooLarge(limit: Int, file: String = #fileID, line: UInt = #line) -> HTTPError {
        HTTPError(
            .contentTooLarge, .contentTooLarge, "the body is larger than \(limit) bytes; send less", file: file,
            line: line)
    }
}

extension JSONEncoder {
    /// Sorted keys, no escaped slashes: stable bytes for tests and diffs.
    static var sortedKeys: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
