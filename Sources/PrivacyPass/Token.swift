import Foundation
import SiblingsCrypto

/// A spend-once rate-limit token in the manner of Privacy Pass (RFC 9578 §5, "Issuance Protocol for
/// Privately Verifiable Tokens"), on the VOPRF ristretto255-SHA512 suite instead of P-384 (docs/privacy-pass.md).
///
/// 162 bytes on the wire:
///
///     token_type        2   0xF1A7, big-endian (``Token/tokenType``)
///     nonce            32   random, chosen by the client
///     challenge_digest 32   SHA-256 of the challenge (``Token/defaultChallenge`` unless the caller names one)
///     token_key_id     32   SHA-256 of the issuer's 32-byte public key
///     authenticator    64   the VOPRF output on the first 98 bytes
///
/// The issuer saw only a blinded element when it issued the token, so a spent token cannot be linked to its
/// issuance; the token_key_id in clear says which key verifies it.
public struct Token: Sendable, Hashable {
    /// This project's token type for VOPRF(ristretto255, SHA-512). The Privacy Pass token-type registry
    /// (RFC 9577 §5.2) has no private-use range; 0xF1A7 is in an unassigned block there (docs/privacy-pass.md
    /// says what was checked) and is used only between Pixie's own clients and credential-svc. It is never sent to
    /// another Privacy Pass issuer.
    public static let tokenType: UInt16 = 0xF1A7
    /// The challenge every Pixie rate-limit token answers unless a caller names another one.
    public static let defaultChallenge = Data("pixie rate-limit token".utf8)
    /// Bytes of an encoded token.
    public static let byteCount = 2 + 32 + 32 + 32 + VOPRF.outputByteCount

    /// 32 random bytes that make the token unique; a spender keeps spent tokens (or their nonces) per key.
    public let nonce: Data
    /// SHA-256 of the challenge the token answers.
    public let challengeDigest: Data
    /// SHA-256 of the issuer's public key: which key verifies this token.
    public let tokenKeyID: Data
    /// The VOPRF output on ``authenticatorInput``.
    public let authenticator: Data

    init(nonce: Data, challengeDigest: Data, tokenKeyID: Data, authenticator: Data) {
        self.nonce = nonce
        self.challengeDigest = challengeDigest
        self.tokenKeyID = tokenKeyID
        self.authenticator = authenticator
    }

    /// Parses the 162-byte encoding; refuses another length or another token type.
    public init(rawRepresentation: some DataProtocol) throws {
        let bytes = Data(rawRepresentation)
        guard bytes.count == Token.byteCount else {
            throw PrivacyPassError(
                .malformedMessage, "a token is \(Token.byteCount) bytes, got \(bytes.count); mint another")
        }
        let start = bytes.startIndex
        let type = UInt16(bytes[start]) << 8 | UInt16(bytes[start + 1])
        guard type == Token.tokenType else {
            throw PrivacyPassError(
                .malformedMessage, "token type 0x\(String(type, radix: 16)) is not 0xf1a7 (VOPRF ristretto255-SHA512)")
        }
        nonce = Data(bytes[start + 2..<start + 34])
        challengeDigest = Data(bytes[start + 34..<start + 66])
        tokenKeyID = Data(bytes[start + 66..<start + 98])
        authenticator = Data(bytes[start + 98..<start + Token.byteCount])
    }

    /// token_type ‖ nonce ‖ challenge_digest ‖ token_key_id: the VOPRF input (RFC 9578 §5.3).
    public var authenticatorInput: Data {
        Token.authenticatorInput(nonce: nonce, challengeDigest: challengeDigest, tokenKeyID: tokenKeyID)
    }

    /// The 162-byte encoding.
    public var rawRepresentation: Data { authenticatorInput + authenticator }

    static func authenticatorInput(nonce: Data, challengeDigest: Data, tokenKeyID: Data) -> Data {
        Data([UInt8(tokenType >> 8), UInt8(tokenType & 0xFF)]) + nonce + challengeDigest + tokenKeyID
    }

