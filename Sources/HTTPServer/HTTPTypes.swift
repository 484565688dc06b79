import Foundation

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

/// A complete request: the body is collected before a responder sees it.
public struct HTTPRequest: Sendable {
    public var method: HTTPMethod
    /// The path without the query, percent-decoded (`/v1/discovery/own`).
    public var path: String
    /// The query's `name=value` pairs in order; a name without `=` has an empty value.
    public var queryItems: [(name: String, value: String)]
    public var headers: HTTPHeaders
    public var body: Data
    /// The peer's IP address as the server saw it (`127.0.0.1`, `::1`); nil in the in-memory test client
    /// unless a test sets it. Per-client rate limits count under it.
    public var remoteAddress: String?

    public init(
        method: HTTPMethod, path: String, queryItems: [(name: String, value: String)] = [],
        headers: HTTPHeaders = HTTPHeaders(), body: Data = Data(), remoteAddress: String? = nil
    ) {
        self.method = method
        self.path = path
        self.queryItems = queryItems
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The first value of the query item `name`.
    public func query(_ name: String) -> String? { queryItems.first { $0.name == name }?.value }

    /// The body as UTF-8 text (for tests and logs).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A response: status, headers and the whole body.
public struct HTTPResponse: Sendable, Equatable {
    /// An HTTP status code. `Content-Length` is set by the server from the body.
    public struct Status: Hashable, Sendable, CustomStringConvertible {
        public let code: Int

        public init(_ code: Int) { self.code = code }

        public static let ok = Status(200)
        public static let created = Status(201)
        public static let accepted = Status(202)
        public static let noContent = Status(204)
        public static let badRequest = Status(400)
        public static let unauthorized = Status(401)
        public static let forbidden = Status(403)
        public static let notFound = Status(404)
        public static let methodNotAllowed = Status(405)
        public static let conflict = Status(409)
        public static let contentTooLarge = Status(413)
        public static let unsupportedMediaType = Status(415)
        public static let tooManyRequests = Status(429)
        public static let internalServerError = Status(500)
        public static let serviceUnavailable = Status(503)

        public var description: String { String(code) }
    }

    public var status: Status
    public var headers: HTTPHeaders
    public var body: Data

    public init(status: Status = .ok, headers: HTTPHeaders = HTTPHeaders(), body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: Status = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Data(text.utf8))
    }

    /// The body as UTF-8 text (for tests and logs).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}
