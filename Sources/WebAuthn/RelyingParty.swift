import Foundation
import SiblingsCrypto

/// A WebAuthn Level 3 relying party for passkeys: verifies registrations (§7.1) and assertions (§7.2).
///
/// Choices where the specification leaves room (docs/webauthn.md says why):
/// - Attestation: only fmt "none" with an empty attStmt (§8.7). Passkey providers send "none" when the
///   relying party asks for no attestation, which we always do; any other format is refused with
///   ``WebAuthnError/Code/unsupportedAttestationFormat`` rather than accepted unverified.
/// - Algorithms: ES256 only (pubKeyCredParams must be `[{type: "public-key", alg: -7}]`).
/// - User presence is always required; user verification when ``requiresUserVerification`` is set.
/// - Origins: clientData.origin must be exactly one of ``allowedOrigins``; cross-origin iframes
///   (crossOrigin true, or a topOrigin) are refused.
/// - Counter: when the stored or the new signCount is non-zero the new one must be larger, otherwise the
///   assertion fails with ``WebAuthnError/Code/possibleClonedAuthenticator`` (fail closed).
///
/// What the caller keeps: the challenge (single use, with an expiry) between the two halves of a
/// ceremony; the credential ID → ``RegisteredCredential`` map, refusing a registration whose credential
/// ID is already registered (§7.1 step 26); the new signCount after each assertion.
public struct WebAuthnRelyingParty: Sendable {
    /// The RP ID (§5.1.2's `rp.id`), a registrable domain such as "example.com".
    public let rpID: String
    /// Exact origins (scheme, host, port) the ceremonies may come from, such as "https://example.com".
    public let allowedOrigins: Set<String>
    /// Whether the UV flag is required (set `userVerification: "required"` in the options too).
    public let requiresUserVerification: Bool
    private let random: any SecureRandomSource

    public init(rpID: String, allowedOrigins: Set<String>, requiresUserVerification: Bool) {
        self.init(
            rpID: rpID, allowedOrigins: allowedOrigins, requiresUserVerification: requiresUserVerification,
            random: SystemRandom())
    }

    /// A relying party whose challenges come from `random` (`@_spi(Testing)`).
    @_spi(Testing)
    public init(
        rpID: String, allowedOrigins: Set<String>, requiresUserVerification: Bool, random: some SecureRandomSource
    ) {
        precondition(!allowedOrigins.isEmpty, "a relying party needs at least one allowed origin")
        self.rpID = rpID
        self.allowedOrigins = allowedOrigins
        self.requiresUserVerification = requiresUserVerification
        self.random = random
    }

    /// A fresh 32-byte challenge for `navigator.credentials.create()` (§13.4.3 asks for at least 16 random
    /// bytes). Store it with a short expiry and use it once.
    public func makeRegistrationChallenge() -> Data { random.bytes(count: 32) }

    /// A fresh 32-byte challenge for `navigator.credentials.get()`. Store it with a short expiry, use it once.
    public func makeAuthenticationChallenge() -> Data { random.bytes(count: 32) }

    // MARK: Registration (§7.1)

    /// Verifies a registration ceremony (WebAuthn L3 §7.1 steps 5–25) and returns the credential to store.
    ///
    /// - Parameters:
    ///   - attestationObject: `response.attestationObject`, the CBOR map {fmt, attStmt, authData} (§6.5).
    ///   - clientDataJSON: `response.clientDataJSON`, the exact bytes the client sent.
    ///   - expectedChallenge: the challenge this server issued for this ceremony.
    public func verifyRegistration(
        attestationObject: some DataProtocol, clientDataJSON: some DataProtocol, expectedChallenge: some DataProtocol
    ) throws -> RegisteredCredential {
        // Steps 5–10: the client data.
        try verifyClientData(clientDataJSON, type: "webauthn.create", expectedChallenge: expectedChallenge)

        // Step 12: decode the attestation object.
        let object: CBOR
        do {
            object = try CBORDecoder().decode(attestationObject)
        } catch let error as WebAuthnError {
            throw WebAuthnError(.invalidAttestationObject, "the attestationObject is not valid CBOR: \(error.reason)")
        }
        guard let map = object.mapValue, let format = map[.text("fmt")]?.textValue,
            let statement = map[.text("attStmt")]?.mapValue, let authDataBytes = map[.text("authData")]?.bytesValue
        else {
            throw WebAuthnError(
                .invalidAttestationObject,
                "the attestationObject must be a map with text fmt, map attStmt and byte-string authData (§6.5)")
        }
        let authenticatorData = try AuthenticatorData(rawRepresentation: authDataBytes)

        // Steps 13–16.
        try verifyCommon(authenticatorData)

        // Step 19 (and §6.5.1): the credential and its algorithm.
        guard let attested = authenticatorData.attestedCredentialData else {
            throw WebAuthnError(
                .attestedCredentialDataMissing,
                "a registration's authenticatorData must carry attested credential data (AT)")
        }
        let key = try COSEKey(cborRepresentation: attested.credentialPublicKey)

        // Steps 21–22: attestation "none" only.
        guard format == "none" else {
            throw WebAuthnError(
                .unsupportedAttestationFormat,
                "attestation format \"\(format)\" is not accepted; this relying party accepts only \"none\" "
                    + "(request attestation: \"none\")")
        }
        guard statement.isEmpty else {
            throw WebAuthnError(.invalidAttestationStatement, "fmt \"none\" requires an empty attStmt (§8.7)")
        }

        // Step 25 is checked by the authenticatorData parser (1...1023 bytes).
        return RegisteredCredential(
            credentialID: attested.credentialID, publicKey: key, signCount: authenticatorData.signCount,
            aaguid: attested.aaguid, backupEligible: authenticatorData.flags.contains(.backupEligible),
            backupState: authenticatorData.flags.contains(.backupState),
            userVerified: authenticatorData.flags.contains(.userVerified))
    }

