import Foundation
import HTTPServer
import Synchronization

/// DEVELOPMENT ONLY (`relay_tokens=insecure-dev`, off by default, logged as a warning at start): accepts any
/// non-empty token once, so benchmarks and local runs can send without credential-svc. It gates nothing: anyone
/// can mint tokens. The set of spent tokens grows without bound.
public final class InsecureDevelopmentTokenSpender: TokenSpender {
    private let spent = Mutex(Set<Data>())

    public init() {}

    public func spend(_ token: Data) async throws(HTTPError) {
        guard !token.isEmpty else {
            throw HTTPError(.unauthorized, .tokenInvalid, "the token is empty; mint another")
        }
        let fresh = spent.withLock { $0.insert(token).inserted }
        guard fresh else { throw HTTPError(.conflict, .tokenSpent, "this token was already spent; mint another") }
    }
}
