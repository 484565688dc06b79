/// The one error type of the Age module.
///
/// Shaped like ``SiblingsCrypto/CryptoError``: a `code` that can grow without breaking callers, a `reason`
/// that says what was wrong and what to do, and where it was thrown. The codes line up with the kinds of
/// failure the C2SP CCTV age vectors tell apart (docs/age.md has the table).
public struct AgeError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with the static members: `error.code == .noMatchingIdentity`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Backing: String, Hashable, Sendable {
            case noMatchingIdentity
            case headerMACFailure
            case malformedHeader
            case unsupportedVersion
            case payloadFailure
            case armorFailure
            case invalidRecipient
            case invalidIdentity
            case incompatibleRecipients
            case workFactorTooLarge
            case plugin
            case io
        }

        let backing: Backing

        /// The header parsed, but no identity could unwrap any of its stanzas (CCTV "no match").
        public static let noMatchingIdentity = Code(backing: .noMatchingIdentity)
        /// A file key was unwrapped but the header MAC does not match: the header was altered (CCTV "HMAC failure").
        public static let headerMACFailure = Code(backing: .headerMACFailure)
        /// The header (or the payload nonce after it) is not in the spec's exact grammar, or a stanza for
        /// one of the identities is malformed (CCTV "header failure").
        public static let malformedHeader = Code(backing: .malformedHeader)
        /// The file starts with an age version line other than `age-encryption.org/v1` (CCTV "header failure").
        public static let unsupportedVersion = Code(backing: .unsupportedVersion)
        /// The STREAM payload is altered, truncated, or has data after its last chunk (CCTV "payload failure").
        public static let payloadFailure = Code(backing: .payloadFailure)
        /// The ASCII armor is not the strict PEM the spec defines (CCTV "armor failure").
        public static let armorFailure = Code(backing: .armorFailure)
        /// A recipient string or key that is not a valid age recipient.
        public static let invalidRecipient = Code(backing: .invalidRecipient)
        /// An identity string, key, or key file that is not a valid age identity.
        public static let invalidIdentity = Code(backing: .invalidIdentity)
        /// Recipients that must not share a file (a passphrase with anything else, hybrid with X25519), or none.
        public static let incompatibleRecipients = Code(backing: .incompatibleRecipients)
        /// A scrypt stanza asks for a work factor above the identity's `maxWorkFactor` (CCTV "header failure").
        public static let workFactorTooLarge = Code(backing: .workFactorTooLarge)
        /// An age plugin is not installed, could not be run, reported an error, or broke the plugin protocol
        /// (C2SP age-plugin.md); the reason carries what it said.
        public static let plugin = Code(backing: .plugin)
        /// Reading or writing a file handle failed.
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

    public var description: String { "AgeError.\(code): \(reason) (\(file):\(line))" }

    static func header(_ reason: String, file: String = #fileID, line: UInt = #line) -> AgeError {
        AgeError(
            .malformedHeader, "the age header is malformed: \(reason); the file is damaged or not an age v1 file",
            file: file, line: line)
    }
}