    /// Verifies a registration posted as `RegistrationResponseJSON`; also checks `type`, that `id` equals
    /// `rawId`, and that `rawId` names the credential inside the attestation object.
    public func verifyRegistration(
        _ response: RegistrationResponseJSON, expectedChallenge: some DataProtocol
    ) throws -> RegisteredCredential {
        let fields = try response.decoded()
        let credential = try verifyRegistration(
            attestationObject: fields.attestationObject, clientDataJSON: fields.clientDataJSON,
            expectedChallenge: expectedChallenge)
        guard credential.credentialID == fields.credentialID else {
            throw WebAuthnError(.credentialMismatch, "rawId is not the credential ID in the attestation object")
        }
        return credential
    }

    // MARK: Authentication (§7.2)

    /// Verifies an authentication ceremony (WebAuthn L3 §7.2 steps 7–23) against a stored credential and
    /// returns the new counter to store.
    ///
    /// - Parameters:
    ///   - signature: the DER-encoded ECDSA signature over `authenticatorData ‖ SHA-256(clientDataJSON)`.
    ///   - credential: the stored credential the response's credential ID names (the caller looks it up, and
    ///     checks the user handle if it sent an empty allowCredentials list).
    ///   - storedSignCount: the counter stored after the last ceremony with this credential.
    public func verifyAssertion(
        authenticatorData: some DataProtocol, clientDataJSON: some DataProtocol, signature: some DataProtocol,
        expectedChallenge: some DataProtocol, credential: RegisteredCredential, storedSignCount: UInt32
    ) throws -> VerifiedAssertion {
        // Steps 10–14: the client data.
        let clientData = Data(clientDataJSON)
        try verifyClientData(clientData, type: "webauthn.get", expectedChallenge: expectedChallenge)

        // Steps 15–18.
        let parsed = try AuthenticatorData(rawRepresentation: authenticatorData)
        try verifyCommon(parsed)

        // Steps 20–21: the signature over authenticatorData ‖ SHA-256(clientDataJSON).
        let ecdsa: P256.Signing.ECDSASignature
        do {
            ecdsa = try P256.Signing.ECDSASignature(derRepresentation: signature)
        } catch {
            throw WebAuthnError(.invalidSignature, "the signature is not a DER ECDSA signature")
        }
        let signed = parsed.rawRepresentation + SHA256.hash(data: clientData).rawRepresentation
        guard credential.publicKey.publicKey.isValidSignature(ecdsa, for: signed) else {
            throw WebAuthnError(.invalidSignature, "the assertion signature does not verify with the credential's key")
        }

        // Step 22: the signature counter.
        if parsed.signCount != 0 || storedSignCount != 0 {
            guard parsed.signCount > storedSignCount else {
                throw WebAuthnError(
                    .possibleClonedAuthenticator,
                    "signCount \(parsed.signCount) is not greater than the stored \(storedSignCount): "
                        + "the authenticator may have been cloned")
            }
        }
        return VerifiedAssertion(
            credentialID: credential.credentialID, newSignCount: parsed.signCount,
            userVerified: parsed.flags.contains(.userVerified),
            backupState: parsed.flags.contains(.backupState))
    }

    /// Verifies an assertion posted as `AuthenticationResponseJSON`; also checks `type`, that `id` equals
    /// `rawId` and names `credential`, and, when the response carries a user handle and `expectedUserHandle`
    /// is given, that they match (§7.2 step 6).
    public func verifyAssertion(
        _ response: AuthenticationResponseJSON, expectedChallenge: some DataProtocol,
        credential: RegisteredCredential, storedSignCount: UInt32, expectedUserHandle: Data? = nil
    ) throws -> VerifiedAssertion {
        let fields = try response.decoded()
        guard safeCompare(fields.credentialID, credential.credentialID) else {
            throw WebAuthnError(.credentialMismatch, "the response names a credential other than the stored one")
        }
        if let expected = expectedUserHandle, let handle = fields.userHandle, !safeCompare(handle, expected) {
            throw WebAuthnError(.credentialMismatch, "the response's userHandle is not the credential's user")
        }
        return try verifyAssertion(
            authenticatorData: fields.authenticatorData, clientDataJSON: fields.clientDataJSON,
            signature: fields.signature, expectedChallenge: expectedChallenge, credential: credential,
            storedSignCount: storedSignCount)
    }

