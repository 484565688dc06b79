import Foundation

/// The one error type of the PixieWire module: a wire structure that does not parse, or a signed one that
/// does not verify.
///
/// Shaped like ``SiblingsCrypto/CryptoError``: a `code` that can grow, a `reason` that says what was wrong
/// and what to do, and where it was thrown.
public struct PixieWireError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }

        /// The bytes or text are not the structure they claim to be (wrong length, version, encoding).
        public static let malformed = Code("malformed")
        /// A signature does not verify (either half of a hybrid signature counts).
        public static let badSignature = Code("bad_signature")
        /// Signed by a key the verifier has not pinned.
        public static let unknownSigner = Code("unknown_signer")
        /// Past its expiry time.
        public static let expired = Code("expired")
        /// Issued in the future (beyond the allowed clock skew).
        public static let notYetValid = Code("not_yet_valid")
        /// The verifier has no pinned key, so it cannot check anything and refuses (fail closed).
        public static let noPinnedKey = Code("no_pinned_key")

        public var description: String { rawValue }
    }

    public let code: Code
    public let reason: String
    public let file: String
    public let line: UInt

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String { "PixieWireError.\(code): \(reason) (\(file):\(line))" }

    public static func == (lhs: PixieWireError, rhs: PixieWireError) -> Bool {
        lhs.code == rhs.code && lhs.reason == rhs.reason
    }
}
