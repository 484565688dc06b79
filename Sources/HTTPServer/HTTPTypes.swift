import Foundation
import Synchronization

/// An HTTP request method. Compare with the static members; other tokens are kept as sent.
public struct HTTPMethod: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue.uppercased() }

    public static let get = HTTPMethod("GET")
    public static let head = HTTPMethod("HEAD")
    public static let post = HTTPMethod("POST")
    public static let put = HTTPMethod("PUT")
    public static let patch = HTTPMethod("PATCH")
    public static let delete = HTTPMethod("DELETE")
    public static let options = HTTPMethod("OPTIONS")

    public var description: String { rawValue }
}

/// Header fields in the order they were added. Lookup by name ignores case, as HTTP requires.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}

    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { add(name, value) }
    }

    /// The first value of `name` (any case); setting replaces every field of that name, `nil` removes them.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.lowercased() == name.lowercased() }?.value }
        set {
            fields.removeAll { $0.name.lowercased() == name.lowercased() }
            if let newValue { fields.append((name, newValue)) }
        }
    }

    /// Every value of `name` (any case), in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    /// Adds a field, keeping any of the same name (for headers that may repeat).
    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }
}

/// A request: the body is collected before a responder sees it, or, on a route whose
/// ``HTTPBodyPolicy`` is `.stream`, arrives in ``bodyStream`` while the handler runs.
public struct HTTPRequest: Sendable {
    public var method: HTTPMethod
    /// The path without the query, percent-decoded (`/v1/discovery/own`).
    public var path: String
    /// The query's `name=value` pairs in order; a name without `=` has an empty value.
    public var queryItems: [(name: String, value: String)]
    public var headers: HTTPHeaders
    /// The collected body; empty on a streaming route (read ``bodyStream`` there).
    public var body: Data
    /// The peer's IP address as the server saw it (`127.0.0.1`, `::1`); nil in the in-memory test client
    /// unless a test sets it. Per-client rate limits count under it.
    public var remoteAddress: String?
    /// The body as it arrives, on a route whose ``HTTPBodyPolicy`` is `.stream`; `nil` elsewhere.
    public var bodyStream: HTTPBodyStream?
    /// The pattern of the ``Router`` route that answers this request (`/v1/blobs/:blob_id`), set by the router
    /// before its middleware run; `nil` when no route matches (a 404 or 405) or outside a router. Label metrics
    /// with this, never with ``path``, which can carry identifiers.
    public var route: String?

    public init(
        method: HTTPMethod, path: String, queryItems: [(name: String, value: String)] = [],
        headers: HTTPHeaders = HTTPHeaders(), body: Data = Data(), bodyStream: HTTPBodyStream? = nil,
        remoteAddress: String? = nil
    ) {
        self.method = method
        self.path = path
        self.queryItems = queryItems
        self.headers = headers
        self.body = body
        self.bodyStream = bodyStream
        self.remoteAddress = remoteAddress
    }

    /// The first value of the query item `name`.
    public func query(_ name: String) -> String? { queryItems.first { $0.name == name }?.value }

    /// The body as UTF-8 text (for tests and logs).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A response: status, headers and either the whole body or a producer that streams it
/// (``stream(status:headers:length:producer:)``).
///
/// Headers pass through as set (`Content-Range`, `Accept-Ranges`, `ETag`, ...), except the framing
/// headers `Content-Length` and `Transfer-Encoding`, which the server derives from the body or the
/// stream's declared length.
public struct HTTPResponse: Sendable, Equatable {
    /// An HTTP status code. `Content-Length` is set by the server from the body.
    public struct Status: Hashable, Sendable, CustomStringConvertible {
        public let code: Int

        public init(_ code: Int) { self.code = code }

