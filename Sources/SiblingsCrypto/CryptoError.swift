/// The one error type of the crypto core.
///
/// Shaped like swift-certificates' `CertificateError`: a `code` that can grow without breaking
/// callers, a `reason` written for a person (what was wrong and, where it helps, what to do), and
/// where it was thrown.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with the static members: `error.code == .authenticationFailure`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Backing: String, Hashable, Sendable {
            case incorrectKeySize
            case incorrectParameterSize
            case invalidEncoding
            case invalidParameter
            case authenticationFailure
            case invalidSharedSecret
            case publicKeyMismatch
            case underlyingLibrary
            case io
        }

        let backing: Backing

        /// A key of the wrong length for the algorithm.
        public static let incorrectKeySize = Code(backing: .incorrectKeySize)
        /// A nonce, tag, salt or other fixed-size input of the wrong length.
        public static let incorrectParameterSize = Code(backing: .incorrectParameterSize)
        /// Bytes that are not a valid (canonical) encoding of the value they claim to be.
        public static let invalidEncoding = Code(backing: .invalidEncoding)
        /// A parameter outside its allowed range (a work factor, an output length, ...).
        public static let invalidParameter = Code(backing: .invalidParameter)
        /// A tag, MAC or signature did not verify: the data was altered or the key is wrong.
        public static let authenticationFailure = Code(backing: .authenticationFailure)
        /// A key agreement produced an all-zero (contributory-failure) shared secret.
        public static let invalidSharedSecret = Code(backing: .invalidSharedSecret)
        /// A private key's seed does not give the public key it was stored or passed with (CryptoKit's
        /// `KEM.Errors.publicKeyMismatchDuringInitialization`): the stored key is corrupt or not this one.
        public static let publicKeyMismatch = Code(backing: .publicKeyMismatch)
        /// OpenSSL reported a failure that no input check predicted; the reason carries its error queue.
        public static let underlyingLibrary = Code(backing: .underlyingLibrary)
        /// Reading or writing a file failed.
        public static let io = Code(backing: .io)

        public var description: String { backing.rawValue }
    }

    public let code: Code
    public let reason: String
    public let file: String
    public let line: UInt

    init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String { "CryptoError.\(code): \(reason) (\(file):\(line))" }

    static func incorrectKeySize(
        _ what: String, expected: Int, got: Int, file: String = #fileID, line: UInt = #line
    ) -> CryptoError {
        CryptoError(
            .incorrectKeySize, "\(what) must be \(expected) bytes, got \(got)", file: file, line: line)
    }

    static func publicKeyMismatch(_ what: String, file: String = #fileID, line: UInt = #line) -> CryptoError {
        CryptoError(
            .publicKeyMismatch,
            "the \(what) seed does not give the public key it came with: the stored key is corrupt or another key's; "
                + "restore it from a good copy", file: file, line: line)
    }

    static func incorrectParameterSize(
        _ what: String, expected: String, got: Int, file: String = #fileID, line: UInt = #line
    ) -> CryptoError {
        CryptoError(
            .incorrectParameterSize, "\(what) must be \(expected) bytes, got \(got)", file: file, line: line)
    }
}