    /// SHA-256 of a challenge.
    public static func challengeDigest(_ challenge: some DataProtocol) -> Data {
        SHA256.hash(data: challenge).rawRepresentation
    }
}

extension VOPRF.PublicKey {
    /// token_key_id: SHA-256 of the 32-byte public key (RFC 9578 §5 with this suite's key encoding).
    public var tokenKeyID: Data { SHA256.hash(data: rawRepresentation).rawRepresentation }
}

/// Mints tokens from an issuer (RFC 9578 §5.1 and §5.3, batched): ``begin(count:challenge:using:)`` makes the
/// issuance request, ``finish(_:pending:)`` turns the issuer's response into tokens, refusing a response whose
/// proof does not verify under the issuer's public key.
///
/// Issuance request, as bytes:
///
///     token_type         2   0xF1A7, big-endian
///     token_key_id      32   SHA-256 of the issuer's public key
///     count              2   n, big-endian, 1 ≤ n ≤ the issuer's batch limit
///     blinded_elements  n × 32   ristretto255 elements, in order
///
/// Issuance response: `count` (2, big-endian, = n) ‖ evaluated_elements (n × 32, same order) ‖ proof (64: c ‖ s,
/// one batched DLEQ proof over the whole batch, RFC 9497 §2.2).
public struct TokenClient: Sendable {
    public let publicKey: VOPRF.PublicKey
    public let tokenKeyID: Data
    let client: VOPRF.Client

    /// A client for the issuer key `publicKey`, which must be in `keyList` and valid at `now`, with `keyList`
    /// taken on trust (`@_spi(Testing)`, for tests and benchmarks that hold the issuer themselves). A device uses
    /// ``init(tokenKeyID:servedKeyList:verifier:now:)``, which checks the served list against the transparency
    /// log first: a pre-session mint is "the one moment with no prior state to contradict the server"
    /// (000_e422bd9a7c930342.txt), and a key outside the logged list could be one made for this client alone,
    /// which would link its tokens. Throws ``PrivacyPassError/Code/keyNotInList`` for a key not in `keyList`.
    @_spi(Testing)
    public init(publicKey: VOPRF.PublicKey, keyList: KeyList, now: Date = Date()) throws {
        guard let entry = keyList.entry(for: publicKey) else {
            throw PrivacyPassError(
                .keyNotInList,
                "the issuer's key \(publicKey.tokenKeyID.hexString.prefix(16))… is not in the logged OPRF key list "
                    + "(epoch \(keyList.epoch)); refuse to mint with it and fetch the list again")
        }
        guard entry.isValid(at: now) else {
            throw PrivacyPassError(
                .keyNotInList,
                "the issuer's key \(publicKey.tokenKeyID.hexString.prefix(16))… is in the logged list but not valid "
                    + "now (valid \(entry.notBefore)–\(entry.notAfter), Unix seconds); fetch the current list")
        }
        self.publicKey = publicKey
        tokenKeyID = publicKey.tokenKeyID
        client = try VOPRF.Client(mode: .voprf, publicKey: publicKey)
    }

    /// A client for the issuer key named `tokenKeyID` in the key list credential-svc served, after `verifier`
    /// has proven that list is the one in the transparency log: the device's mint call (000 seed,
    /// SignInApprovalRequester: "The token mint takes a verifier for the served OPRF key list"). Throws what
    /// the verifier throws, and ``PrivacyPassError/Code/keyNotInList`` for a key the logged list does not name
    /// or not valid at `now`.
    public init(
        tokenKeyID: Data, servedKeyList: Data, verifier: some KeyListVerifier, now: Date = Date()
    ) async throws {
        let logged = try await verifier.loggedKeyList(matching: servedKeyList)
        guard let entry = logged.entries.first(where: { $0.tokenKeyID == tokenKeyID }) else {
            throw PrivacyPassError(
                .keyNotInList,
                "the issuer's key \(tokenKeyID.hexString.prefix(16))… is not in the logged OPRF key list "
                    + "(epoch \(logged.epoch)); refuse to mint with it and fetch the list again")
        }
        try self.init(publicKey: entry.publicKey, keyList: logged, now: now)
    }

