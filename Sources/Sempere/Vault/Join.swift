import Foundation
import SiblingsCrypto

/// Joining a vault with six words each way (the guide: "The words prove to each side that it is
/// talking about the same request and the same vault, so a storage provider cannot slip in its own
/// device or a vault of its own"; docs/sempere-format.md, "Joining").
///
/// 1. The new device writes a `JoinRequest` (requests/<id>.json) and shows `request.words`.
/// 2. Home reads the requests, the user types those words, `JoinRequest.matching(words:in:)` finds the
///    one request they name, home approves it (`VaultHome.approve`) and writes a `JoinApproval`
///    (approvals/<id>.json), then shows `approval.words`.
/// 3. The user types home's words on the new device; `JoinApproval.accept` checks them against the
///    vault.json the device sees, and only then does the device pin that vault and home.
public struct JoinRequest: Sendable {
    public static let format = "sempere-join-request-v1"
    static let signatureContext = Data("sempere/v1/join-request".utf8)
    static let wordsLabel = Data("sempere/v1/join-request".utf8)

    public struct Body: Codable, Sendable, Equatable {
        public var requestID: String
        public var name: String
        public var signingKey: Data
        public var wrapRecipient: String
        /// 32 random bytes: two requests from one device never share words.
        public var nonce: Data

        enum CodingKeys: String, CodingKey {
            case requestID = "request_id", name, signingKey = "signing_key", wrapRecipient = "wrap_recipient", nonce
        }
    }

    struct File: Codable {
        var format: String
        var body: String
        var signature: Data
    }

    public let body: Body
    public let bodyBytes: Data
    public let signature: HybridSignature.Signature

    /// A new device's request to join, signed with its own key (proving it holds that key).
    public init(name: String, credentials: DeviceKeys) throws {
        let body = Body(
            requestID: SecureRandom.bytes(count: 16).hexString, name: name,
            signingKey: credentials.signingKey.publicKey.rawRepresentation,
            wrapRecipient: credentials.identity.recipientString, nonce: SecureRandom.bytes(count: 32))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let bytes = try encoder.encode(body)
        self.init(
            body: body, bodyBytes: bytes,
            signature: try credentials.signingKey.signature(for: bytes, context: Self.signatureContext))
    }

    init(body: Body, bodyBytes: Data, signature: HybridSignature.Signature) {
        self.body = body
        self.bodyBytes = bodyBytes
        self.signature = signature
    }

    /// Parses requests/<id>.json and checks its self-signature. No trust decision: the words are that.
    public init(parsing data: Data) throws {
        do {
            let file = try JSONDecoder().decode(File.self, from: data)
            guard file.format == Self.format else {
                throw SempereError(
                    .malformedVault, "a join request of format \(file.format); this version reads \(Self.format)")
            }
            let bytes = Data(file.body.utf8)
            let body = try JSONDecoder().decode(Body.self, from: bytes)
            let signature = try HybridSignature.Signature(rawRepresentation: file.signature)
            guard
                try HybridSignature.PublicKey(rawRepresentation: body.signingKey)
                    .isValidSignature(signature, for: bytes, context: Self.signatureContext)
            else {
                throw SempereError(.badSignature, "a join request's signature does not verify: it was altered")
            }
            self.init(body: body, bodyBytes: bytes, signature: signature)
        } catch let error as SempereError {
            throw error
        } catch {
            throw SempereError(.malformedVault, "a join request does not parse: \(error)")
        }
    }

    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return try encoder.encode(
            File(
                format: Self.format, body: String(decoding: bodyBytes, as: UTF8.self),
                signature: signature.rawRepresentation))
    }

    /// SHA-256 of the request's body bytes.
    public var digest: Data { SHA256.hash(data: bodyBytes).rawRepresentation }

    /// The six words the new device shows.
    public var words: JoinWords { JoinWords.derive(from: Self.wordsLabel + Data([0]) + bodyBytes) }

    /// The one request among `requests` whose words are `typed`. Throws when none is: the user typed
    /// them wrong, or the request was swapped after its words were shown.
    public static func matching(words typed: String, in requests: [JoinRequest]) throws -> JoinRequest {
        let words = try JoinWords(parsing: typed)
        guard let request = requests.first(where: { $0.words == words }) else {
            throw SempereError(
                .notFound,
                "no join request here shows the words \(words): check them on the new device; if they are right, "
                    + "its request did not arrive, or was replaced; ask again from the new device")
        }
        return request
    }
}

/// Home's answer to a join request, and the six words home shows back.
public struct JoinApproval: Sendable {
    static let wordsLabel = Data("sempere/v1/join-approval".utf8)

    /// The words for `request` joining `vaultID` under the home whose signing key is `homeKey`:
    /// SHA-256-based, over vault id, home's key and the request's digest, so another vault, another home
    /// or another request gives other words.
    public static func words(vaultID: String, homeKey: Data, request: JoinRequest) -> JoinWords {
        JoinWords.derive(
            from: wordsLabel + Data([0]) + Data(vaultID.utf8) + Data([0]) + homeKey + Data([0]) + request.digest)
    }

    /// Home approves: a new vault.json listing the device, and the words home shows.
    public static func approve(
        _ request: JoinRequest, typedWords: String, vault: SignedVault, home: VaultHome
    ) throws -> (vault: SignedVault, words: JoinWords) {
        guard try JoinWords(parsing: typedWords) == request.words else {
            throw SempereError(.notFound, "those are not the words of this request: check them on the new device")
        }
        let updated = try home.approve(
            name: request.body.name,
            signingKey: try HybridSignature.PublicKey(rawRepresentation: request.body.signingKey),
            wrapRecipient: request.body.wrapRecipient, in: vault)
        let homeKey = home.credentials.signingKey.publicKey.rawRepresentation
        return (updated, words(vaultID: vault.body.vaultID, homeKey: homeKey, request: request))
    }

    /// The new device, after the user typed home's words: checks them against the vault.json it sees and
    /// its own request, checks that vault lists it with its own keys, and returns the pin it keeps from
    /// now on. A vault or home the provider swapped in gives other words and is refused.
    public static func accept(
        typedWords: String, vault: SignedVault, request: JoinRequest, credentials: DeviceKeys
    ) throws -> VaultPin {
        guard let home = vault.body.device(vault.body.home) else {
            throw SempereError(.malformedVault, "vault.json names a home that is not among its devices")
        }
        let expected = words(vaultID: vault.body.vaultID, homeKey: home.signingKey, request: request)
        guard try JoinWords(parsing: typedWords) == expected else {
            throw SempereError(
                .wrongVault,
                "the words do not match this vault: check them on the home device; if they are right, this folder "
                    + "is not the vault home approved you into, and nothing from it is trusted")
        }
        guard request.body.signingKey == credentials.signingKey.publicKey.rawRepresentation,
            vault.body.device(credentials.id)?.signingKey == request.body.signingKey
        else {
            throw SempereError(
                .notFound, "the vault does not list this device yet: wait for it to sync, then try again")
        }
        let pin = VaultPin(
            vaultID: vault.body.vaultID, homeSigningKey: home.signingKey, generation: 0, bodySHA256: "")
        return try vault.accept(pinned: pin)
    }
}
