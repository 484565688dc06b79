import Foundation

/// `PublicKeyCredentialCreationOptionsJSON` (WebAuthn L3 §5.1.11): what the server sends to start a
/// registration, for `PublicKeyCredential.parseCreationOptionsFromJSON()`. Binary fields are unpadded
/// base64url. Build it with ``WebAuthnRelyingParty/registrationOptions(challenge:userID:userName:userDisplayName:rpName:excludeCredentials:timeoutMilliseconds:)``
/// so it asks for exactly what the relying party accepts.
public struct PublicKeyCredentialCreationOptionsJSON: Codable, Sendable, Equatable {
    /// `PublicKeyCredentialRpEntity` (§5.4.2).
    public struct RelyingParty: Codable, Sendable, Equatable {
        public var id: String
        public var name: String
    }

    /// `PublicKeyCredentialUserEntityJSON` (§5.4.3); `id` is the user handle, base64url.
    public struct User: Codable, Sendable, Equatable {
        public var id: String
        public var name: String
        public var displayName: String
    }

    /// `PublicKeyCredentialParameters` (§5.3).
    public struct Parameters: Codable, Sendable, Equatable {
        public var type: String
        public var alg: Int
    }

    /// `AuthenticatorSelectionCriteria` (§5.4.4).
    public struct AuthenticatorSelection: Codable, Sendable, Equatable {
        public var residentKey: String
        public var requireResidentKey: Bool
        public var userVerification: String
    }

    public var rp: RelyingParty
    public var user: User
    public var challenge: String
    public var pubKeyCredParams: [Parameters]
    public var timeout: Int?
    public var excludeCredentials: [PublicKeyCredentialDescriptorJSON]
    public var authenticatorSelection: AuthenticatorSelection
    public var attestation: String
}

/// `PublicKeyCredentialRequestOptionsJSON` (WebAuthn L3 §5.1.12): what the server sends to start an
/// authentication, for `PublicKeyCredential.parseRequestOptionsFromJSON()`.
public struct PublicKeyCredentialRequestOptionsJSON: Codable, Sendable, Equatable {
    public var challenge: String
    public var timeout: Int?
    public var rpId: String
    public var allowCredentials: [PublicKeyCredentialDescriptorJSON]
    public var userVerification: String
}

/// `PublicKeyCredentialDescriptorJSON` (§5.8.3): a credential ID, base64url.
public struct PublicKeyCredentialDescriptorJSON: Codable, Sendable, Equatable {
    public var type: String
    public var id: String

    public init(id: Data) {
        type = "public-key"
        self.id = Data(id).base64URLEncodedString()
    }
}

extension WebAuthnRelyingParty {
    /// The creation options for a passkey registration: this RP ID, ES256 only, attestation "none", a
    /// discoverable credential (residentKey "required"), and userVerification "required" when the relying
    /// party requires UV ("preferred" otherwise).
    ///
    /// - Parameters:
    ///   - challenge: from ``makeRegistrationChallenge()``, stored by the caller.
    ///   - userID: the user handle (§5.4.3: up to 64 random bytes, no personal information).
    ///   - excludeCredentials: the user's registered credential IDs, so an authenticator does not enroll twice.
    public func registrationOptions(
        challenge: Data, userID: Data, userName: String, userDisplayName: String, rpName: String? = nil,
        excludeCredentials: [Data] = [], timeoutMilliseconds: Int? = 300_000
    ) -> PublicKeyCredentialCreationOptionsJSON {
        precondition((1...64).contains(userID.count), "a user handle is 1 to 64 bytes (§5.4.3)")
        return PublicKeyCredentialCreationOptionsJSON(
            rp: .init(id: rpID, name: rpName ?? rpID),
            user: .init(id: Data(userID).base64URLEncodedString(), name: userName, displayName: userDisplayName),
            challenge: Data(challenge).base64URLEncodedString(),
            pubKeyCredParams: [.init(type: "public-key", alg: COSEKey.es256Algorithm)],
            timeout: timeoutMilliseconds,
            excludeCredentials: excludeCredentials.map(PublicKeyCredentialDescriptorJSON.init(id:)),
            authenticatorSelection: .init(
                residentKey: "required", requireResidentKey: true,
                userVerification: requiresUserVerification ? "required" : "preferred"),
            attestation: "none")
    }

    /// The request options for an authentication: this RP ID, the given credentials (empty for a
    /// discoverable-credential sign-in, where the caller then checks the returned user handle), and the
    /// relying party's user-verification policy.
    public func authenticationOptions(
        challenge: Data, allowCredentials: [Data] = [], timeoutMilliseconds: Int? = 300_000
    ) -> PublicKeyCredentialRequestOptionsJSON {
        PublicKeyCredentialRequestOptionsJSON(
            challenge: Data(challenge).base64URLEncodedString(), timeout: timeoutMilliseconds, rpId: rpID,
            allowCredentials: allowCredentials.map(PublicKeyCredentialDescriptorJSON.init(id:)),
            userVerification: requiresUserVerification ? "required" : "preferred")
    }
}
