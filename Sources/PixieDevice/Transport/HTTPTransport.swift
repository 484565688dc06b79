import Foundation

/// One HTTP exchange with pixie-server, as the device SDK makes it: the seam where an app (or a test) puts its
/// own network. ``SocketHTTPTransport`` is the one for real servers.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the answer, whatever its status; throws only when no answer came.
    func send(_ request: TransportRequest) async throws -> TransportResponse
}

public struct TransportRequest: Sendable, Equatable {
    public var method: String
    /// The path and query, `/v1/kt/consistency?from=1&to=2`.
    public var target: String
    public var headers: [String: String]
    public var body: Data?
    /// A body made while it is sent (chunked), instead: a blob of gigabytes is never whole in memory.
    public var bodyPipe: PipedBody?

    public init(
        method: String, target: String, headers: [String: String] = [:], body: Data? = nil, bodyPipe: PipedBody? = nil
    ) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.bodyPipe = bodyPipe
    }
}

public struct TransportResponse: Sendable, Equatable {
    public var status: Int
    /// Field names lowercased.
    public var headers: [String: String]
    public var body: Data

    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

extension TransportRequest {
    /// The path of ``target``, without its query (which may carry a name that is not for logs).
    var path: Substring { target.prefix { $0 != "?" } }
}