        public static let switchingProtocols = Status(101)
        public static let ok = Status(200)
        public static let created = Status(201)
        public static let accepted = Status(202)
        public static let noContent = Status(204)
        public static let partialContent = Status(206)
        public static let badRequest = Status(400)
        public static let unauthorized = Status(401)
        public static let forbidden = Status(403)
        public static let notFound = Status(404)
        public static let methodNotAllowed = Status(405)
        public static let conflict = Status(409)
        public static let contentTooLarge = Status(413)
        public static let unsupportedMediaType = Status(415)
        public static let rangeNotSatisfiable = Status(416)
        public static let upgradeRequired = Status(426)
        public static let tooManyRequests = Status(429)
        public static let internalServerError = Status(500)
        public static let serviceUnavailable = Status(503)

        public var description: String { String(code) }
    }

    /// A body produced while it is sent, in constant memory: see ``HTTPResponse/stream(status:headers:length:producer:)``.
    public struct BodyStream: Sendable {
        /// The body's exact length, sent as `Content-Length`; `nil` sends it chunked.
        public let length: Int?
        let producer: @Sendable (HTTPBodyWriter) async throws -> Void
    }

    public var status: Status
    public var headers: HTTPHeaders
    /// The whole body; ignored when ``bodyStream`` is set.
    public var body: Data
    /// A streamed body, produced while it is sent; `nil` for a response whose body is ``body``.
    public var bodyStream: BodyStream?
    /// Set on the 101 answer of a WebSocket route: what runs on the upgraded connection.
    var webSocket: WebSocketUpgrade?

    public init(status: Status = .ok, headers: HTTPHeaders = HTTPHeaders(), body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response whose body `producer` writes while it is sent: at most about 1 MiB is buffered, and the
    /// producer is suspended while the client reads slowly, so a body of many GiB takes constant memory.
    ///
    /// With a `length`, `Content-Length` is sent and the producer must write exactly that many bytes (a
    /// short body makes the server drop the connection so the client sees it truncated); without one, the
    /// body is sent chunked. A producer that throws ends the body the same way. A 206 with `Content-Range`
    /// is built the same way, with the range's length. A HEAD request never runs the producer.
    public static func stream(
        status: Status = .ok, headers: HTTPHeaders = HTTPHeaders(), length: Int? = nil,
        producer: @escaping @Sendable (HTTPBodyWriter) async throws -> Void
    ) -> HTTPResponse {
        var response = HTTPResponse(status: status, headers: headers)
        response.bodyStream = BodyStream(length: length, producer: producer)
        return response
    }

    /// A response whose body is the chunks of `chunks`, sent as they come (see
    /// ``stream(status:headers:length:producer:)``).
    public static func stream<Chunks: AsyncSequence & Sendable>(
        status: Status = .ok, headers: HTTPHeaders = HTTPHeaders(), length: Int? = nil, chunks: Chunks
    ) -> HTTPResponse where Chunks.Element == Data {
        stream(status: status, headers: headers, length: length) { writer in
            for try await chunk in chunks { try await writer.write(chunk) }
        }
    }

    /// Status, headers and body are equal, and both stream (with the same declared length) or neither does.
    public static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
        lhs.status == rhs.status && lhs.headers == rhs.headers && lhs.body == rhs.body
            && (lhs.bodyStream == nil) == (rhs.bodyStream == nil) && lhs.bodyStream?.length == rhs.bodyStream?.length
    }

    /// This response with a streamed body read into ``body`` (for the in-memory client and tests).
    /// Throws what the producer throws, or if it wrote other than its declared length.
    public func collected() async throws -> HTTPResponse {
        guard let stream = bodyStream else { return self }
        let collected = Mutex(Data())
        try await stream.producer(HTTPBodyWriter { data in collected.withLock { $0.append(data) } })
        var response = self
        response.bodyStream = nil
        response.body = collected.withLock { $0 }
        if let length = stream.length, response.body.count != length {
            throw HTTPError(
                .internalServerError, .internalError,
                "the streamed body is \(response.body.count) bytes but declared \(length); write exactly the length")
        }
        return response
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: Status = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Data(text.utf8))
    }

    /// The body as UTF-8 text (for tests and logs).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}
