import Foundation
import HTTPServer

#if canImport(Glibc)
    import Glibc
#endif

/// Sets ``HTTPServer/HTTPRequest/remoteAddress`` to the client's address when the request came through one of the
/// operator's reverse proxies (`trusted_proxies`), so that per-client rate limits and logs see clients rather than
/// the proxy.
///
/// The client is the rightmost address of `X-Forwarded-For` that is not itself a trusted proxy (the header
/// nginx's `$proxy_add_x_forwarded_for` and Caddy write: each proxy appends the address it saw). Anything left of
/// it was written by the client and is ignored, as is the whole header on a request whose peer is not a trusted
/// proxy, so a client cannot choose its own bucket.
struct ForwardedForMiddleware: HTTPMiddleware {
    let trusted: Set<String>

    func handle(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        guard let peer = request.remoteAddress, trusted.contains(peer),
            let header = request.headers["X-Forwarded-For"]
        else { return try await next(request) }
        let hops = header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let client = hops.reversed().first(where: { !trusted.contains($0) }),
            Self.isIPAddress(client)
        else { return try await next(request) }
        var forwarded = request
        forwarded.remoteAddress = client
        return try await next(forwarded)
    }

    /// Whether `text` is an IPv4 or IPv6 address in text form.
    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
