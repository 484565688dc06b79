import Foundation
import HTTPServer
import Synchronization

/// Spends rate-limit tokens: the relay spends one per frame and blob-svc one per anonymous upload
/// (000_e422bd9a7c930342.txt: "Every send is gated on a rate-limit token, a small spend-once credential").
/// credential-svc issues them (VOPRF tokens, RFC 9497/9578 style) and provides the real spender; tests use
/// ``InMemoryTokenSpender``.
public protocol TokenSpender: Sendable {
    /// Verifies `token` and marks it spent, or throws an ``HTTPServer/HTTPError``: 401 `token_invalid` for a
    /// token that does not verify, 409 `token_spent` for one already spent.
    func spend(_ token: Data) async throws(HTTPError)
}

extension HTTPError.Code {
    public static let tokenInvalid = HTTPError.Code("token_invalid")
    public static let tokenSpent = HTTPError.Code("token_spent")
}

/// A spender for tests and development: tokens are the byte strings it was told to accept, each spendable
/// once.
public final class InMemoryTokenSpender: TokenSpender {
    private let state = Mutex<(valid: Set<Data>, spent: Set<Data>)>(([], []))

    public init(valid: some Sequence<Data> = []) { state.withLock { $0.valid = Set(valid) } }

    /// Adds tokens that will verify.
    public func issue(_ tokens: some Sequence<Data>) { state.withLock { $0.valid.formUnion(tokens) } }

    public func spend(_ token: Data) async throws(HTTPError) {
        let outcome = state.withLock { state -> HTTPError.Code? in
            if state.spent.contains(token) { return .tokenSpent }
            guard state.valid.remove(token) != nil else { return .tokenInvalid }
            state.spent.insert(token)
            return nil
        }
        switch outcome {
        case nil: return
        case .tokenSpent?: throw HTTPError(.conflict, .tokenSpent, "this token was already spent; mint another")
        default: throw HTTPError(.unauthorized, .tokenInvalid, "the token does not verify; mint another")
        }
    }
}
