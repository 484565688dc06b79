import Foundation
import HTTPServer
import PixieWire
import PrivacyPass
import SiblingsCrypto
import Storage
import Transparency
import TransparencyLog

/// credential-svc (000_e422bd9a7c930342.txt): SenderCerts for enrolled devices, and rate-limit tokens
/// (``TokenIssuance``).
///
/// - `POST /v1/credentials/sender-cert` (session): a ``PixieWire/SenderCert`` binding
///   compute_user_id_hash(the session's account) to the session device's roster pubkey, valid for
///   `senderCertLifetime`. Nothing in the request names the account or the key: both come from the session,
///   so a device gets a cert bearing an account's hash only by holding a valid session for that account.
public struct CredentialService: Sendable {
    public struct Configuration: Sendable {
        /// A SenderCert's lifetime ("a short expiry"): one hour.
        public var senderCertLifetime: TimeInterval = 3600
        /// Tokens one phone_id may mint per hour before it has a session.
        public var approvalTokensPerHour = 40
        /// Tokens one account may mint per hour.
        public var accountTokensPerHour = 600

        public init() {}
    }

    let database: any SQLDatabase
    let keys: ServiceKeys
    let sessions: Sessions
    let configuration: Configuration
    let clock: PixieClock
    let logger: Logger
    let metrics: Metrics
    let tokens: TokenIssuance
    /// Spends the send-class tokens this service issues; the relay and blob-svc take it.
    public let spender: CredentialTokenSpender
    /// Spends the upload-class tokens; blob-svc alone takes it.
    public let uploadSpender: CredentialTokenSpender

    /// `pinnedPhoneVerifyKeys` check the cert of the pre-session mint; with none, that endpoint refuses.
    public init(
        database: any SQLDatabase, keys: ServiceKeys, pinnedPhoneVerifyKeys: [HybridSignature.PublicKey],
        configuration: Configuration = .init(), clock: PixieClock = .system, logger: Logger, metrics: Metrics
    ) throws(ServerError) {
        try self.init(
            database: database, keys: keys, pinnedPhoneVerifyKeys: pinnedPhoneVerifyKeys, configuration: configuration,
            clock: clock, random: SystemRandom(), logger: logger, metrics: metrics)
    }

    /// The same, with `random` for codes, IDs and keys (`@_spi(Testing)`: tests make them deterministic).
    @_spi(Testing)
    public init(
        database: any SQLDatabase, keys: ServiceKeys, pinnedPhoneVerifyKeys: [HybridSignature.PublicKey],
        configuration: Configuration = .init(), clock: PixieClock = .system,
        random: any SecureRandomSource, logger: Logger, metrics: Metrics
    ) throws(ServerError) {
        do {
            try database.migrate(component: "credential", migrations: TokenIssuance.migrations)
        } catch {
            throw ServerError(.storage, "credential's tables could not be migrated: \(error)")
        }
        self.database = database
        self.keys = keys
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        self.metrics = metrics
        // Sessions live in identity-svc's tables; credential-svc reads them from the shared store.
        self.sessions = Sessions(database: database, clock: clock, random: random, lifetime: 0, logger: logger)
        let issuer = TokenIssuer(
            privateKey: keys.tokenOPRF, maximumBatchSize: TokenIssuance.Configuration.sessionBatchLimit)
        let uploadIssuer = TokenIssuer(
            privateKey: keys.tokenUploadOPRF, maximumBatchSize: TokenIssuance.Configuration.uploadBatchLimit)
        var tokenSettings = TokenIssuance.Configuration()
        tokenSettings.approvalTokensPerHour = configuration.approvalTokensPerHour
        tokenSettings.accountTokensPerHour = configuration.accountTokensPerHour
        do {
            self.tokens = TokenIssuance(
                issuer: issuer, keyList: try TokenIssuance.keyList(for: issuer.publicKey),
                uploadIssuer: uploadIssuer, uploadKeyList: try TokenIssuance.keyList(for: uploadIssuer.publicKey),
                database: database,
                certificates: pinnedPhoneVerifyKeys.isEmpty
                    ? nil : PhoneOwnershipCert.Verifier(pinnedKeys: pinnedPhoneVerifyKeys),
                sessions: sessions, configuration: tokenSettings, clock: clock, logger: logger, metrics: metrics)
        } catch {
            throw ServerError(.configuration, "the OPRF key list could not be built: \(error)")
        }
        self.spender = CredentialTokenSpender(issuers: [issuer], database: database, clock: clock, logger: logger)
        self.uploadSpender = CredentialTokenSpender(
            issuers: [uploadIssuer], database: database, clock: clock, logger: logger)
        if pinnedPhoneVerifyKeys.isEmpty {
            logger.warning("no phone-verify key is pinned: the pre-session token mint will refuse")
        }
        metrics.describe("pixie_credential_sender_certs_total", type: "counter", help: "SenderCerts issued.")
        metrics.describe("pixie_credential_tokens_minted_total", type: "counter", help: "Tokens minted, by kind.")
        metrics.describe(
            "pixie_credential_tokens_refused_total", type: "counter", help: "Token mints refused, by reason.")
    }

    public func addRoutes(to router: inout Router) {
        router.on(PixieAPI.senderCert) { request, _ in try senderCert(request) }
        tokens.addRoutes(to: &router)
    }

    /// Logs the served OPRF key list (label `oprf-keys`) unless the log holds it already; run at start-up.
    public func publishKeyList(to log: Sequencer) async throws { try await tokens.publishKeyList(to: log) }

    func senderCert(_ request: HTTPRequest) throws -> HTTPResponse {
        let session = try sessions.authenticate(request)
        let deviceKey = try store(logger) {
            try database.queryOne(
                "SELECT pubkey FROM devices WHERE device_id = ? AND removed_at IS NULL", [.text(session.deviceID)]
            )?.data("pubkey")
        }
        guard let deviceKey else { throw Sessions.unauthorized("this device is not in the roster") }
        let now = clock.now()
        let cert = try SenderCert(
            userIDHash: SenderCert.computeUserIDHash(session.accountID), deviceKey: deviceKey, issuedAt: now,
            expiresAt: min(now.addingTimeInterval(configuration.senderCertLifetime), session.expiresAt),
            signedBy: keys.senderCert)
        metrics.increment("pixie_credential_sender_certs_total")
        return try .json(
            CredentialAPI.SenderCertResponse(
                senderCert: Base64URLBytes(cert.rawRepresentation), expiresAt: cert.expiresAt.unixSeconds))
    }
}
