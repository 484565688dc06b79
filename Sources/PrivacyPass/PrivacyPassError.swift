/// The one error type of the PrivacyPass module.
///
/// Shaped like ``SiblingsCrypto/CryptoError`` (swift-certificates' `CertificateError`): a `code` that can grow,
/// a `reason` that says what was wrong and what to do, and where it was thrown.
public struct PrivacyPassError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with the static members: `error.code == .proofVerificationFailed`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Backing: String, Hashable, Sendable {
            case invalidElement
            case invalidScalar
            case invalidInput
            case proofVerificationFailed
            case batchSizeMismatch
            case malformedMessage
            case unknownKey
            case keyNotInList
            case underlyingLibrary
        }

        let backing: Backing

        /// Bytes that are not the canonical encoding of a ristretto255 element, or that encode the identity.
        public static let invalidElement = Code(backing: .invalidElement)
        /// Bytes that are not a canonical scalar (32 bytes, little-endian, below the group order), or a zero
        /// scalar where one is not allowed.
        public static let invalidScalar = Code(backing: .invalidScalar)
        /// An input, info string or parameter the protocol refuses (too long, hashes to the identity, wrong mode).
        public static let invalidInput = Code(backing: .invalidInput)
        /// The issuer's DLEQ proof does not verify: the evaluation was not made with the expected key.
        public static let proofVerificationFailed = Code(backing: .proofVerificationFailed)
        /// Two lists that must have the same length do not (inputs and blinds, requests and responses).
        public static let batchSizeMismatch = Code(backing: .batchSizeMismatch)
        /// Wire bytes (a token, request, response or key list) that do not parse.
        public static let malformedMessage = Code(backing: .malformedMessage)
        /// A token or request names a token_key_id this issuer does not hold.
        public static let unknownKey = Code(backing: .unknownKey)
        /// The issuer's public key is not in the logged OPRF key list (or has expired there).
        public static let keyNotInList = Code(backing: .keyNotInList)
        /// libsodium failed where no input check predicted it (sodium_init).
        public static let underlyingLibrary = Code(backing: .underlyingLibrary)

        public var description: String { backing.rawValue }
    }

    public let code: Code
    public let reason: String
    public let file: String
    public let line: UInt

    /// Public so that a ``KeyListVerifier`` written in another module can refuse with ``Code/keyNotInList``.
    public init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String { "PrivacyPassError.\(code): \(reason) (\(file):\(line))" }
}
