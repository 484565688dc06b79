import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP exchange with pixie-server, as the device SDK makes it: the seam where an app (or a test) puts its
/// own network. ``URLSessionTransport`` is the one for real servers.
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

/// HTTP through Foundation's URLSession, to the server at `baseURL` (`https://pixie.example`, or
/// `http://127.0.0.1:8080` for a local one).
public struct URLSessionTransport: HTTPTransport {
    public let baseURL: URL
    private let session: URLSession
    /// For piped bodies: the same idle timeout, but no limit on the whole exchange but a day, since a
    /// snapshot of gigabytes takes as long as the connection needs.
    private let uploadSession: URLSession
    private let timeout: TimeInterval

    /// `timeout`: how long one exchange may take before it fails with a message that says so (for a piped body,
    /// how long it may go without progress).
    public init(baseURL: URL, timeout: TimeInterval = 30) {
        self.baseURL = baseURL
        self.timeout = timeout
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
        session = URLSession(configuration: configuration)
        let uploads = URLSessionConfiguration.ephemeral
        uploads.timeoutIntervalForRequest = timeout
        uploads.timeoutIntervalForResource = 86_400
        uploadSession = URLSession(configuration: uploads)
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        guard let url = URL(string: request.target, relativeTo: baseURL) else {
            throw PixieClientError.unreachable("\(request.target) is not a path on \(baseURL.absoluteString)")
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        if let pipe = request.bodyPipe { urlRequest.httpBodyStream = pipe.inputStream() }
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        do {
            // Not cancelled from outside: on Linux, swift-corelibs-foundation's URLSession can deadlock when the task
            // awaiting data(for:) is cancelled just as the transfer completes (its cancellation handler and its
            // completion each wait for a lock the other holds). The exchange is bounded by `timeout` instead.
            // URLSession's own timeout is not relied on alone (an exchange it never ends would leave the caller
            // waiting for ever): past a deadline of its own the exchange is left to end by itself, and the caller
            // hears which one did not answer.
            let exchange = Task.detached { [session, uploadSession, urlRequest] in
                // The producer of a piped body is let go, however the exchange ends.
                defer { request.bodyPipe?.readerStopped() }
                return try await (request.bodyPipe == nil ? session : uploadSession).data(for: urlRequest)
            }
            let deadline: Duration = request.bodyPipe != nil ? .seconds(86_400) : .seconds(timeout + 5)
            let (data, response) = try await Self.first(exchange, orFailAfter: deadline) {
                request.bodyPipe?.readerStopped()
                return PixieClientError.unreachable(
                    "\(baseURL.absoluteString) did not answer \(request.method) \(Self.path(of: request.target)) within "
                        + "\(deadline.components.seconds) s; try again, or check the server")
            }
            guard let http = response as? HTTPURLResponse else {
                throw PixieClientError.unreachable("\(baseURL.absoluteString) did not answer with HTTP")
            }
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
            }
            return TransportResponse(status: http.statusCode, headers: headers, body: data)
        } catch let error as PixieClientError {
            throw error
        } catch let error as URLError {
            throw PixieClientError.unreachable(Self.explain(error, baseURL: baseURL, timeout: timeout))
        } catch {
            throw PixieClientError.unreachable("the request to \(baseURL.absoluteString) failed (\(type(of: error)))")
        }
    }

    /// The path of `target`, without its query (which may carry a name that is not for logs).
    static func path(of target: String) -> Substring { target.prefix { $0 != "?" } }

    /// `exchange`'s value, or `failure()` thrown once `deadline` passes first (the exchange is not cancelled: see
    /// above).
    static func first<Value: Sendable>(
        _ exchange: Task<Value, any Error>, orFailAfter deadline: Duration,
        failure: @escaping @Sendable () -> any Error
    ) async throws -> Value {
        let outcome = Once<Value>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.set(continuation)
            let timer = Task {
                try await Task.sleep(for: deadline)
                outcome.resume(with: .failure(failure()))
            }
            Task {
                let result = await exchange.result
                timer.cancel()
                outcome.resume(with: result)
            }
        }
    }

    /// A continuation resumed by whichever comes first.
    private final class Once<Value: Sendable>: Sendable {
        private let continuation = Mutex<CheckedContinuation<Value, any Error>?>(nil)
        func set(_ continuation: CheckedContinuation<Value, any Error>) {
            self.continuation.withLock { $0 = continuation }
        }
        func resume(with result: Result<Value, any Error>) { continuation.withLock { $0.take() }?.resume(with: result) }
    }

    static func explain(_ error: URLError, baseURL: URL, timeout: TimeInterval) -> String {
        let server = baseURL.absoluteString
        switch error.code {
        case .cannotConnectToHost, .networkConnectionLost:
            return "nothing answers at \(server); is pixie-server running there?"
        case .cannotFindHost, .dnsLookupFailed: return "\(baseURL.host ?? server) does not resolve; check the address"
        case .timedOut: return "\(server) did not answer within \(Int(timeout)) s; try again, or check the server"
        case .notConnectedToInternet: return "this device is offline; connect and try again"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate:
            return "the TLS connection to \(server) failed: its certificate is not trusted here"
        default: return "the request to \(server) failed (URL error \(error.code.rawValue)); try again"
        }
    }
}
