import Foundation
import HTTPServer
import PixieWire
import SiblingsCrypto
import Storage
import Transparency
// The relying party's challenges come from the injected source, which tests make deterministic.
import TransparencyLog
@_spi(Testing) import WebAuthn

/// identity-svc (000_e422bd9a7c930342.txt): accounts and the device roster (server-authoritative), the
/// discovery directory, device grants, passkey enrollment and sign-in, sessions, and the siblings list.
///
/// It holds nothing that admits a device by itself: a device joins an existing account only with a grant
/// that an enrolled device minted (`POST /v1/auth/devices/grant`), and the account's keys travel between
/// devices in boxes this service cannot open. Endpoints and bodies: docs/openapi.yaml; the flows:
/// docs/pixie-protocol.md.
public struct IdentityService: Sendable {
    public struct Configuration: Sendable {
        /// The WebAuthn relying party id (a registrable domain the app's passkeys are bound to).
        public var relyingPartyID = "localhost"
        /// The origins a passkey's clientDataJSON may name.
        public var allowedOrigins: Set<String> = ["https://localhost"]
        /// Whether a passkey must report user verification (biometrics or a PIN).
        public var requireUserVerification = false
        /// A device grant's lifetime: the seed's three minutes.
        public var grantLifetime: TimeInterval = 180
        /// How long a passkey challenge may wait for its answer.
        public var challengeLifetime: TimeInterval = 300
        public var sessionLifetime: TimeInterval = 30 * 86_400
        /// Wrong six-digit grant codes an account may see before its live codes are void.
        public var codeAttemptsAllowed = 5
        public var clientRequestsPerMinute = 60

        public init() {}
    }

