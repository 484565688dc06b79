import Foundation
import SiblingsCrypto
import Synchronization

/// A software ES256 passkey authenticator together with the client half of the ceremony: it creates
/// credentials (P-256 keys), signs assertions, and builds the clientDataJSON and the WebAuthn JSON
/// serialization a browser would, so a device without a platform authenticator, and the tests, can
/// register and sign in.
///
/// It produces attestation "none" (§8.7), an all-zero AAGUID unless given one, flags UP and (by default)
/// UV, and a per-credential signature counter that increases by one at every assertion. Credentials are
/// device-bound (BE and BS clear) unless `backupEligible` is set.
///
/// The state (private keys included) can be exported with ``exportState()`` and re-imported with
/// ``init(state:)``: keep the export where the device keeps its other secrets. Safe to share between tasks:
/// the credentials sit behind a `Mutex`.
public final class SoftwareAuthenticator: Sendable {
    struct Credential: Codable {
        var id: Data
        var rpID: String
        var userID: Data
        var privateKey: Data
        var signCount: UInt32
    }

    struct State: Codable {
        var version = 1
        var aaguid: Data
        var userVerifying: Bool
        var backupEligible: Bool
        var credentials: [Credential]
    }

    private let state: Mutex<State>
    private let random: any SecureRandomSource

    /// A new authenticator with no credentials.
    ///
    /// - Parameters:
    ///   - aaguid: the 16-byte model identifier written into attested credential data.
    ///   - userVerifying: whether it reports UV (as a device that unlocked with a PIN or biometrics would).
    ///   - backupEligible: whether its credentials report BE and BS (as a synced passkey would).
    public convenience init(aaguid: Data = Data(count: 16), userVerifying: Bool = true, backupEligible: Bool = false) {
        self.init(aaguid: aaguid, userVerifying: userVerifying, backupEligible: backupEligible, random: SystemRandom())
    }

    /// A new authenticator whose keys and credential IDs come from `random` (`@_spi(Testing)`).
    @_spi(Testing)
    public init(
        aaguid: Data = Data(count: 16), userVerifying: Bool = true, backupEligible: Bool = false,
        random: some SecureRandomSource
    ) {
        precondition(aaguid.count == 16, "an AAGUID is 16 bytes")
        state = Mutex(
            State(aaguid: aaguid, userVerifying: userVerifying, backupEligible: backupEligible, credentials: []))
        self.random = random
    }

    /// An authenticator restored from ``exportState()``.
    public convenience init(state exported: Data) throws {
        try self.init(state: exported, random: SystemRandom())
    }

    /// An authenticator restored from ``exportState()`` whose new keys come from `random` (`@_spi(Testing)`).
    @_spi(Testing)
    public init(state exported: Data, random: some SecureRandomSource) throws {
        let decoded: State
        do {
            decoded = try JSONDecoder().decode(State.self, from: exported)
        } catch {
            throw WebAuthnError(.invalidState, "the software authenticator state is not valid JSON of version 1")
        }
        guard decoded.version == 1, decoded.aaguid.count == 16 else {
            throw WebAuthnError(.invalidState, "the software authenticator state has an unknown version or bad AAGUID")
        }
        for credential in decoded.credentials {
            guard (1...1023).contains(credential.id.count),
                (try? P256.Signing.PrivateKey(rawRepresentation: credential.privateKey)) != nil
            else {
                throw WebAuthnError(.invalidState, "the software authenticator state holds an invalid credential")
            }
        }
        state = Mutex(decoded)
        self.random = random
    }

    /// The whole state as JSON, private keys included: store it as a secret.
    public func exportState() -> Data {
        state.withLock { state in
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            return try! encoder.encode(state)
        }
    }

    /// The IDs of the credentials held for `rpID`, oldest first.
    public func credentialIDs(rpID: String) -> [Data] {
        state.withLock { $0.credentials.filter { $0.rpID == rpID }.map(\.id) }
    }