    /// What ``finish(_:pending:)`` needs; it holds the blinds, so it stays on the client.
    public struct PendingIssuance: Sendable {
        let nonces: [Data]
        let challengeDigest: Data
        let state: VOPRF.Client.BlindState

        /// How many tokens were requested.
        public var count: Int { nonces.count }
    }

    /// Starts minting `count` tokens (1 to 65535; the issuer may accept fewer) answering `challenge`.
    public func begin(
        count: Int, challenge: Data = Token.defaultChallenge
    ) throws -> (request: Data, pending: PendingIssuance) {
        try begin(count: count, challenge: challenge, using: SystemRandom())
    }

    /// ``begin(count:challenge:)`` with nonces and blinds from `random` (`@_spi(Testing)`).
    @_spi(Testing)
    public func begin(
        count: Int, challenge: Data = Token.defaultChallenge, using random: some SecureRandomSource
    ) throws -> (request: Data, pending: PendingIssuance) {
        guard count >= 1, count <= VOPRF.maximumBatchSize else {
            throw PrivacyPassError(.batchSizeMismatch, "mint 1 to 65535 tokens at once, not \(count)")
        }
        let digest = Token.challengeDigest(challenge)
        let nonces = (0..<count).map { _ in random.bytes(count: 32) }
        let inputs = nonces.map {
            Token.authenticatorInput(nonce: $0, challengeDigest: digest, tokenKeyID: tokenKeyID)
        }
        let (blinded, state) = try client.blind(inputs, blinds: nil, using: random)
        var request = Data([UInt8(Token.tokenType >> 8), UInt8(Token.tokenType & 0xFF)])
        request += tokenKeyID
        request += [UInt8(count >> 8), UInt8(count & 0xFF)]
        for element in blinded { request += element }
        return (request, PendingIssuance(nonces: nonces, challengeDigest: digest, state: state))
    }

    /// Finishes minting: parses the issuer's response, verifies its proof and finalizes one token per nonce.
    /// Throws ``PrivacyPassError/Code/proofVerificationFailed`` for a bad proof,
    /// ``PrivacyPassError/Code/batchSizeMismatch`` for a count that is not the request's, and
    /// ``PrivacyPassError/Code/malformedMessage`` for bytes that do not parse.
    public func finish(_ response: Data, pending: PendingIssuance) throws -> [Token] {
        let (evaluated, proof) = try IssuanceResponse.decode(response)
        guard evaluated.count == pending.count else {
            throw PrivacyPassError(
                .batchSizeMismatch,
                "the issuer answered \(evaluated.count) tokens to a request for \(pending.count); discard the answer")
        }
        let outputs = try client.finalize(evaluated, proof: proof, state: pending.state)
        return zip(pending.nonces, outputs).map {
            Token(nonce: $0, challengeDigest: pending.challengeDigest, tokenKeyID: tokenKeyID, authenticator: $1)
        }
    }
}

/// Issues and verifies tokens under one OPRF private key (credential-svc's side of RFC 9578 §5.2 and §5.4).
public struct TokenIssuer: Sendable {
    public let privateKey: VOPRF.PrivateKey
    /// The largest batch ``respond(to:using:)`` accepts.
    public let maximumBatchSize: Int
    let server: VOPRF.Server

    public init(privateKey: VOPRF.PrivateKey, maximumBatchSize: Int = 64) {
        self.privateKey = privateKey
        self.maximumBatchSize = max(1, min(maximumBatchSize, VOPRF.maximumBatchSize))
        server = VOPRF.Server(mode: .voprf, privateKey: privateKey)
    }

    public var publicKey: VOPRF.PublicKey { privateKey.publicKey }
    public var tokenKeyID: Data { privateKey.publicKey.tokenKeyID }

    /// Answers an issuance request (see ``TokenClient``): evaluates every blinded element and proves the batch.
    /// Throws ``PrivacyPassError/Code/unknownKey`` for a request made for another key,
    /// ``PrivacyPassError/Code/malformedMessage`` for bytes that do not parse (or a batch above the limit) and
    /// ``PrivacyPassError/Code/invalidElement`` for an element that is not a valid non-identity point.
    public func respond(to request: Data) throws -> Data {
        try respond(to: request, using: SystemRandom())
    }