    static let component = "identity"
    static let migrations = [
        Migration(
            version: 1,
            sql: """
                CREATE TABLE accounts (
                    account_id TEXT PRIMARY KEY,
                    phone_id BLOB NOT NULL UNIQUE,
                    kt_handle TEXT NOT NULL UNIQUE,
                    kt_dirty BIGINT NOT NULL DEFAULT 1,
                    account_signing_pubkey BLOB NOT NULL,
                    created_at BIGINT NOT NULL
                );
                CREATE TABLE discovery (
                    phone_id BLOB PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts (account_id),
                    discovery_inbox BLOB NOT NULL UNIQUE,
                    discovery_xwing_pubkey BLOB NOT NULL,
                    updated_at BIGINT NOT NULL
                );
                CREATE TABLE devices (
                    device_id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts (account_id),
                    pubkey BLOB NOT NULL UNIQUE,
                    name TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    removed_at BIGINT
                );
                CREATE INDEX devices_by_account ON devices (account_id);
                CREATE TABLE passkeys (
                    credential_id BLOB PRIMARY KEY,
                    device_id TEXT NOT NULL REFERENCES devices (device_id),
                    account_id TEXT NOT NULL REFERENCES accounts (account_id),
                    public_key BLOB NOT NULL,
                    sign_count BIGINT NOT NULL,
                    backup_eligible BIGINT NOT NULL,
                    created_at BIGINT NOT NULL
                );
                CREATE TABLE webauthn_challenges (
                    challenge_id TEXT PRIMARY KEY,
                    challenge BLOB NOT NULL,
                    purpose TEXT NOT NULL,
                    expires_at BIGINT NOT NULL
                );
                CREATE TABLE recovery_grants (
                    grant_hash BLOB PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts (account_id),
                    issued_by TEXT NOT NULL REFERENCES devices (device_id),
                    kind TEXT NOT NULL CHECK (kind IN ('token', 'code')),
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT,
                    failed_attempts BIGINT NOT NULL DEFAULT 0
                );
                CREATE INDEX recovery_grants_by_account ON recovery_grants (account_id, kind);
                """ + Sessions.migration),
        // Issue 15: a grant records what it may do when it is minted. Grants live three minutes, so the few
        // in flight at the upgrade become `add`, the path every grant minted before it was meant for.
        Migration(
            version: 2,
            sql: """
                ALTER TABLE recovery_grants ADD COLUMN scope TEXT NOT NULL DEFAULT 'add'
                    CHECK (scope IN ('add', 'replace_all'));
                """),
        // Issue 15: each device registers its relay inbox and its X-Wing sealing key, and the roster commitment
        // (version 2) covers them. Devices enrolled before have neither; every account is marked owed to the
        // log, so the start-up reconciliation logs its roster again under version 2.
        Migration(
            version: 3,
            sql: """
                ALTER TABLE devices ADD COLUMN inbox BLOB;
                ALTER TABLE devices ADD COLUMN sealing_key BLOB;
                UPDATE accounts SET kt_dirty = kt_dirty + 1;
                """),
        // Issue 16: the discovery binding (version 2) names the account's KT handle, so a new device takes an
        // approval only for the account the log binds its number to; every account is logged again.
        Migration(version: 4, sql: "UPDATE accounts SET kt_dirty = kt_dirty + 1;"),
        // Issue 37: a device may enroll with its family ("iPhone"), which the siblings list carries beside its
        // name. Neither is logged: they label devices for people.
        Migration(version: 5, sql: "ALTER TABLE devices ADD COLUMN family TEXT;"),
        // Issue 41: `pixie devices` shows who added each device (the device whose grant enrolled it) and when each
        // was last seen (a session request, recorded at most once a minute). Devices enrolled before have neither.
        Migration(
            version: 6,
            sql: """
                ALTER TABLE devices ADD COLUMN added_by TEXT;
                ALTER TABLE devices ADD COLUMN last_seen_at BIGINT;
                """),
        // Issue 41: removing one device rotates the account (docs/pixie-protocol.md, "Revoking a device"). The
        // account's epoch is the version of `account/<kt_handle>` in the log (1 for every account so far); each
        // rotation keeps its statement, and each device that stays its sealed bundle, until it fetches them. A
        // `remove_device` challenge names the device it may remove.
        Migration(
            version: 7,
            sql: """
                ALTER TABLE webauthn_challenges ADD COLUMN device_id TEXT;
                ALTER TABLE accounts ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1;
                ALTER TABLE devices ADD COLUMN removed_by TEXT;
                CREATE TABLE account_rotations (
                    account_id TEXT NOT NULL REFERENCES accounts (account_id),
                    epoch BIGINT NOT NULL,
                    statement BLOB NOT NULL,
                    remover TEXT NOT NULL,
                    removed TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (account_id, epoch)
                );
                CREATE TABLE rotation_bundles (
                    device_id TEXT NOT NULL REFERENCES devices (device_id),
                    epoch BIGINT NOT NULL,
                    bundle BLOB NOT NULL,
                    PRIMARY KEY (device_id, epoch)
                );
                """),
    ]

    let database: any SQLDatabase
    let certificates: PhoneOwnershipCert.Verifier?
    let configuration: Configuration
    let clock: PixieClock
    let random: any SecureRandomSource
    let logger: Logger
    let metrics: Metrics
    let sessions: Sessions
    let relyingParty: WebAuthnRelyingParty
    let clientLimiter: RateLimiter
    let transparency: KeyTransparency
    /// Where a removal ends the relay subscriptions of the subjects it takes away (the removed device's inbox and
    /// the rotated discovery inbox), on every node the bus reaches.
    let relay: (any RelayBus)?

    /// `pinnedPhoneVerifyKeys` are the phone-verify keys certificates are checked against; with none, every
    /// endpoint that takes a PhoneOwnershipCert refuses (503 `phone_verify_key_not_pinned`), never skips.
    /// `log` is the transparency log every binding is appended to before it is served.
    public init(
        database: any SQLDatabase, pinnedPhoneVerifyKeys: [HybridSignature.PublicKey], log: Sequencer,
        configuration: Configuration = .init(), clock: PixieClock = .system, relay: (any RelayBus)? = nil,
        logger: Logger, metrics: Metrics
    ) throws(ServerError) {
        try self.init(
            database: database, pinnedPhoneVerifyKeys: pinnedPhoneVerifyKeys, log: log, configuration: configuration,
            clock: clock, random: SystemRandom(), relay: relay, logger: logger, metrics: metrics)
    }

