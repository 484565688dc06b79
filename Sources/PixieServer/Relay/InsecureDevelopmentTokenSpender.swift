import Foundation
import HTTPServer
import Synchronization

/// DEVELOPMENT ONLY (`relay_tokens=insecure-dev`, off by default, logged as a warning at start): accepts any
/// non-empty token once, so benchmarks and local runs can send without credential-svc. It gates nothing: anyone
/// can mint tokens. The set of spent tokens grows without bound.
public final class InsecureDevelopmentTokenSpender: TokenSpender {
    private let spent = Mutex(Set<Data>())

    public init() {}

    public func spend(_ tokens: [Data]) -> [Result<Void, HTTPError>] {
        spent.withLock { spent in
            tokens.map { token in
                guard !token.isEmpty else {
                    return .failure(HTTPError(.unauthorized, .tokenInvalid, "the token is empty; mint another"))
                }
                return spent.insert(token).inserted ? .success(()) : .failure(.tokenSpent)
            }
        }
    }
}
