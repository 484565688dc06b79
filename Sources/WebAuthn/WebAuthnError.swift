/// The one error type of the WebAuthn module.
///
/// Shaped like swift-certificates' `CertificateError` (and ``SiblingsCrypto/CryptoError``): a `code` that can
/// grow without breaking callers, a `reason` written for a person, and where it was thrown. Every check of
/// WebAuthn Level 3 §7.1 and §7.2 that fails has its own code, so a server can log which step refused a
/// ceremony and a test can assert exactly that step.
public struct WebAuthnError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with the static members: `error.code == .challengeMismatch`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Backing: String, Hashable, Sendable {
            case invalidCBOR
            case invalidCOSEKey
            case unsupportedAlgorithm
            case invalidAuthenticatorData
            case invalidBackupFlags
            case invalidClientData
            case typeMismatch
            case challengeMismatch
            case originNotAllowed
            case crossOriginNotAllowed
            case rpIDMismatch
            case userNotPresent
            case userNotVerified
            case attestedCredentialDataMissing
            case invalidAttestationObject
            case unsupportedAttestationFormat
            case invalidAttestationStatement
            case invalidCredentialID
            case credentialMismatch
            case invalidSignature
            case possibleClonedAuthenticator
            case unknownCredential
            case invalidResponseJSON
            case invalidState
        }

        let backing: Backing

        /// Bytes that are not the strict, definite-length CBOR (RFC 8949) this module accepts.
        public static let invalidCBOR = Code(backing: .invalidCBOR)
        /// A COSE_Key (RFC 9053 §7.1.1) that is malformed or is not a valid P-256 point.
        public static let invalidCOSEKey = Code(backing: .invalidCOSEKey)
        /// A COSE algorithm or key type other than ES256 (alg −7, kty EC2, crv P-256).
        public static let unsupportedAlgorithm = Code(backing: .unsupportedAlgorithm)
        /// authenticatorData (WebAuthn L3 §6.1) that is truncated, has trailing bytes, or a bad field.
        public static let invalidAuthenticatorData = Code(backing: .invalidAuthenticatorData)
        /// The BS (backup state) flag set without BE (backup eligible), which §6.1 forbids.
        public static let invalidBackupFlags = Code(backing: .invalidBackupFlags)
        /// clientDataJSON that is not the JSON object of §5.8.1.
        public static let invalidClientData = Code(backing: .invalidClientData)
        /// clientData.type is not "webauthn.create" (registration) or "webauthn.get" (assertion).
        public static let typeMismatch = Code(backing: .typeMismatch)
        /// clientData.challenge is not the challenge this server issued.
        public static let challengeMismatch = Code(backing: .challengeMismatch)
        /// clientData.origin is not one of the relying party's allowed origins.
        public static let originNotAllowed = Code(backing: .originNotAllowed)
        /// The ceremony ran in a cross-origin iframe (crossOrigin true or a topOrigin), which we refuse.
        public static let crossOriginNotAllowed = Code(backing: .crossOriginNotAllowed)
        /// authenticatorData's rpIdHash is not SHA-256 of the relying party's rpID.
        public static let rpIDMismatch = Code(backing: .rpIDMismatch)
        /// The UP (user present) flag is not set.
        public static let userNotPresent = Code(backing: .userNotPresent)
        /// The UV (user verified) flag is not set and the relying party requires it.
        public static let userNotVerified = Code(backing: .userNotVerified)
        /// A registration whose authenticatorData has no attested credential data (AT flag clear).
        public static let attestedCredentialDataMissing = Code(backing: .attestedCredentialDataMissing)
        /// An attestationObject that is not the CBOR map {fmt, attStmt, authData} of §6.5.
        public static let invalidAttestationObject = Code(backing: .invalidAttestationObject)
        /// An attestation statement format other than "none" (the only one this relying party accepts).
        public static let unsupportedAttestationFormat = Code(backing: .unsupportedAttestationFormat)
        /// fmt "none" with a non-empty attStmt (§8.7 requires the empty map).
        public static let invalidAttestationStatement = Code(backing: .invalidAttestationStatement)
        /// A credential ID that is empty or longer than 1023 bytes (§7.1 step 25).
        public static let invalidCredentialID = Code(backing: .invalidCredentialID)
        /// The response names a credential other than the one it carries or the one expected.
        public static let credentialMismatch = Code(backing: .credentialMismatch)
        /// The assertion signature does not verify with the credential's public key.
        public static let invalidSignature = Code(backing: .invalidSignature)
        /// The signature counter did not increase (§7.2 step 22): the authenticator may have been cloned.
        public static let possibleClonedAuthenticator = Code(backing: .possibleClonedAuthenticator)
        /// The software authenticator holds no credential for this rpID (and credential ID).
        public static let unknownCredential = Code(backing: .unknownCredential)
        /// A RegistrationResponseJSON / AuthenticationResponseJSON with a bad field (type, base64url, ...).
        public static let invalidResponseJSON = Code(backing: .invalidResponseJSON)
        /// Exported software-authenticator state that cannot be imported.
        public static let invalidState = Code(backing: .invalidState)

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

    public var description: String { "WebAuthnError.\(code): \(reason) (\(file):\(line))" }
}
