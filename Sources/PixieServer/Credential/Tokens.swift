import Foundation
import HTTPServer
import PixieWire
import PrivacyPass
import SiblingsCrypto
import Storage
import Synchronization
import Transparency
import TransparencyLog

/// credential-svc's rate-limit tokens (000_e422bd9a7c930342.txt): unlinkable, spend-once VOPRF tokens
/// (docs/privacy-pass.md) under one shared OPRF key whose key list is published in the transparency log
/// (label `oprf-keys`), so a device can refuse a key that is not the logged shared one (the seed: a per-user
/// key would tag the device "from birth").
///
/// - `GET /v1/tokens/keys`: `{"key_list", "token_key_id"}`: the served key list (its encoding is the logged
///   value) and the key issuance uses now.
/// - `POST /v1/approval-tokens/challenge` `{"phone_cert", "token_request"}`: exactly 4 tokens, budgeted
///   against a bucket derived from the cert's phone_id, never from any account; refused without a pinned
///   phone-verify key.
/// - `POST /v1/tokens` (session) `{"token_request"}`: 1 to 16 tokens, budgeted per account.
///
/// Budgets are token buckets in the store (so they hold across instances): capacity and refill per hour.
struct TokenIssuance: Sendable {
    struct Configuration: Sendable {
        /// Tokens one phone_id may mint through the challenge endpoint per hour (10 requests of 4).
        var approvalTokensPerHour = 40
        /// Tokens one account's sessions may mint per hour.
        var accountTokensPerHour = 600
        /// Upload-class tokens one account's sessions may mint per hour: 256 of 64 MiB is the 16 GiB an account
        /// could upload with its session in an hour.
        var accountUploadTokensPerHour = 256
        static let approvalBatchSize = 4
        static let sessionBatchLimit = 16
        static let uploadBatchLimit = 64
    }

    static let migrations = [
        Migration(
            version: 1,
            sql: """
                CREATE TABLE token_buckets (
                    bucket BLOB PRIMARY KEY,
                    tokens REAL NOT NULL,
                    updated_at BIGINT NOT NULL
                );
                CREATE TABLE spent_tokens (
                    token_hash BLOB PRIMARY KEY,
                    token_key_id BLOB NOT NULL,
                    spent_at BIGINT NOT NULL
                );
                """)
    ]

    let issuer: TokenIssuer
    let keyList: KeyList
    /// The upload class's issuer and key list (label `oprf-keys/upload`).
    let uploadIssuer: TokenIssuer
    let uploadKeyList: KeyList
    let database: any SQLDatabase
    let certificates: PhoneOwnershipCert.Verifier?
    let sessions: Sessions
    let configuration: Configuration
    let clock: PixieClock
    let logger: Logger
    let metrics: Metrics

    /// The key list credential-svc serves: the one shared key, valid from 2020 to 2100 (rotation, with an
    /// overlap of two keys, is a later change: docs/privacy-pass.md).
    static func keyList(for key: VOPRF.PublicKey) throws -> KeyList {
        try KeyList(
            epoch: 1, entries: [KeyList.Entry(publicKey: key, notBefore: 1_577_836_800, notAfter: 4_102_444_800)])
    }

    func addRoutes(to router: inout Router) {
        router.on(PixieAPI.tokenKeys) { request, _ in try keys(request) }
        router.on(PixieAPI.approvalTokens) { request, _ in try challenge(request) }
        router.on(PixieAPI.sessionTokens) { request, _ in try sessionTokens(request) }
    }

    /// Logs the served key lists under `oprf-keys` and `oprf-keys/upload` unless the log already holds exactly
    /// them.
    func publishKeyList(to log: Sequencer) async throws {
        for (name, list, issuer) in [
            (KeyList.logLabel, keyList, self.issuer), (KeyList.uploadLogLabel, uploadKeyList, uploadIssuer),
        ] {
            let label = try Label(name)
            let (_, proof) = try await log.lookup(label)
            guard proof.entry?.value != list.encoded else { continue }
            _ = try await log.append(label: label, value: list.encoded)
            logger.info(
                "published the OPRF key list",
                ["label": name, "token_key_id": issuer.tokenKeyID.base64URLEncodedString()])
        }
    }

    /// GET /v1/tokens/keys[?class=upload]: the class's key list and the key issuance uses now.
    func keys(_ request: HTTPRequest) throws -> HTTPResponse {
        let upload = try Self.tokenClass(request.query("class")) == .upload
        let (list, issuer) = upload ? (uploadKeyList, uploadIssuer) : (keyList, self.issuer)
        return try .json(
            CredentialAPI.KeysResponse(
                keyList: Base64URLBytes(list.encoded), tokenKeyID: Base64URLBytes(issuer.tokenKeyID)))
    }

    static func tokenClass(_ text: String?) throws(HTTPError) -> CredentialAPI.TokenClass {
        guard let text else { return .send }
        guard let known = CredentialAPI.TokenClass(rawValue: text) else {
            throw HTTPError(.badRequest, .invalidField, "class must be send or upload, not \(text)")
        }
        return known
    }

