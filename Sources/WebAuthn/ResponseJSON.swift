import Foundation

/// `RegistrationResponseJSON` (WebAuthn L3 §5.1.8, what `PublicKeyCredential.toJSON()` returns after
/// `navigator.credentials.create()`): the body a client posts to finish a registration. Binary fields are
/// unpadded base64url.
public struct RegistrationResponseJSON: Codable, Sendable, Equatable {
    /// The credential ID, base64url (equal to ``rawId``).
    public var id: String
    public var rawId: String
    public var response: AuthenticatorAttestationResponseJSON
    public var authenticatorAttachment: String?
    public var clientExtensionResults: ClientExtensionResultsJSON
    /// Always "public-key".
    public var type: String

    public init(
        id: String, rawId: String, response: AuthenticatorAttestationResponseJSON,
        authenticatorAttachment: String? = nil, clientExtensionResults: ClientExtensionResultsJSON = .init(),
        type: String = "public-key"
    ) {
        self.id = id
        self.rawId = rawId
        self.response = response
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
        self.type = type
    }
}

/// `AuthenticatorAttestationResponseJSON` (WebAuthn L3 §5.2.1). Only `clientDataJSON` and
/// `attestationObject` are verified; the convenience fields (`authenticatorData`, `publicKey`, ...) are
/// carried for clients that send them and never trusted.
public struct AuthenticatorAttestationResponseJSON: Codable, Sendable, Equatable {
    public var clientDataJSON: String
    public var attestationObject: String
    public var authenticatorData: String?
    public var transports: [String]?
    public var publicKey: String?
    public var publicKeyAlgorithm: Int?

    public init(
        clientDataJSON: String, attestationObject: String, authenticatorData: String? = nil,
        transports: [String]? = nil, publicKey: String? = nil, publicKeyAlgorithm: Int? = nil
    ) {
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.authenticatorData = authenticatorData
        self.transports = transports
        self.publicKey = publicKey
        self.publicKeyAlgorithm = publicKeyAlgorithm
    }
}

/// `AuthenticationResponseJSON` (WebAuthn L3 §5.1.9): the body a client posts to finish an assertion.
public struct AuthenticationResponseJSON: Codable, Sendable, Equatable {
    /// The credential ID, base64url (equal to ``rawId``).
    public var id: String
    public var rawId: String
    public var response: AuthenticatorAssertionResponseJSON
    public var authenticatorAttachment: String?
    public var clientExtensionResults: ClientExtensionResultsJSON
    /// Always "public-key".
    public var type: String

    public init(
        id: String, rawId: String, response: AuthenticatorAssertionResponseJSON,
        authenticatorAttachment: String? = nil, clientExtensionResults: ClientExtensionResultsJSON = .init(),
        type: String = "public-key"
    ) {
        self.id = id
        self.rawId = rawId
        self.response = response
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
        self.type = type
    }
}

/// `AuthenticatorAssertionResponseJSON` (WebAuthn L3 §5.2.2).
public struct AuthenticatorAssertionResponseJSON: Codable, Sendable, Equatable {
    public var clientDataJSON: String
    public var authenticatorData: String
    /// The DER ECDSA signature, base64url.
    public var signature: String
    /// The user handle the credential was created with, base64url (present for discoverable credentials).
    public var userHandle: String?

    public init(clientDataJSON: String, authenticatorData: String, signature: String, userHandle: String? = nil) {
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
    }
}

/// `AuthenticationExtensionsClientOutputsJSON`: we request no extensions, so this encodes as `{}` and
/// ignores whatever a client puts there.
public struct ClientExtensionResultsJSON: Codable, Sendable, Equatable {
    public init() {}
}

extension RegistrationResponseJSON {
    /// The decoded `rawId`, `clientDataJSON` and `attestationObject`, after checking `type` and `id == rawId`.
    func decoded() throws -> (credentialID: Data, clientDataJSON: Data, attestationObject: Data) {
        guard type == "public-key" else {
            throw WebAuthnError(.invalidResponseJSON, "the credential type is \"\(type)\", not \"public-key\"")
        }
        guard id == rawId else { throw WebAuthnError(.invalidResponseJSON, "the credential's id and rawId differ") }
        return (
            try field(rawId, "rawId"), try field(response.clientDataJSON, "response.clientDataJSON"),
            try field(response.attestationObject, "response.attestationObject")
        )
    }
}

extension AuthenticationResponseJSON {
    /// The decoded binary fields, after checking `type` and `id == rawId`.
    func decoded() throws -> (
        credentialID: Data, clientDataJSON: Data, authenticatorData: Data, signature: Data, userHandle: Data?
    ) {
        guard type == "public-key" else {
            throw WebAuthnError(.invalidResponseJSON, "the credential type is \"\(type)\", not \"public-key\"")
        }
        guard id == rawId else { throw WebAuthnError(.invalidResponseJSON, "the credential's id and rawId differ") }
        return (
            try field(rawId, "rawId"), try field(response.clientDataJSON, "response.clientDataJSON"),
            try field(response.authenticatorData, "response.authenticatorData"),
            try field(response.signature, "response.signature"),
            try response.userHandle.map { try field($0, "response.userHandle") }
        )
    }
}

private func field(_ text: String, _ name: String) throws -> Data {
    guard let data = Data(base64URLEncoded: text) else {
        throw WebAuthnError(.invalidResponseJSON, "\(name) is not unpadded base64url")
    }
    return data
}
