extension PixieAPI {
    /// One endpoint of pixie-server's HTTP API: its method, its path, what authorizes a call, and (as type
    /// parameters only) the body it takes and the answer it gives.
    ///
    /// `Request` and `Response` are the PixieWire `Codable` types both ends use (``PhoneVerifyAPI/StartRequest``,
    /// ``IdentityAPI/EnrolledResponse``, ...), or ``NoBody``, ``RawBody`` and ``WebSocketFrames`` where the body
    /// is not JSON. Nothing of either type is stored, so every endpoint is `Sendable` whatever they are.
    ///
    /// `path` is a template in docs/openapi.yaml's spelling: a segment `{name}` is a path parameter
    /// (`/v1/blobs/{blob_id}`). A client fills it with ``target(_:query:)``; the server's router matches
    /// ``routePattern`` (`/v1/blobs/:blob_id`).
    public struct Endpoint<Request, Response>: Hashable, Sendable, CustomStringConvertible {
        /// The operation's name: docs/openapi.yaml's `operationId` (`startPhoneVerification`).
        public let name: String
        public let method: Method
        /// The path template, `{name}` for a parameter (`/v1/blobs/{blob_id}`).
        public let path: String
        public let authorization: Authorization

        public init(name: String, method: Method, path: String, authorization: Authorization) {
            self.name = name
            self.method = method
            self.path = path
            self.authorization = authorization
        }

        /// The names of the path's parameters, in order (`["blob_id"]`).
        public var parameterNames: [String] { PixieAPI.parameterNames(in: path) }

        /// The path as the server's router spells a pattern: `:name` for each parameter (`/v1/blobs/:blob_id`).
        public var routePattern: String { PixieAPI.routePattern(of: path) }

        /// The path with each `{name}` replaced by `parameters[name]`, percent-encoded (RFC 3986: everything but
        /// the unreserved characters), followed by `query` as `?name=value&...`, encoded the same way: what a
        /// client requests (`/v1/blobs/AAEC`, `/v1/kt/checkpoints?after=0&limit=10`).
        ///
        /// A parameter the template has and `parameters` lacks, or one it does not have, is a programming error,
        /// like a missing argument, and stops the program.
        public func target(_ parameters: [String: String] = [:], query: [(name: String, value: String)] = []) -> String
        {
            PixieAPI.fillTarget(method: method, path: path, parameters: parameters, query: query)
        }

        /// `POST /v1/accounts`.
        public var description: String { "\(method.rawValue) \(path)" }
    }

    /// An endpoint without its body types, for tables of endpoints of every kind (``PixieAPI/all``).
    public struct AnyEndpoint: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public let method: Method
        public let path: String
        public let authorization: Authorization

        public init<Request, Response>(_ endpoint: Endpoint<Request, Response>) {
            self.name = endpoint.name
            self.method = endpoint.method
            self.path = endpoint.path
            self.authorization = endpoint.authorization
        }

        /// The names of the path's parameters, in order.
        public var parameterNames: [String] { PixieAPI.parameterNames(in: path) }

        /// The path as the server's router spells a pattern (`/v1/blobs/:blob_id`).
        public var routePattern: String { PixieAPI.routePattern(of: path) }