    /// POST /v1/approval-tokens/challenge: the pre-session mint. Without the pinned phone-verify key it cannot
    /// check the cert, so the caller's self-claimed phone_id would become the whole authorization, and that
    /// value budgets the anti-abuse bucket: refusing is the only safe reading of "I cannot verify this".
    func challenge(_ request: HTTPRequest) throws -> HTTPResponse {
        let body = try request.decode(as: CredentialAPI.ApprovalTokenRequest.self)
        guard let certificates else {
            throw HTTPError(
                .serviceUnavailable, .phoneVerifyKeyNotPinned,
                "this server has no pinned phone-verify key, so it cannot check the cert and refuses to mint; the "
                    + "operator must configure one")
        }
        let cert: PhoneOwnershipCert
        do {
            cert = try certificates.verify(body.phoneCert.data, now: clock.now())
        } catch {
            throw HTTPError(.unauthorized, .phoneCertInvalid, error.reason)
        }
        let count = try Self.batchSize(body.tokenRequest.data)
        guard count == Configuration.approvalBatchSize else {
            throw HTTPError(
                .badRequest, .invalidField,
                "token_request asks for \(count) tokens; this endpoint mints exactly \(Configuration.approvalBatchSize)"
            )
        }
        let bucket = Data(SHA256.hash(data: Data("pixie/token-bucket/phone/v1".utf8) + cert.phoneID))
        try spend(count, from: bucket, perHour: configuration.approvalTokensPerHour, what: "this number")
        return try respond(body.tokenRequest.data, kind: "approval")
    }

    /// POST /v1/tokens: an enrolled device's refill, budgeted per account: send-class tokens (1 to 16), or with
    /// `"class": "upload"` upload-class ones (1 to 64) from a bucket of their own. Only a session mints upload
    /// tokens: a number's tokens (the pre-session mint) can never pay a whole-store upload.
    func sessionTokens(_ request: HTTPRequest) throws -> HTTPResponse {
        let session = try sessions.authenticate(request)
        let body = try request.decode(as: CredentialAPI.SessionTokenRequest.self)
        let count = try Self.batchSize(body.tokenRequest.data)
        if body.tokenClass == .upload {
            guard (1...Configuration.uploadBatchLimit).contains(count) else {
                throw HTTPError(
                    .badRequest, .invalidField,
                    "token_request asks for \(count) upload tokens; ask for 1 to \(Configuration.uploadBatchLimit) at a "
                        + "time")
            }
            let bucket = Data(
                SHA256.hash(data: Data("pixie/token-bucket/account-upload/v1\0\(session.accountID)".utf8)))
            try spend(count, from: bucket, perHour: configuration.accountUploadTokensPerHour, what: "this account")
            return try respond(body.tokenRequest.data, issuer: uploadIssuer, kind: "upload")
        }
        guard (1...Configuration.sessionBatchLimit).contains(count) else {
            throw HTTPError(
                .badRequest, .invalidField, "token_request asks for \(count) tokens; ask for 1 to 16 at a time")
        }
        let bucket = Data(SHA256.hash(data: Data("pixie/token-bucket/account/v1\0\(session.accountID)".utf8)))
        try spend(count, from: bucket, perHour: configuration.accountTokensPerHour, what: "this account")
        return try respond(body.tokenRequest.data, kind: "session")
    }

    /// The number of tokens an issuance request asks for (docs/privacy-pass.md), or a 400.
    static func batchSize(_ request: Data) throws(HTTPError) -> Int {
        guard request.count >= 36 else {
            throw HTTPError(.badRequest, .invalidField, "token_request is not an issuance request (too short)")
        }
        let bytes = [UInt8](request.prefix(36))
        return Int(bytes[34]) << 8 | Int(bytes[35])
    }

    private func respond(_ request: Data, issuer: TokenIssuer? = nil, kind: String) throws -> HTTPResponse {
        do {
            let response = try (issuer ?? self.issuer).respond(to: request)
            metrics.increment(
                "pixie_credential_tokens_minted_total", by: Double(try Self.batchSize(request)), labels: ["kind": kind])
            return try .json(CredentialAPI.TokenResponse(tokenResponse: Base64URLBytes(response)))
        } catch let error as PrivacyPassError {
            throw HTTPError(.badRequest, .invalidField, "token_request: \(error.reason)")
        }
    }

    /// Takes `count` tokens from a bucket of `perHour` capacity refilled continuously, or answers 429.
    private func spend(_ count: Int, from bucket: Data, perHour: Int, what: String) throws {
        let now = clock.now()
        let capacity = Double(perHour)
        let wait: Double? = try store(logger) {
            try database.transaction { transaction in
                let row = try transaction.queryOne(
                    "SELECT tokens, updated_at FROM token_buckets WHERE bucket = ?", [.blob(bucket)])
                var tokens = capacity
                if let row {
                    let elapsed = max(0, Double(now.unixSeconds - (try row.int64("updated_at"))))
                    tokens = min(capacity, (try row.double("tokens")) + elapsed * capacity / 3600)
                }
                guard tokens >= Double(count) else {
                    return (Double(count) - tokens) * 3600 / capacity
                }
                try transaction.execute(
                    "INSERT INTO token_buckets (bucket, tokens, updated_at) VALUES (?, ?, ?) "
                        + "ON CONFLICT (bucket) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at",
                    [.blob(bucket), .real(tokens - Double(count)), .integer(now.unixSeconds)])
                return nil
            }
        }
        if let wait {
            metrics.increment("pixie_credential_tokens_refused_total", labels: ["reason": "budget"])
            throw HTTPError(
                .tooManyRequests, .rateLimited, "\(what) has minted its tokens for now; wait and try again",
                headers: ["Retry-After": String(max(1, Int(wait.rounded(.up))))])
        }
    }
}