    /// The same, with `random` for codes, IDs and keys (`@_spi(Testing)`: tests make them deterministic).
    @_spi(Testing)
    public init(
        database: any SQLDatabase, pinnedPhoneVerifyKeys: [HybridSignature.PublicKey], log: Sequencer,
        configuration: Configuration = .init(), clock: PixieClock = .system,
        random: any SecureRandomSource, relay: (any RelayBus)? = nil, logger: Logger, metrics: Metrics
    ) throws(ServerError) {
        do {
            try database.migrate(component: Self.component, migrations: Self.migrations)
        } catch {
            throw ServerError(.storage, "identity's tables could not be migrated: \(error)")
        }
        self.database = database
        self.certificates =
            pinnedPhoneVerifyKeys.isEmpty ? nil : PhoneOwnershipCert.Verifier(pinnedKeys: pinnedPhoneVerifyKeys)
        self.configuration = configuration
        self.clock = clock
        self.random = random
        self.relay = relay
        self.logger = logger
        self.metrics = metrics
        self.sessions = Sessions(
            database: database, clock: clock, random: random, lifetime: configuration.sessionLifetime,
            logger: logger)
        self.relyingParty = WebAuthnRelyingParty(
            rpID: configuration.relyingPartyID, allowedOrigins: configuration.allowedOrigins,
            requiresUserVerification: configuration.requireUserVerification, random: random)
        self.clientLimiter = RateLimiter(capacity: configuration.clientRequestsPerMinute, per: 60, clock: clock)
        self.transparency = KeyTransparency(sequencer: log, database: database, logger: logger)
        if certificates == nil {
            logger.warning(
                "no phone-verify key is pinned: account creation, discovery lookups and code grants will refuse")
        }
        metrics.describe("pixie_identity_events_total", type: "counter", help: "identity-svc events, by kind.")
    }

    public func addRoutes(to router: inout Router) {
        router.on(PixieAPI.passkeyChallenge) { request, _ in try passkeyChallenge(request) }
        router.on(PixieAPI.createAccount) { request, _ in try await createAccount(request) }
        router.on(PixieAPI.lookupOwnDiscovery) { request, _ in try await lookupOwnDiscovery(request) }
        router.on(PixieAPI.mintGrant) { request, _ in try mintGrant(request) }
        router.on(PixieAPI.registerWithGrant) { request, _ in try await registerWithGrant(request) }
        router.on(PixieAPI.passkeyLogin) { request, _ in try passkeyLogin(request) }
        router.on(PixieAPI.revokeSession) { request, _ in
            try clientLimiter.admit(request)
            try sessions.revoke(request)
            return HTTPResponse(status: .noContent)
        }
        router.on(PixieAPI.siblings) { request, _ in try await siblings(request) }
        router.on(PixieAPI.removeDevice) { request, _ in try await removeDevice(request) }
        router.on(PixieAPI.rotations) { request, _ in try rotations(request) }
        transparency.addRoutes(to: &router)
    }

    /// Logs the bindings a crash left unlogged (between a commit and its append); run once at start-up.
    public func reconcileTransparency() async throws -> Int { try await transparency.reconcile() }

