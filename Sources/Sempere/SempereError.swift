/// The one error type of the Sempere module.
///
/// Shaped like ``SiblingsCrypto/CryptoError`` and ``Age/AgeError``: a `code` that can grow without
/// breaking callers, a `reason` that says what was wrong and what to do, and where it was thrown.
public struct SempereError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with the static members: `error.code == .wrongPassphrase`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Backing: String, Hashable, Sendable {
            case invalidName
            case insecureKeyStore
            case wrongPassphrase
            case passphraseRequired
            case invalidSecret
            case alreadyExists
            case unknownWord
            case ambiguousWord
            case wrongWordCount
            case invalidEncoding
            case qrEncoding
            case io
        }

        let backing: Backing

        /// A secret's name that a key store does not accept (it must be 1–64 of `a-z 0-9 . _ -`).
        public static let invalidName = Code(backing: .invalidName)
        /// The key store's directory or a file in it is accessible to other users, owned by someone else,
        /// or not a plain directory or file: nothing is read or written until that is fixed.
        public static let insecureKeyStore = Code(backing: .insecureKeyStore)
        /// A passphrase-protected secret did not open with the passphrase given.
        public static let wrongPassphrase = Code(backing: .wrongPassphrase)
        /// A secret is passphrase-protected but the key store was opened without a passphrase.
        public static let passphraseRequired = Code(backing: .passphraseRequired)
        /// A stored secret is not what its name says (wrong length, not a key of the expected kind).
        public static let invalidSecret = Code(backing: .invalidSecret)
        /// Something meant to be created once (a device's keys) already exists.
        public static let alreadyExists = Code(backing: .alreadyExists)
        /// A typed join word is not in the word list, nor the start of a word in it.
        public static let unknownWord = Code(backing: .unknownWord)
        /// A typed join word is the start of more than one word of the list.
        public static let ambiguousWord = Code(backing: .ambiguousWord)
        /// Not exactly six join words.
        public static let wrongWordCount = Code(backing: .wrongWordCount)
        /// Bytes that are not a valid encoding of the value they claim to be.
        public static let invalidEncoding = Code(backing: .invalidEncoding)
        /// libqrencode could not make a QR code of the payload.
        public static let qrEncoding = Code(backing: .qrEncoding)
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

    public var description: String { "SempereError.\(code): \(reason) (\(file):\(line))" }
}