/// The relay's and blob-svc's ``TokenSpender``: a token verifies when credential-svc's key (found by the
/// token's token_key_id, which it carries in clear) evaluates its input to its authenticator; it is spent
/// once, recorded by its SHA-256 in the store (so a double spend is refused across instances and restarts).
public struct CredentialTokenSpender: TokenSpender {
    let issuers: [Data: TokenIssuer]
    let database: any SQLDatabase
    let clock: PixieClock
    let logger: Logger

    init(issuers: [TokenIssuer], database: any SQLDatabase, clock: PixieClock, logger: Logger) {
        self.issuers = Dictionary(uniqueKeysWithValues: issuers.map { ($0.tokenKeyID, $0) })
        self.database = database
        self.clock = clock
        self.logger = logger
    }

    /// The spender of a process that does not run credential-svc itself (the relay or blob-svc alone): the
    /// same OPRF key of `tokenClass` from the shared key directory, the same spent set in the shared store.
    public init(
        keys: ServiceKeys, tokenClass: CredentialAPI.TokenClass = .send, database: any SQLDatabase,
        clock: PixieClock, logger: Logger
    ) throws(ServerError) {
        do {
            try database.migrate(component: "credential", migrations: TokenIssuance.migrations)
        } catch {
            throw ServerError(.storage, "credential's tables could not be migrated: \(error)")
        }
        let key = tokenClass == .upload ? keys.tokenUploadOPRF : keys.tokenOPRF
        self.init(issuers: [TokenIssuer(privateKey: key)], database: database, clock: clock, logger: logger)
    }

    /// The cores verification is spread over, read once (`activeProcessorCount` reads the cgroup's quota from
    /// files on every call).
    private static let cores = ProcessInfo.processInfo.activeProcessorCount

    /// Verifies the tokens (spread over every core when there are several: one verification is a
    /// hash-to-group and a scalar multiplication, ~80 µs), then records the ones that verify in one
    /// transaction; a token whose hash is recorded already, or that came earlier in `tokens`, is `token_spent`.
    public func spend(_ tokens: [Data]) -> [Result<Void, HTTPError>] {
        guard !tokens.isEmpty else { return [] }
        let parsed = tokens.map { raw in
            (try? Token(rawRepresentation: raw)).flatMap { token in issuers[token.tokenKeyID].map { (token, $0) } }
        }
        let lanes = min(tokens.count, Self.cores)
        let verifiedByLane = Mutex([Bool](repeating: false, count: tokens.count))
        let verifyLane = { @Sendable (lane: Int) in
            var mine: [(Int, Bool)] = []
            for index in stride(from: lane, to: parsed.count, by: lanes) {
                if let (token, issuer) = parsed[index] { mine.append((index, issuer.verify(token))) }
            }
            verifiedByLane.withLock { verified in for (index, ok) in mine { verified[index] = ok } }
        }
        if lanes > 1 { DispatchQueue.concurrentPerform(iterations: lanes, execute: verifyLane) } else { verifyLane(0) }
        let verified = verifiedByLane.withLock { $0 }
        let verifiedCount = verified.count { $0 }
        var results = [Result<Void, HTTPError>](repeating: .failure(.tokenInvalid), count: tokens.count)
        let now = clock.now().unixSeconds
        let record = { (store: any SQLQuerying) throws in
            for (index, raw) in tokens.enumerated() where verified[index] {
                let recorded = try store.execute(
                    "INSERT INTO spent_tokens (token_hash, token_key_id, spent_at) VALUES (?, ?, ?) "
                        + "ON CONFLICT (token_hash) DO NOTHING",
                    [.blob(Data(SHA256.hash(data: raw))), .blob(parsed[index]!.0.tokenKeyID), .integer(now)])
                results[index] = recorded == 1 ? .success(()) : .failure(.tokenSpent)
            }
        }
        do {
            // One insert is a transaction of its own; several share one.
            if verifiedCount > 1 {
                try database.transaction { try record($0) }
            } else {
                try record(database)
            }
        } catch {
            logger.error(
                "tokens could not be recorded as spent", ["error": "\(error)", "tokens": verifiedCount])
            let unavailable = HTTPError(
                .serviceUnavailable, .storage, "the server's store is unavailable; try again shortly")
            for index in tokens.indices where verified[index] { results[index] = .failure(unavailable) }
        }
        return results
    }
}