    /// Creates a credential for `rpID` and returns the registration a browser would post (§5.1.8), with a
    /// clientDataJSON of type "webauthn.create" for `origin` and `challenge`.
    public func makeCredential(
        rpID: String, origin: String, challenge: some DataProtocol, userID: some DataProtocol
    ) -> RegistrationResponseJSON {
        let privateKey = Self.makeKey(random)
        let credentialID = random.bytes(count: 32)
        let clientDataJSON = Self.clientDataJSON(type: "webauthn.create", challenge: challenge, origin: origin)
        let cose = COSEKey(publicKey: privateKey.publicKey)
        let (aaguid, flags) = state.withLock { state in
            state.credentials.append(
                Credential(
                    id: credentialID, rpID: rpID, userID: Data(userID), privateKey: privateKey.rawRepresentation,
                    signCount: 0))
            return (state.aaguid, Self.flags(state))
        }
        let authenticatorData = AuthenticatorData(
            rpIDHash: SHA256.hash(data: Data(rpID.utf8)).rawRepresentation, flags: flags, signCount: 0,
            attestedCredentialData: AttestedCredentialData(
                aaguid: aaguid, credentialID: credentialID, credentialPublicKey: cose.cborRepresentation))
        let attestationObject = CBOR.map([
            .text("fmt"): .text("none"),
            .text("attStmt"): .map([:]),
            .text("authData"): .bytes(authenticatorData.rawRepresentation),
        ]).encoded()
        let id = Data(credentialID).base64URLEncodedString()
        return RegistrationResponseJSON(
            id: id, rawId: id,
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: Data(clientDataJSON).base64URLEncodedString(),
                attestationObject: Data(attestationObject).base64URLEncodedString(),
                authenticatorData: Data(authenticatorData.rawRepresentation).base64URLEncodedString(),
                transports: ["internal"],
                publicKeyAlgorithm: COSEKey.es256Algorithm),
            authenticatorAttachment: "platform")
    }

    /// Signs an assertion for `rpID` with the credential `credentialID` (or, when nil, the newest credential
    /// for `rpID`, as a discoverable credential would be chosen), incrementing its counter, and returns what a
    /// browser would post (§5.1.9). Throws ``WebAuthnError/Code/unknownCredential`` when there is none.
    public func getAssertion(
        rpID: String, origin: String, challenge: some DataProtocol, credentialID: Data? = nil
    ) throws -> AuthenticationResponseJSON {
        let clientDataJSON = Self.clientDataJSON(type: "webauthn.get", challenge: challenge, origin: origin)
        let (credential, flags) = try state.withLock { state in
            guard
                let index = state.credentials.lastIndex(where: {
                    $0.rpID == rpID && (credentialID == nil || $0.id == credentialID)
                })
            else {
                throw WebAuthnError(.unknownCredential, "this authenticator holds no such credential for \"\(rpID)\"")
            }
            state.credentials[index].signCount &+= 1
            return (state.credentials[index], Self.flags(state))
        }
        let authenticatorData = AuthenticatorData(
            rpIDHash: SHA256.hash(data: Data(rpID.utf8)).rawRepresentation, flags: flags,
            signCount: credential.signCount
        ).rawRepresentation
        let key = try P256.Signing.PrivateKey(rawRepresentation: credential.privateKey)
        let signature = try key.signature(
            for: authenticatorData + SHA256.hash(data: clientDataJSON).rawRepresentation)
        let id = Data(credential.id).base64URLEncodedString()
        return AuthenticationResponseJSON(
            id: id, rawId: id,
            response: AuthenticatorAssertionResponseJSON(
                clientDataJSON: Data(clientDataJSON).base64URLEncodedString(),
                authenticatorData: Data(authenticatorData).base64URLEncodedString(),
                signature: Data(signature.derRepresentation).base64URLEncodedString(),
                userHandle: Data(credential.userID).base64URLEncodedString()),
            authenticatorAttachment: "platform")
    }

    /// Rejection sampling, as `P256.Signing.PrivateKey(source:)` does, from the stored source.
    private static func makeKey(_ source: any SecureRandomSource) -> P256.Signing.PrivateKey {
        while true {
            if let key = try? P256.Signing.PrivateKey(rawRepresentation: source.bytes(count: 32)) { return key }
        }
    }

    private static func flags(_ state: State) -> AuthenticatorData.Flags {
        var flags: AuthenticatorData.Flags = [.userPresent]
        if state.userVerifying { flags.insert(.userVerified) }
        if state.backupEligible { flags.formUnion([.backupEligible, .backupState]) }
        return flags
    }

    /// The clientDataJSON a browser serializes (§5.8.1.1): type, challenge, origin, crossOrigin, in that order.
    static func clientDataJSON(type: String, challenge: some DataProtocol, origin: String) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let quotedOrigin = String(decoding: try! encoder.encode(origin), as: UTF8.self)
        return Data(
            "{\"type\":\"\(type)\",\"challenge\":\"\(Data(challenge).base64URLEncodedString())\",\"origin\":\(quotedOrigin),\"crossOrigin\":false}"
                .utf8)
    }
}
