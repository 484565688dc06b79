import Foundation

/// Where a pixie-server is, as the device's network opens it: `https://host[:port]` (TLS, port 443 by default) or
/// `http://host[:port]` (port 80). The HTTP transport and the relay read the same URL the same way.
struct ServerAddress: Sendable, Equatable {
    /// The host name or address literal, without an IPv6 literal's brackets.
    let host: String
    let port: UInt16
    let isTLS: Bool

    /// Nil for a URL that is not http:// or https://, has no host, or names a port past 65535.
    init?(_ url: URL) {
        let scheme = url.scheme?.lowercased()
        guard scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty else { return nil }
        let isTLS = scheme == "https"
        guard let port = UInt16(exactly: url.port ?? (isTLS ? 443 : 80)) else { return nil }
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.port = port
        self.isTLS = isTLS
    }

    /// The `Host` header (RFC 9110, section 7.2): the host (an IPv6 literal in brackets), and the port unless it is
    /// the scheme's default.
    var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (isTLS ? 443 : 80) ? name : "\(name):\(port)"
    }
}
