import Foundation
import HTTPServer
import Synchronization

/// Spends rate-limit tokens: the relay spends one per frame and blob-svc one per anonymous upload
/// (000_e422bd9a7c930342.txt: "Every send is gated on a rate-limit token, a small spend-once credential").
/// credential-svc issues them (VOPRF tokens, RFC 9497/9578 style) and provides the real spender; tests use
/// ``InMemoryTokenSpender``.
public protocol TokenSpender: Sendable {
    /// Verifies each token and marks the ones that verify spent, all before it returns: one result per token,
    /// in order, failing with an ``HTTPServer/HTTPError``: 401 `token_invalid` for a token that does not
    /// verify, 409 `token_spent` for one already spent (earlier, or earlier in `tokens`), 503 when the spent
    /// set cannot be written (then none of `tokens` is spent).
    ///
    /// Synchronous, and it may block briefly on the store: the relay calls it on a connection's event-loop
    /// thread with every SEND of a burst at once, so one store write (and, for the real spender, verification
    /// on every core) serves them all. Every other connection on that loop waits meanwhile (docs/operations.md,
    /// "The relay").
    func spend(_ tokens: [Data]) -> [Result<Void, HTTPError>]
}

extension TokenSpender {
    /// Spends one token (``spend(_:)-([Data])``), or throws why not.
    public func spend(_ token: Data) throws(HTTPError) { try spend([token])[0].get() }
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

    public func spend(_ tokens: [Data]) -> [Result<Void, HTTPError>] {
        state.withLock { state in
            tokens.map { token in
                if state.spent.contains(token) { return .failure(.tokenSpent) }
                guard state.valid.remove(token) != nil else { return .failure(.tokenInvalid) }
                state.spent.insert(token)
                return .success(())
            }
        }
    }
}

extension HTTPError {
    /// 401 `token_invalid`: the token does not verify.
    public static let tokenInvalid = HTTPError(.unauthorized, .tokenInvalid, "the token does not verify; mint another")
    /// 409 `token_spent`: the token was spent before.
    public static let tokenSpent = HTTPError(.conflict, .tokenSpent, "this token was already spent; mint another")
}