        /// `POST /v1/accounts`.
        public var description: String { "\(method.rawValue) \(path)" }
    }

    /// An HTTP request method (RFC 9110, section 9).
    public enum Method: String, Hashable, Sendable, CaseIterable {
        case get = "GET"
        case head = "HEAD"
        case post = "POST"
        case put = "PUT"
        case patch = "PATCH"
        case delete = "DELETE"
    }

    /// What entitles a caller to an endpoint: what the server checks before it acts on a request.
    ///
    /// A struct rather than an enum so that a kind can be added (an operator's credential, say) without breaking
    /// an app's `switch`; compare with the static members.
    public struct Authorization: Hashable, Sendable, CustomStringConvertible {
        /// A short name (`session`, `phone-cert`).
        public let name: String
        /// The schemes of the `Authorization` header the endpoint reads, as docs/openapi.yaml names its security
        /// schemes: `bearer` (a session token) and `privateToken` (rate-limit tokens, RFC 9577 style). Empty when
        /// the header is not read: what authorizes the call is in the body, the path or the frames.
        public let headerSchemes: Set<String>

        private init(_ name: String, headerSchemes: Set<String> = []) {
            self.name = name
            self.headerSchemes = headerSchemes
        }

        public var description: String { name }

        /// Nothing: anyone may call it (the endpoints docs/openapi.yaml marks "counted" share a per-address rate
        /// limit).
        public static let open = Authorization("open")

        /// A ``PhoneOwnershipCert`` in the body, verified against the pinned phone-verify keys: the number, proven
        /// by SMS, is the authority. Account creation also registers a passkey over a fresh challenge.
        public static let phoneCert = Authorization("phone-cert")

        /// A grant an enrolled device minted, or its six-digit code with the number's ``PhoneOwnershipCert``, in
        /// the body.
        public static let grant = Authorization("grant")

        /// A passkey assertion in the body, over a challenge from `POST /v1/auth/passkey/challenge`.
        public static let passkey = Authorization("passkey")

        /// The unguessable identifier in the path (a blob_id, 16 random bytes): knowing it is the right.
        public static let capability = Authorization("capability")

        /// An enrolled device's session: `Authorization: Bearer <session token>`.
        public static let session = Authorization("session", headerSchemes: ["bearer"])

        /// A session (`Authorization: Bearer <session token>`) or rate-limit tokens
        /// (`Authorization: PrivateToken token=<base64url>[, token=...]`), so that the server need not know whose
        /// call it is.
        public static let sessionOrPrivateTokens = Authorization(
            "session-or-private-tokens", headerSchemes: ["bearer", "privateToken"])

        /// Nothing to connect; on the connection, each relay SUBSCRIBE proves its subject's key over the CHALLENGE
        /// and each SEND spends a rate-limit token (docs/pixie-protocol.md, "Relay").
        public static let perFrame = Authorization("per-frame")
    }

    /// The body of a request or an answer that has none (a `GET`, a `204`).
    public enum NoBody: Sendable {}

    /// A body of raw bytes rather than JSON: a blob, a checkpoint's signed note, the metrics' text.
    public enum RawBody: Sendable {}

    /// The answer of a WebSocket endpoint: a `101` upgrade (RFC 6455), after which the connection carries binary
    /// messages (for the relay, ``RelayClientFrame`` and ``RelayServerFrame``).
    public enum WebSocketFrames: Sendable {}
}

// MARK: - Templates

extension PixieAPI {
    /// The name of a `{name}` segment; nil for a literal one.
    static func parameterName(_ segment: Substring) -> String? {
        guard segment.count > 2, segment.first == "{", segment.last == "}" else { return nil }
        return String(segment.dropFirst().dropLast())
    }

    static func parameterNames(in path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).compactMap { parameterName($0) }
    }

    static func routePattern(of path: String) -> String {
        var pattern = ""
        for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
            pattern.append("/")
            if let name = parameterName(segment) {
                pattern.append(":")
                pattern.append(name)
            } else {
                pattern.append(contentsOf: segment)
            }
        }
        return pattern.isEmpty ? "/" : pattern
    }

    static func fillTarget(
        method: Method, path: String, parameters: [String: String], query: [(name: String, value: String)]
    ) -> String {
        let names = parameterNames(in: path)
        let unknown = parameters.keys.filter { !names.contains($0) }.sorted()
        precondition(
            unknown.isEmpty, "\(method.rawValue) \(path) has no path parameter \(unknown.joined(separator: ", "))")
        var filled = ""
        for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
            filled.append("/")
            if let name = parameterName(segment) {
                guard let value = parameters[name] else {
                    preconditionFailure("\(method.rawValue) \(path) needs a value for its path parameter \(name)")
                }
                filled.append(percentEncoded(value))
            } else {
                filled.append(contentsOf: segment)
            }
        }
        if filled.isEmpty { filled = "/" }
        if !query.isEmpty {
            filled.append("?")
            filled.append(
                query.map { item in percentEncoded(item.name) + "=" + percentEncoded(item.value) }
                    .joined(separator: "&"))
        }
        return filled
    }

    /// `text` with every byte of its UTF-8 but RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`)
    /// written `%XX`.
    static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                bytes.append(byte)
            default:
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
