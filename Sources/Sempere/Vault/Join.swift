import Foundation
import SiblingsCrypto

/// Joining a vault with six words each way (the guide: "The words prove to each side that it is
/// talking about the same request and the same vault, so a storage provider cannot slip in its own
/// device or a vault of its own"; docs/sempere-format.md, "Joining").
///
/// 1. The new device writes a `JoinRequest` (requests/<id>.json) and shows `request.words`, or
///    `request.code` as a QR code and text to paste. Its words expire after `JoinRequest.lifetime`.
/// 2. Home reads the requests, the user types those words (or pastes the code),
///    `JoinRequest.matching(words:in:)` (or `matching(code:in:)`) finds the one request they name, and
///    `JoinApproval.approve` lists the device in a new vault.json, the approval itself; home shows
///    `JoinApproval.words` (and `code`).
/// 3. The user types home's words (or pastes home's code) on the new device; `JoinApproval.accept`
///    checks them against the vault.json the device sees and its own unexpired request, and only then
///    does the device pin that vault and home.
public struct JoinRequest: Sendable {
    public static let format = "sempere-join-request-v2"
    /// How long the new device's words stay valid: the window in which a provider that swapped the
    /// request must find one with the same words (docs/sempere-join-words.md). Enforced by the new
    /// device on its own request, whose signed `created_at` the provider cannot change.
    public static let lifetime: TimeInterval = 600
    static let codePrefix = "sempere-join-request:"
    static let signatureContext = Data("sempere/v1/join-request".utf8)
    static let wordsLabel = Data("sempere/v1/join-request".utf8)

    public struct Body: Codable, Sendable, Equatable {
        public var requestID: String
        public var name: String
        public var signingKey: Data
        public var wrapRecipient: String
        /// 32 random bytes: two requests from one device never share words.
        public var nonce: Data
        /// When the new device made it, in whole seconds since 1970 (UTC); its words expire
        /// `JoinRequest.lifetime` later.
        public var createdAt: Int64

        enum CodingKeys: String, CodingKey {
            case requestID = "request_id", name, signingKey = "signing_key", wrapRecipient = "wrap_recipient", nonce
            case createdAt = "created_at"
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
    public init(name: String, credentials: DeviceKeys, now: Date = Date()) throws {
        let body = Body(
            requestID: SecureRandom.bytes(count: 16).hexString, name: name,
            signingKey: credentials.signingKey.publicKey.rawRepresentation,
            wrapRecipient: credentials.identity.recipientString, nonce: SecureRandom.bytes(count: 32),
            createdAt: Int64(now.timeIntervalSince1970.rounded(.down)))
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
                    .malformedVault,
                    file.format == "sempere-join-request-v1"
                        ? "a join request made by an earlier sempere (sempere-join-request-v1, whose words never "
                            + "expire): ask again from the new device, which then writes \(Self.format)"
                        : "a join request of format \(file.format); this version reads \(Self.format)")
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
            throw SempereError(.malformedVault, "a join request does not parse: \(plainDescription(of: error))")
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

    /// The id the device will have in the vault (from the signing key it asks with).
    public var deviceID: String { SHA256.hash(data: body.signingKey).rawRepresentation.prefix(16).hexString }

    /// SHA-256 of the request's body bytes.
    public var digest: Data { SHA256.hash(data: bodyBytes).rawRepresentation }

    /// The six words the new device shows.
    public var words: JoinWords { JoinWords.derive(from: Self.wordsLabel + Data([0]) + bodyBytes) }

    /// The full-strength form of the words, for a QR code or to paste: `sempere-join-request:` and the
    /// request's SHA-256 in base64url without padding (256 bits, where the words carry 66).
    public var code: String { Self.codePrefix + digest.base64URLEncodedString() }

    /// When the words stop being valid.
    public var expiresAt: Date { Date(timeIntervalSince1970: TimeInterval(body.createdAt) + Self.lifetime) }

    /// Whether the words are still valid at `now`. A request dated in the future by more than a few
    /// minutes (a clock that was wrong when it was made) is not valid either.
    public func isValid(at now: Date) -> Bool {
        let created = TimeInterval(body.createdAt)
        return now.timeIntervalSince1970 < created + Self.lifetime && created < now.timeIntervalSince1970 + 300
    }

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