    // MARK: Shared steps

    /// §7.1 steps 5–10 / §7.2 steps 10–14 (§5.8.1's CollectedClientData).
    private func verifyClientData(
        _ clientDataJSON: some DataProtocol, type: String, expectedChallenge: some DataProtocol
    ) throws {
        let clientData: CollectedClientData
        do {
            clientData = try JSONDecoder().decode(CollectedClientData.self, from: Data(clientDataJSON))
        } catch {
            throw WebAuthnError(
                .invalidClientData, "clientDataJSON is not a JSON object with string type, challenge and origin")
        }
        guard clientData.type == type else {
            throw WebAuthnError(.typeMismatch, "clientData.type is \"\(clientData.type)\", expected \"\(type)\"")
        }
        guard let challenge = Data(base64URLEncoded: clientData.challenge) else {
            throw WebAuthnError(.challengeMismatch, "clientData.challenge is not unpadded base64url")
        }
        guard safeCompare(challenge, Data(expectedChallenge)) else {
            throw WebAuthnError(.challengeMismatch, "clientData.challenge is not the challenge this server issued")
        }
        guard allowedOrigins.contains(clientData.origin) else {
            throw WebAuthnError(
                .originNotAllowed, "origin \"\(clientData.origin)\" is not one of this relying party's allowed origins")
        }
        guard clientData.crossOrigin != true, clientData.topOrigin == nil else {
            throw WebAuthnError(
                .crossOriginNotAllowed, "the ceremony ran in a cross-origin iframe, which this relying party refuses")
        }
    }

    /// §7.1 steps 13–16 / §7.2 steps 15–18: rpIdHash, UP, UV (BE/BS consistency is checked by the parser).
    private func verifyCommon(_ authenticatorData: AuthenticatorData) throws {
        let expected = SHA256.hash(data: Data(rpID.utf8)).rawRepresentation
        guard safeCompare(authenticatorData.rpIDHash, expected) else {
            throw WebAuthnError(.rpIDMismatch, "authenticatorData's rpIdHash is not SHA-256(\"\(rpID)\")")
        }
        guard authenticatorData.flags.contains(.userPresent) else {
            throw WebAuthnError(.userNotPresent, "the authenticator did not assert user presence (UP)")
        }
        if requiresUserVerification, !authenticatorData.flags.contains(.userVerified) {
            throw WebAuthnError(
                .userNotVerified,
                "this relying party requires user verification (UV) and the authenticator did not do it")
        }
    }
}

/// CollectedClientData (WebAuthn L3 §5.8.1), the fields a relying party checks.
struct CollectedClientData: Decodable {
    var type: String
    var challenge: String
    var origin: String
    var crossOrigin: Bool?
    var topOrigin: String?
}

/// A credential accepted by ``WebAuthnRelyingParty/verifyRegistration(attestationObject:clientDataJSON:expectedChallenge:)``:
/// what the server stores, keyed by ``credentialID``, next to the user it was registered for.
public struct RegisteredCredential: Sendable, Equatable {
    /// The credential ID (1 to 1023 bytes). Refuse a registration whose ID is already stored (§7.1 step 26).
    public let credentialID: Data
    /// The ES256 public key; store ``COSEKey/cborRepresentation`` and rebuild with ``COSEKey/init(cborRepresentation:)``.
    public let publicKey: COSEKey
    /// The initial signature counter.
    public let signCount: UInt32
    /// The authenticator model's AAGUID (16 bytes; zero when hidden, as with attestation "none").
    public let aaguid: Data
    /// BE: the credential may be synced (a multi-device passkey). It never changes for a credential.
    public let backupEligible: Bool
    /// BS: the credential is backed up now.
    public let backupState: Bool
    /// UV at registration.
    public let userVerified: Bool

    public init(
        credentialID: Data, publicKey: COSEKey, signCount: UInt32, aaguid: Data = Data(count: 16),
        backupEligible: Bool = false, backupState: Bool = false, userVerified: Bool = false
    ) {
        self.credentialID = credentialID
        self.publicKey = publicKey
        self.signCount = signCount
        self.aaguid = aaguid
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.userVerified = userVerified
    }
}

/// The result of a verified assertion.
public struct VerifiedAssertion: Sendable, Equatable {
    public let credentialID: Data
    /// The counter to store for the next assertion.
    public let newSignCount: UInt32
    public let userVerified: Bool
    /// BS now (it may change over a credential's life; §6.1.3).
    public let backupState: Bool
}