    /// Logs, every `interval` until the task is cancelled, the bindings a change committed while the log was away
    /// (a removal answered 503 `transparency_unavailable` stands, and its rotation is owed to the log): the devices
    /// that stay take their new keys only once the log shows them, so an owed rotation must not wait for the
    /// account's next change or the next start. One query when nothing is owed. A failure is logged once per
    /// outage and retried at the next interval.
    public func runTransparencyRetry(every interval: Duration) async {
        var failing = false
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            do {
                _ = try await transparency.reconcile()
                if failing { logger.info("the bindings owed to the transparency log are logged") }
                failing = false
            } catch {
                if !failing {
                    logger.warning(
                        "bindings owed to the transparency log could not be logged; retrying",
                        ["error": "\(error)", "every_s": interval.components.seconds])
                }
                failing = true
            }
        }
    }

    // MARK: - Passkey challenges

    func passkeyChallenge(_ request: HTTPRequest) throws -> HTTPResponse {
        let body = try request.decode(as: IdentityAPI.ChallengeRequest.self)
        try clientLimiter.admit(request)
        switch (body.purpose, body.deviceID) {
        case (.removeDevice, nil):
            throw HTTPError(
                .badRequest, .invalidField, "a remove_device challenge names the device to remove: send device_id")
        case (.removeDevice, _?), (_, nil): break
        case (_, _?):
            throw HTTPError(.badRequest, .invalidField, "device_id goes only with purpose remove_device")
        }
        let challengeID = random.bytes(count: 16).base64URLEncodedString()
        let challenge = random.bytes(count: 32)
        let expiresAt = clock.now().unixSeconds + Int64(configuration.challengeLifetime)
        _ = try store(logger) {
            // Expired challenges are swept as new ones are made, so the table stays small.
            _ = try database.execute(
                "DELETE FROM webauthn_challenges WHERE expires_at <= ?", [.integer(clock.now().unixSeconds)])
            return try database.execute(
                "INSERT INTO webauthn_challenges (challenge_id, challenge, purpose, device_id, expires_at) "
                    + "VALUES (?, ?, ?, ?, ?)",
                [
                    .text(challengeID), .blob(challenge), .text(body.purpose.rawValue),
                    body.deviceID.map { .text($0) } ?? .null, .integer(expiresAt),
                ])
        }
        return try .json(
            IdentityAPI.ChallengeResponse(
                challengeID: challengeID, challenge: Base64URLBytes(challenge), rpID: configuration.relyingPartyID,
                expiresAt: expiresAt), status: .created)
    }

    /// Takes the challenge `id` for `purpose` (and, for `remove_device`, naming `deviceID`) out of the store and
    /// returns its bytes. The removal is committed on its own, before the caller's transaction, so a challenge is
    /// used up by the first request that names it, whatever the outcome: a refusal that rolls the caller's
    /// transaction back does not bring it back.
    func consumeChallenge(
        _ id: String, purpose: IdentityAPI.PasskeyPurpose, naming deviceID: String? = nil
    ) throws -> Data {
        let taken = try store(logger) {
            try database.transaction {
                transaction -> (challenge: Data, purpose: String, deviceID: String?, expiresAt: Int64)? in
                guard
                    let row = try transaction.queryOne(
                        "SELECT challenge, purpose, device_id, expires_at FROM webauthn_challenges "
                            + "WHERE challenge_id = ?", [.text(id)])
                else { return nil }
                _ = try transaction.execute("DELETE FROM webauthn_challenges WHERE challenge_id = ?", [.text(id)])
                return (
                    try row.data("challenge"), try row.string("purpose"), try row.optionalString("device_id"),
                    try row.int64("expires_at")
                )
            }
        }
        guard let taken else {
            throw HTTPError(
                .badRequest, .challengeInvalid, "the passkey challenge is unknown or already used; ask for a new one")
        }
        guard taken.purpose == purpose.rawValue else {
            throw HTTPError(.badRequest, .challengeInvalid, "the passkey challenge was made for another purpose")
        }
        guard taken.deviceID == deviceID else {
            throw HTTPError(
                .badRequest, .challengeInvalid,
                "the passkey challenge names another device than the one to remove; ask for one naming it")
        }
        guard taken.expiresAt > clock.now().unixSeconds else {
            throw HTTPError(.badRequest, .challengeInvalid, "the passkey challenge has expired; ask for a new one")
        }
        return taken.challenge
    }

    // MARK: - Accounts

    func createAccount(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decode(as: IdentityAPI.CreateAccountRequest.self)
        try clientLimiter.admit(request)
        let cert = try verify(body.phoneCert)
        guard body.discoveryInbox.data.count == 32 else {
            throw HTTPError(.badRequest, .invalidField, "discovery_inbox is a 32-byte relay subject")
        }
        guard (try? XWing.PublicKey(rawRepresentation: body.discoveryXWingPubkey.data)) != nil else {
            throw HTTPError(
                .badRequest, .invalidField,
                "discovery_xwing_pubkey is not a \(XWing.publicKeyByteCount)-byte X-Wing public key")
        }
        guard (try? HybridSignature.PublicKey(rawRepresentation: body.accountSigningPubkey.data)) != nil else {
            throw HTTPError(
                .badRequest, .invalidField,
                "account_signing_pubkey is not a \(HybridSignature.publicKeyByteCount)-byte hybrid public key")
        }
        try validate(body.device)
        let accountID = random.bytes(count: 16).base64URLEncodedString()
        let ktHandle = random.bytes(count: 16).base64URLEncodedString()
        let deviceID = random.bytes(count: 16).base64URLEncodedString()
        let now = clock.now().unixSeconds
        let challenge = try consumeChallenge(body.passkey.challengeID, purpose: .register)
        var response = try store(logger) {
            try database.transaction { transaction in
                let credential = try verifyRegistration(body.passkey.credential, challenge: challenge)
                if try transaction.queryOne("SELECT 1 AS x FROM accounts WHERE phone_id = ?", [.blob(cert.phoneID)])
                    != nil
                {
                    throw HTTPError(
                        .conflict, .accountExists,
                        "this number already has an account; add this device from one of its devices instead")
                }
                try insertUnique(
                    transaction,
                    "INSERT INTO accounts (account_id, phone_id, kt_handle, account_signing_pubkey, created_at) "
                        + "VALUES (?, ?, ?, ?, ?)",
                    [
                        .text(accountID), .blob(cert.phoneID), .text(ktHandle), .blob(body.accountSigningPubkey.data),
                        .integer(now),
                    ],
                    conflict: "this number already has an account")
                try insertUnique(
                    transaction,
                    "INSERT INTO discovery (phone_id, account_id, discovery_inbox, discovery_xwing_pubkey, updated_at) "
                        + "VALUES (?, ?, ?, ?, ?)",
                    [
                        .blob(cert.phoneID), .text(accountID), .blob(body.discoveryInbox.data),
                        .blob(body.discoveryXWingPubkey.data), .integer(now),
                    ], conflict: "this discovery_inbox is already in use; choose a fresh random one")
                try enroll(
                    device: body.device, deviceID: deviceID, accountID: accountID, credential: credential,
                    addedBy: nil, in: transaction)
                let (token, expiresAt) = try sessions.create(
                    accountID: accountID, deviceID: deviceID, in: transaction)
                return IdentityAPI.EnrolledResponse(
                    accountID: accountID, deviceID: deviceID, sessionToken: token,
                    sessionExpiresAt: expiresAt.unixSeconds)
            }
        }
        do {
            try await transparency.publish(accountID: accountID)
        } catch {
            // Nothing is served that cannot be proven: the account is taken back, and the device may retry.
            logger.error("an account's bindings could not be logged; removing it", ["error": "\(error)"])
            do {
                try database.transaction { transaction in
                    for table in ["sessions", "passkeys", "devices", "discovery", "accounts"] {
                        try transaction.execute("DELETE FROM \(table) WHERE account_id = ?", [.text(accountID)])
                    }
                }
            } catch {
                // The account stays, still owed to the log (kt_dirty): nothing of it is served until it is logged
                // (requireLogged), and the start-up reconciliation logs it.
                event("account_rollback_failed")
                logger.error(
                    "an unlogged account could not be removed; it is served only once logged",
                    ["account": accountID, "error": "\(error)"])
            }
            throw HTTPError(
                .serviceUnavailable, .transparencyUnavailable,
                "the transparency log is unavailable, so the account was not created; try again shortly")
        }
        response.ktHandle = ktHandle
        event("account_created")
        return try .json(response, status: .created)
    }

    // MARK: - Discovery

    /// lookup_own_discovery: the cert's phone_id is the only lookup key; no parameter can point elsewhere.
    func lookupOwnDiscovery(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decode(as: IdentityAPI.DiscoveryRequest.self)
        let cert = try verify(body.phoneCert)
        // The cert's number alone names the account: nothing else in the body is read.
        let row = try store(logger) {
            try database.queryOne(
                "SELECT d.discovery_inbox, d.discovery_xwing_pubkey, a.account_id, a.kt_dirty FROM discovery d "
                    + "JOIN accounts a ON a.account_id = d.account_id WHERE d.phone_id = ?",
                [.blob(cert.phoneID)])
        }
        guard let row else {
            throw HTTPError(
                .notFound, .noAccount, "no account is registered for this number; create one from this device")
        }
        try await requireLogged(
            try store(logger) { (try row.string("account_id"), try row.int64("kt_dirty")) })
        event("discovery_lookup")
        return try .json(
            try store(logger) {
                IdentityAPI.DiscoveryResponse(
                    discoveryInbox: Base64URLBytes(try row.data("discovery_inbox")),
                    discoveryXWingPubkey: Base64URLBytes(try row.data("discovery_xwing_pubkey")))
            })
    }

    // MARK: - Passkey sign-in

    func passkeyLogin(_ request: HTTPRequest) throws -> HTTPResponse {
        let body = try request.decode(as: IdentityAPI.PasskeyAssertion.self)
        try clientLimiter.admit(request)
        let challenge = try consumeChallenge(body.challengeID, purpose: .login)
        let response = try store(logger) {
            try database.transaction { transaction in
                let (accountID, deviceID) = try verifyAssertion(
                    body.credential, challenge: challenge, of: nil, in: transaction)
                let (token, expiresAt) = try sessions.create(
                    accountID: accountID, deviceID: deviceID, in: transaction)
                return IdentityAPI.EnrolledResponse(
                    accountID: accountID, deviceID: deviceID, sessionToken: token,
                    sessionExpiresAt: expiresAt.unixSeconds)
            }
        }
        event("passkey_login")
        return try .json(response)
    }

    /// Checks a passkey assertion over `challenge` against the passkey it names (of device `deviceID` only,
    /// when given) and records its new signature count; returns the passkey's account and device. A passkey
    /// unknown, of a removed device or of another device is a 401.
    /// With `userVerified`, the assertion must also carry user verification (UV), whatever the relying party's
    /// setting for logins.
    @discardableResult
    func verifyAssertion(
        _ credential: AuthenticationResponseJSON, challenge: Data, of deviceID: String?, userVerified: Bool = false,
        in transaction: any SQLTransaction
    ) throws -> (accountID: String, deviceID: String) {
        guard let credentialID = Data(base64URLEncoded: credential.rawId),
            let row = try transaction.queryOne(
                "SELECT p.device_id, p.account_id, p.public_key, p.sign_count, p.backup_eligible, d.removed_at "
                    + "FROM passkeys p "
                    + "JOIN devices d ON d.device_id = p.device_id WHERE p.credential_id = ?",
                [.blob(credentialID)])
        else {
            throw HTTPError(.unauthorized, .unauthorized, "this passkey is not registered")
        }
        guard try row.optionalInt64("removed_at") == nil else {
            throw HTTPError(.unauthorized, .unauthorized, "this device was removed from the account")
        }
        if let deviceID, try row.string("device_id") != deviceID {
            throw HTTPError(.unauthorized, .passkeyInvalid, "the passkey is not this device's; use its own")
        }
        let storedCount = UInt32(clamping: try row.int64("sign_count"))
        let verified: VerifiedAssertion
        do {
            let stored = RegisteredCredential(
                credentialID: credentialID,
                publicKey: try COSEKey(cborRepresentation: try row.data("public_key")),
                signCount: storedCount, backupEligible: try row.bool("backup_eligible"))
            verified = try relyingParty.verifyAssertion(
                credential, expectedChallenge: challenge, credential: stored, storedSignCount: storedCount)
        } catch let error as WebAuthnError {
            if error.code == .possibleClonedAuthenticator {
                logger.warning("a passkey's signature counter went backwards", ["device": try row.string("device_id")])
            }
            throw HTTPError(.unauthorized, .passkeyInvalid, error.reason)
        }
        if userVerified, !verified.userVerified {
            throw HTTPError(
                .forbidden, .userVerificationRequired,
                "this needs the person at the device: the passkey assertion must carry user verification (unlock it "
                    + "with a biometric or the device's PIN)")
        }
        _ = try transaction.execute(
            "UPDATE passkeys SET sign_count = ? WHERE credential_id = ?",
            [.integer(Int64(verified.newSignCount)), .blob(credentialID)])
        return (try row.string("account_id"), try row.string("device_id"))
    }

    /// Serves an account's bindings only once the log holds them: an account whose last change is still owed
    /// to the log (`kt_dirty`) is published first, and while the log is unavailable the answer is 503
    /// `transparency_unavailable`, so nothing is handed out that a device could not prove.
    func requireLogged(_ account: (id: String, dirty: Int64)) async throws {
        guard account.dirty > 0 else { return }
        do {
            try await transparency.publish(accountID: account.id)
        } catch {
            logger.error("an account's bindings are owed to the log, which is unavailable", ["error": "\(error)"])
            throw HTTPError(
                .serviceUnavailable, .transparencyUnavailable,
                "the transparency log is unavailable, so this account's keys cannot be proven; try again shortly")
        }
    }

    // MARK: - Siblings

    /// GET /v1/sync/siblings: the roster of the session's account (the caller included; the device filters
    /// its own pubkey out). The account comes from the session only.
    func siblings(_ request: HTTPRequest) async throws -> HTTPResponse {
        let session = try sessions.authenticate(request)
        let dirty = try store(logger) {
            try database.queryOne("SELECT kt_dirty FROM accounts WHERE account_id = ?", [.text(session.accountID)])?
                .int64("kt_dirty") ?? 0
        }
        try await requireLogged((session.accountID, dirty))
        let devices = try store(logger) {
            try database.query(
                "SELECT device_id, pubkey, inbox, sealing_key, name, family, created_at, added_by, last_seen_at "
                    + "FROM devices WHERE account_id = ? AND removed_at IS NULL ORDER BY created_at, device_id",
                [.text(session.accountID)]
            ).map { row in
                IdentityAPI.SiblingsResponse.Device(
                    deviceID: try row.string("device_id"), pubkey: Base64URLBytes(try row.data("pubkey")),
                    inbox: try row.optionalData("inbox").map(Base64URLBytes.init),
                    sealingKey: try row.optionalData("sealing_key").map(Base64URLBytes.init),
                    name: try row.string("name"), family: try row.optionalString("family"),
                    addedAt: try row.int64("created_at"), addedBy: try row.optionalString("added_by"),
                    lastSeenAt: try row.optionalInt64("last_seen_at"))
            }
        }
        return try .json(IdentityAPI.SiblingsResponse(devices: devices))
    }

    // MARK: - Pieces

    func verify(_ cert: Base64URLBytes) throws(HTTPError) -> PhoneOwnershipCert {
        guard let certificates else {
            throw HTTPError(
                .serviceUnavailable, .phoneVerifyKeyNotPinned,
                "this server has no pinned phone-verify key, so it cannot check PhoneOwnershipCerts and refuses; "
                    + "the operator must configure one")
        }
        do {
            return try certificates.verify(cert.data, now: clock.now())
        } catch {
            event("cert_refused")
            throw HTTPError(.unauthorized, .phoneCertInvalid, error.reason)
        }
    }

    func verifyRegistration(
        _ credential: RegistrationResponseJSON, challenge: Data
    ) throws(HTTPError)
        -> RegisteredCredential
    {
        do {
            return try relyingParty.verifyRegistration(credential, expectedChallenge: challenge)
        } catch let error as WebAuthnError {
            throw HTTPError(.badRequest, .passkeyInvalid, error.reason)
        } catch {
            throw HTTPError(.badRequest, .passkeyInvalid, "the passkey registration does not verify")
        }
    }

    func validate(_ device: IdentityAPI.DeviceFields) throws(HTTPError) {
        guard (32...4096).contains(device.pubkey.data.count) else {
            throw HTTPError(.badRequest, .invalidField, "device.pubkey must be 32 to 4096 bytes")
        }
        guard isDisplayableName(device.name) else {
            throw HTTPError(
                .badRequest, .invalidField,
                "device.name must be 1 to 64 bytes of UTF-8 without control, line-separator or bidirectional "
                    + "formatting characters")
        }
        if let family = device.family, !isDisplayableName(family) {
            throw HTTPError(
                .badRequest, .invalidField,
                "device.family must be 1 to 64 bytes of UTF-8 without control, line-separator or bidirectional "
                    + "formatting characters")
        }
        guard device.inbox.data.count == RelaySubject.byteCount else {
            throw HTTPError(
                .badRequest, .invalidField, "device.inbox must be the 32-byte relay subject this device listens on")
        }
        guard (try? XWing.PublicKey(rawRepresentation: device.sealingKey.data)) != nil else {
            throw HTTPError(
                .badRequest, .invalidField,
                "device.sealing_key must be this device's X-Wing public key (1216 bytes), which its siblings seal to")
        }
    }

    /// Enrolls a device; `addedBy` is the device whose grant let it in (nil for an account's first device).
    func enroll(
        device: IdentityAPI.DeviceFields, deviceID: String, accountID: String, credential: RegisteredCredential,
        addedBy: String?, in transaction: any SQLTransaction
    ) throws {
        let now = clock.now().unixSeconds
        try insertUnique(
            transaction,
            "INSERT INTO devices (device_id, account_id, pubkey, name, family, inbox, sealing_key, created_at, "
                + "added_by, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .text(deviceID), .text(accountID), .blob(device.pubkey.data), .text(device.name),
                device.family.map(SQLValue.text) ?? .null, .blob(device.inbox.data), .blob(device.sealingKey.data),
                .integer(now), addedBy.map(SQLValue.text) ?? .null, .integer(now),
            ],
            conflict: "this device pubkey is already enrolled; a device joins once")
        try insertUnique(
            transaction,
            "INSERT INTO passkeys (credential_id, device_id, account_id, public_key, sign_count, backup_eligible, "
                + "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                .blob(credential.credentialID), .text(deviceID), .text(accountID),
                .blob(credential.publicKey.cborRepresentation), .integer(Int64(credential.signCount)),
                .integer(credential.backupEligible ? 1 : 0), .integer(now),
            ], conflict: "this passkey is already registered")
    }

    /// An insert whose unique-constraint failure is the client's mistake (409), not the store's.
    func insertUnique(
        _ transaction: any SQLTransaction, _ sql: String, _ parameters: [SQLValue], conflict: String
    ) throws {
        do {
            _ = try transaction.execute(sql, parameters)
        } catch let error as StorageError where error.code == .constraint {
            throw HTTPError(.conflict, .conflict, conflict)
        }
    }

    func event(_ kind: String) { metrics.increment("pixie_identity_events_total", labels: ["kind": kind]) }
}

extension HTTPError.Code {
    static let invalidField = HTTPError.Code("invalid_field")
    static let conflict = HTTPError.Code("conflict")
    static let accountExists = HTTPError.Code("account_exists")
    static let noAccount = HTTPError.Code("no_account")
    static let phoneCertInvalid = HTTPError.Code("phone_cert_invalid")
    static let phoneVerifyKeyNotPinned = HTTPError.Code("phone_verify_key_not_pinned")
    static let challengeInvalid = HTTPError.Code("challenge_invalid")
    static let passkeyInvalid = HTTPError.Code("passkey_invalid")
    static let grantInvalid = HTTPError.Code("grant_invalid")
    static let grantUsed = HTTPError.Code("grant_used")
    static let grantExpired = HTTPError.Code("grant_expired")
    /// revoke_others with a grant minted to add a device.
    static let grantScope = HTTPError.Code("grant_scope")
    /// A replace_all grant asked for without a passkey assertion.
    static let passkeyRequired = HTTPError.Code("passkey_required")
    /// A remove_device assertion without user verification.
    static let userVerificationRequired = HTTPError.Code("user_verification_required")
}