    /// The one request among `requests` whose ``code`` is `pasted` (the full-strength path).
    public static func matching(code pasted: String, in requests: [JoinRequest]) throws -> JoinRequest {
        let digest = try decodeCode(pasted, prefix: codePrefix, what: "a join request's code")
        guard let request = requests.first(where: { $0.digest == digest }) else {
            throw SempereError(
                .notFound,
                "no join request here has that code: if it was copied whole from the new device, its request did "
                    + "not arrive yet, or was replaced; wait for the folder to sync, or ask again from the new device")
        }
        return request
    }

    /// The 32 bytes of a pasted code that starts with `prefix`.
    static func decodeCode(_ pasted: String, prefix: String, what: String) throws -> Data {
        let text = pasted.trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix(prefix), let bytes = Data(base64URLEncoded: String(text.dropFirst(prefix.count))),
            bytes.count == 32
        else {
            throw SempereError(
                .invalidEncoding,
                "that is not \(what) (\(prefix) and 43 characters): copy the whole line, or type the six words instead")
        }
        return bytes
    }
}

/// How the user confirms a join on the other device: the six words typed, or the full code pasted (or
/// scanned from the QR code).
public enum JoinCheck: Sendable, Equatable {
    case words(String)
    case code(String)
}

/// Home's answer to a join request, and the six words (and code) home shows back.
public struct JoinApproval: Sendable {
    static let wordsLabel = Data("sempere/v1/join-approval".utf8)
    static let codePrefix = "sempere-join-approval:"

    /// What home shows after approving: the device it listed, the new vault.json, and its words and code.
    public struct Approved: Sendable {
        public let vault: SignedVault
        public let device: VaultBody.Device
        public let words: JoinWords
        public let code: String
        /// The device was listed already (approved from an earlier request, whose words expired on the
        /// device before the user typed home's): nothing changed, and these are the words for this request.
        public let alreadyListed: Bool
    }

    /// SHA-256 over vault id, home's key and the request's digest: another vault, another home or another
    /// request gives another value. The words are its first 66 bits (through `JoinWords.derive`), the
    /// code all 256.
    static func transcript(vaultID: String, homeKey: Data, request: JoinRequest) -> Data {
        wordsLabel + Data([0]) + Data(vaultID.utf8) + Data([0]) + homeKey + Data([0]) + request.digest
    }

    /// The words for `request` joining `vaultID` under the home whose signing key is `homeKey`.
    public static func words(vaultID: String, homeKey: Data, request: JoinRequest) -> JoinWords {
        JoinWords.derive(from: transcript(vaultID: vaultID, homeKey: homeKey, request: request))
    }

    /// The full-strength form of home's words: `sempere-join-approval:` and base64url of SHA-256 of the
    /// same transcript.
    public static func code(vaultID: String, homeKey: Data, request: JoinRequest) -> String {
        codePrefix
            + SHA256.hash(data: transcript(vaultID: vaultID, homeKey: homeKey, request: request)).rawRepresentation
            .base64URLEncodedString()
    }

    /// Home approves `request`, which the user's words or code picked (`JoinRequest.matching`): a new
    /// vault.json listing the device, and what home shows. A device already listed with exactly the
    /// request's keys (only it can sign such a request) is not added again: the vault is unchanged.
    public static func approve(
        _ request: JoinRequest, vault: SignedVault, home: VaultHome, now: Date = Date()
    ) throws -> Approved {
        // The time is inside the hashed body: a substitute must carry a fresh one too, so home's own clock
        // bounds how long anyone may search for a request with these words.
        guard request.isValid(at: now) else {
            throw SempereError(
                .expired,
                "this join request's words expired at \(ISO8601DateFormatter().string(from: request.expiresAt)) (they "
                    + "are valid for \(Int(JoinRequest.lifetime / 60)) minutes, by this device's clock): ask again from "
                    + "the new device, and type the new words here")
        }
        let signingKey = try HybridSignature.PublicKey(rawRepresentation: request.body.signingKey)
        let id = VaultKeys.identifier(for: signingKey)
        let homeKey = home.credentials.signingKey.publicKey.rawRepresentation
        let words = words(vaultID: vault.body.vaultID, homeKey: homeKey, request: request)
        let code = code(vaultID: vault.body.vaultID, homeKey: homeKey, request: request)
        if let listed = vault.body.device(id), listed.signingKey == request.body.signingKey,
            listed.wrapRecipient == request.body.wrapRecipient
        {
            try home.checkHome(vault)
            return Approved(vault: vault, device: listed, words: words, code: code, alreadyListed: true)
        }
        let updated = try home.approve(
            name: request.body.name, signingKey: signingKey, wrapRecipient: request.body.wrapRecipient, in: vault)
        return Approved(
            vault: updated, device: updated.body.device(id)!, words: words, code: code, alreadyListed: false)
    }

