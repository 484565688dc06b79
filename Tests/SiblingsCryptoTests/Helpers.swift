import Foundation
import SiblingsCrypto
import Testing

/// Expects `body` to throw a ``CryptoError`` with `code`.
func expectCryptoError<R>(
    _ code: CryptoError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) {
    do {
        _ = try body()
        Issue.record("expected CryptoError.\(code), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as CryptoError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(!error.reason.isEmpty, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected CryptoError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
}

/// Random bytes for test inputs (from the crypto core's CSPRNG; the reference checks the results).
func randomBytes(_ count: Int) -> Data { SecureRandom.bytes(count: count) }

/// A random length in `range`, for varied inputs.
func randomLength(_ range: ClosedRange<Int>) -> Int { Int.random(in: range) }

/// The number of rounds each randomized cross-check runs, each way.
let crossCheckRounds = 100