    /// ``respond(to:)`` with the proof's r from `random` (`@_spi(Testing)`).
    @_spi(Testing)
    public func respond(to request: Data, using random: some SecureRandomSource) throws -> Data {
        let bytes = [UInt8](request)
        guard bytes.count >= 36 else {
            throw PrivacyPassError(.malformedMessage, "an issuance request has at least 36 bytes, got \(bytes.count)")
        }
        let type = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        guard type == Token.tokenType else {
            throw PrivacyPassError(
                .malformedMessage, "the request asks for token type 0x\(String(type, radix: 16)), not 0xf1a7")
        }
        guard Data(bytes[2..<34]) == tokenKeyID else {
            throw PrivacyPassError(
                .unknownKey, "the request names another token_key_id; the client should fetch the current key list")
        }
        let count = Int(bytes[34]) << 8 | Int(bytes[35])
        guard count >= 1, count <= maximumBatchSize else {
            throw PrivacyPassError(
                .malformedMessage, "a request asks for 1 to \(maximumBatchSize) tokens, this one for \(count)")
        }
        guard bytes.count == 36 + count * 32 else {
            throw PrivacyPassError(
                .malformedMessage, "a request for \(count) tokens has \(36 + count * 32) bytes, got \(bytes.count)")
        }
        let blinded = (0..<count).map { Data(bytes[36 + $0 * 32..<68 + $0 * 32]) }
        let (evaluated, proof) = try server.blindEvaluate(blinded, proofRandomness: nil, using: random)
        guard let proof else { preconditionFailure("VOPRF mode always proves") }
        return IssuanceResponse.encode(evaluated, proof: proof)
    }

    /// Whether `token` was issued under this key for `challenge`: recomputes the PRF on its input (Evaluate) and
    /// compares with the authenticator in constant time. Spent-token bookkeeping is the caller's (the spender's).
    public func verify(_ token: Token, challenge: Data = Token.defaultChallenge) -> Bool {
        let keyMatches = safeCompare(token.tokenKeyID, tokenKeyID)
        let challengeMatches = safeCompare(token.challengeDigest, Token.challengeDigest(challenge))
        guard let expected = try? server.evaluate(token.authenticatorInput) else { return false }
        let authenticatorMatches = safeCompare(expected, token.authenticator)
        return keyMatches && challengeMatches && authenticatorMatches
    }

    /// ``verify(_:challenge:)`` on the token's encoding; false for bytes that do not parse.
    public func verify(rawToken: Data, challenge: Data = Token.defaultChallenge) -> Bool {
        guard let token = try? Token(rawRepresentation: rawToken) else { return false }
        return verify(token, challenge: challenge)
    }
}

/// The issuance response: count (2) ‖ evaluated elements (count × 32) ‖ proof (64).
enum IssuanceResponse {
    static func encode(_ evaluated: [Data], proof: Data) -> Data {
        var out = Data([UInt8(evaluated.count >> 8), UInt8(evaluated.count & 0xFF)])
        for element in evaluated { out += element }
        return out + proof
    }

    static func decode(_ response: Data) throws -> (evaluated: [Data], proof: Data) {
        let bytes = [UInt8](response)
        guard bytes.count >= 2 else {
            throw PrivacyPassError(.malformedMessage, "an issuance response has at least 2 bytes")
        }
        let count = Int(bytes[0]) << 8 | Int(bytes[1])
        let expected = 2 + count * 32 + VOPRF.proofByteCount
        guard bytes.count == expected else {
            throw PrivacyPassError(
                .malformedMessage,
                "an issuance response for \(count) tokens has \(expected) bytes, got \(bytes.count); discard it")
        }
        let evaluated = (0..<count).map { Data(bytes[2 + $0 * 32..<34 + $0 * 32]) }
        return (evaluated, Data(bytes[(2 + count * 32)...]))
    }
}