    /// Home approves the request whose words are `typedWords`: checks them, then ``approve(_:vault:home:)``.
    public static func approve(
        _ request: JoinRequest, typedWords: String, vault: SignedVault, home: VaultHome, now: Date = Date()
    ) throws -> Approved {
        guard try JoinWords(parsing: typedWords) == request.words else {
            throw SempereError(.notFound, "those are not the words of this request: check them on the new device")
        }
        return try approve(request, vault: vault, home: home, now: now)
    }

    /// The new device, after the user typed home's words or pasted its code: checks that its own request
    /// has not expired, checks the words or code against the vault.json it sees and that request, checks
    /// that vault lists it with its own keys, and returns the pin it keeps from now on. A vault or home
    /// the provider swapped in gives other words and is refused.
    public static func accept(
        _ check: JoinCheck, vault: SignedVault, request: JoinRequest, credentials: DeviceKeys, now: Date = Date()
    ) throws -> VaultPin {
        guard request.body.signingKey == credentials.signingKey.publicKey.rawRepresentation else {
            throw SempereError(.notFound, "that join request is not this device's own")
        }
        guard request.isValid(at: now) else {
            throw SempereError(
                .expired,
                "this device's join request expired at \(ISO8601DateFormatter().string(from: request.expiresAt)) "
                    + "(its words are valid for \(Int(JoinRequest.lifetime / 60)) minutes, so that nobody gets more "
                    + "time than that to find a request with the same words). Ask again from this device; home can "
                    + "approve the new request even if it approved this one")
        }
        guard let home = vault.body.device(vault.body.home) else {
            throw SempereError(.malformedVault, "vault.json names a home that is not among its devices")
        }
        let matches: Bool
        switch check {
        case .words(let typed):
            matches =
                try JoinWords(parsing: typed)
                == words(vaultID: vault.body.vaultID, homeKey: home.signingKey, request: request)
        case .code(let pasted):
            let typed = try JoinRequest.decodeCode(pasted, prefix: codePrefix, what: "home's approval code")
            matches =
                codePrefix + typed.base64URLEncodedString()
                == code(vaultID: vault.body.vaultID, homeKey: home.signingKey, request: request)
        }
        guard matches else {
            throw SempereError(
                .wrongVault,
                "the words do not match this vault: check them on the home device; if they are right, this folder "
                    + "is not the vault home approved you into, and nothing from it is trusted")
        }
        guard let listed = vault.body.device(credentials.id), listed.signingKey == request.body.signingKey,
            listed.wrapRecipient == request.body.wrapRecipient
        else {
            throw SempereError(
                .notFound, "the vault does not list this device yet: wait for it to sync, then try again")
        }
        // The words vouch for the home this body names, so the body must be signed by that home itself (not
        // a handoff's, signed by the home before), and the handoffs before it are history this device
        // does not need: it follows this home from here on.
        guard vault.signer == vault.body.home else {
            throw SempereError(
                .notFound,
                "vault.json was just handed to a new home and is not yet signed by it: wait for the next change "
                    + "from home, or ask home to approve again")
        }
        let pin = VaultPin(
            vaultID: vault.body.vaultID, homeSigningKey: home.signingKey, generation: vault.body.generation,
            bodySHA256: vault.bodySHA256, takeoverGeneration: vault.body.takeoverGeneration,
            recoverySigningKey: vault.body.recovery.signingKey)
        return try vault.accept(pinned: pin)
    }

    /// ``accept(_:vault:request:credentials:now:)`` with typed words.
    public static func accept(
        typedWords: String, vault: SignedVault, request: JoinRequest, credentials: DeviceKeys, now: Date = Date()
    ) throws -> VaultPin {
        try accept(.words(typedWords), vault: vault, request: request, credentials: credentials, now: now)
    }
}
