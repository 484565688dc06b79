import Foundation
import HTTPServer
import PixieWire
import PrivacyPass
import SiblingsCrypto
import Storage
import StoragePostgreSQL
import Synchronization
import Transparency
import TransparencyLog
import WebSockets

/// The `pixie-server` process: the configured services on one router, one store and one HTTP listener,
/// plus `/healthz` and `/metrics`.
///
/// Everything a test needs to replace is injected: the store, the clock, the randomness, the SMS sender and the
/// rate-limit token spender.
public struct Application: Sendable {
    public let configuration: PixieConfiguration
    public let keys: ServiceKeys
    public let database: any SQLDatabase
    public let logger: Logger
    public let metrics: Metrics
    public let router: Router
    /// The transparency log, when identity-svc runs here.
    public let log: Sequencer?
    let identity: IdentityService?
    /// credential-svc, when it runs here; its ``CredentialService/spender`` spends the tokens it issues.
    public let credential: CredentialService?
    /// blob-svc, when it runs here (its sweeper runs with ``run()``).
    public let blob: BlobService?

    /// Opens (or creates) the data directory's store and keys and builds the router.
    public static func open(configuration: PixieConfiguration, logger: Logger) throws(ServerError) -> Application {
        let root = URL(fileURLWithPath: configuration.dataDirectory, isDirectory: true)
        let keys = try ServiceKeys.loadOrCreate(in: root.appendingPathComponent("keys"), logger: logger)
        let database: any SQLDatabase
        if let url = configuration.databaseURL {
            do {
                database = try PostgreSQLDatabase(url: url)
            } catch let error as StorageError {
                throw ServerError(.storage, "cannot open the store: \(error.reason)")
            } catch {
                throw ServerError(.storage, "cannot open the store: \(error)")
            }
        } else {
            do {
                database = try SQLiteDatabase(path: root.appendingPathComponent("pixie.sqlite").path)
            } catch {
                throw ServerError(.storage, "cannot open the store in \(root.path): \(error)")
            }
        }
        if configuration.smsWebhookURL != nil, configuration.services.contains(.phoneVerify),
            configuration.webhookTimeout >= configuration.requestTimeout
        {
            logger.warning(
                "webhook_timeout is not below request_timeout: a stalled SMS gateway makes start requests 503 timeout, "
                    + "not 502 sms_failed",
                [
                    "webhook_timeout": Int(configuration.webhookTimeout),
                    "request_timeout": Int(configuration.requestTimeout),
                ])
        }
        let sms: any SMSSender =
            configuration.smsWebhookURL.map {
                WebhookSMSSender(
                    url: $0, bearerSecret: configuration.smsWebhookSecret, timeout: configuration.webhookTimeout)
            }
            ?? DevelopmentSMSSink(
                outbox: root.appendingPathComponent("sms-outbox.jsonl"), logger: logger.named("phone-verify"))
        let push: any PushGateway =
            configuration.relayPushWebhookURL.map {
                WebhookPushGateway(
                    url: $0, bearerSecret: configuration.relayPushWebhookSecret, timeout: configuration.webhookTimeout)
            } ?? RecordingPushGateway(logger: logger.named("relay"))
        var bus: any RelayBus = InProcessRelayBus()
        // identity-svc publishes on the bus too (a removal ends the removed device's subscriptions on every relay
        // node), so a node that runs it without the relay still opens the shared bus.
        if let url = configuration.relayNATSURL,
            configuration.services.contains(.relay) || configuration.services.contains(.identity)
        {
            do {
                bus = try NATSRelayBus(url: url)
            } catch {
                throw ServerError(.configuration, "cannot open the relay bus: \(error)")
            }
        }
        return try Application(
            configuration: configuration, keys: keys, database: database, sms: sms, logger: logger, push: push,
            bus: bus)
    }

    /// `tokens` is the ``TokenSpender`` of blob-svc and the relay; nil means credential-svc's (or, for the relay,
    /// the development-only one when `relay_tokens=insecure-dev`). `push` is the relay's ``PushGateway``
    /// (default: record and log).
    public init(
        configuration: PixieConfiguration, keys: ServiceKeys, database: any SQLDatabase, sms: any SMSSender,
        clock: PixieClock = .system, logger: Logger, metrics: Metrics = Metrics(), tokens: (any TokenSpender)? = nil,
        push: (any PushGateway)? = nil, bus: any RelayBus = InProcessRelayBus()
    ) throws(ServerError) {
        try self.init(
            configuration: configuration, keys: keys, database: database, sms: sms, clock: clock,
            random: SystemRandom(), logger: logger, metrics: metrics, tokens: tokens, push: push, bus: bus)
    }

    /// The same, with `random` for codes, IDs and keys (`@_spi(Testing)`: tests make them deterministic).
    @_spi(Testing)
    public init(
        configuration: PixieConfiguration, keys: ServiceKeys, database: any SQLDatabase, sms: any SMSSender,
        clock: PixieClock = .system, random: any SecureRandomSource, logger: Logger,
        metrics: Metrics = Metrics(), tokens: (any TokenSpender)? = nil, push: (any PushGateway)? = nil,
        bus: any RelayBus = InProcessRelayBus()
    ) throws(ServerError) {
        self.configuration = configuration
        self.keys = keys
        self.database = database
        self.logger = logger
        self.metrics = metrics
        var router = Router()
        if !configuration.trustedProxies.isEmpty {
            router.add(middleware: ForwardedForMiddleware(trusted: configuration.trustedProxies))
        }
        router.add(middleware: ObservabilityMiddleware(logger: logger.named("http"), metrics: metrics))
        // Ready when the store answers and, for a relay node, when its bus reaches the other nodes: a balancer
        // stops sending devices to a relay node cut off from the rest (whose subscribers it has closed).
        let relayBus: (any RelayBus)? = configuration.services.contains(.relay) ? bus : nil
        router.on(PixieAPI.health) { [database, logger] _, _ in
            do {
                _ = try database.query("SELECT 1 AS ok", [])
            } catch {
                logger.error("health check: the store does not answer", ["error": "\(error)"])
                throw HTTPError(.serviceUnavailable, .storage, "the store does not answer")
            }
            if let relayBus, !relayBus.isLinked {
                throw HTTPError(
                    .serviceUnavailable, .relayBusUnavailable,
                    "this relay node has lost its link to the other nodes (its bus); send devices to another node")
            }
            return try .json(HealthResponse(status: "ok"))
        }
        router.on(PixieAPI.metrics) { [metrics] _, _ in
            HTTPResponse(
                status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
                body: Data(metrics.exposition().utf8))
        }
        let services = configuration.services
        if services.contains(.phoneVerify) {
            var settings = PhoneVerifyService.Configuration()
            settings.certLifetime = configuration.phoneCertLifetime
            settings.sendsPerNumberPerHour = configuration.codesPerNumberPerHour
            settings.clientRequestsPerMinute = configuration.clientRequestsPerMinute
            try PhoneVerifyService(
                database: database, keys: keys, sms: sms, configuration: settings, clock: clock, random: random,
                logger: logger.named("phone-verify"), metrics: metrics
            ).addRoutes(to: &router)
        }
        var log: Sequencer?
        var identity: IdentityService?
        if services.contains(.identity) || services.contains(.credential) {
            do {
                log = try Sequencer(
                    database: database, key: keys.transparencyLog, origin: configuration.logOrigin,
                    interval: configuration.checkpointInterval,
                    now: { UInt64(max(0, clock.now().timeIntervalSince1970 * 1000)) })
            } catch {
                throw ServerError(.storage, "the transparency log could not be opened: \(error)")
            }
        }
        if services.contains(.identity), let sequencer = log {
            var settings = IdentityService.Configuration()
            settings.relyingPartyID = configuration.relyingPartyID
            settings.allowedOrigins = Set(configuration.allowedOrigins)
            settings.requireUserVerification = configuration.requireUserVerification
            settings.grantLifetime = configuration.grantLifetime
            settings.sessionLifetime = configuration.sessionLifetime
            settings.clientRequestsPerMinute = configuration.clientRequestsPerMinute
            let service = try IdentityService(
                database: database, pinnedPhoneVerifyKeys: Self.pinnedPhoneVerifyKeys(configuration, keys),
                log: sequencer, configuration: settings, clock: clock, random: random, relay: bus,
                logger: logger.named("identity"), metrics: metrics)
            service.addRoutes(to: &router)
            identity = service
        }
        var credential: CredentialService?
        if services.contains(.credential) {
            var settings = CredentialService.Configuration()
            settings.senderCertLifetime = configuration.senderCertLifetime
            settings.approvalTokensPerHour = configuration.approvalTokensPerHour
            settings.accountTokensPerHour = configuration.accountTokensPerHour
            let service = try CredentialService(
                database: database, keys: keys, pinnedPhoneVerifyKeys: Self.pinnedPhoneVerifyKeys(configuration, keys),
                configuration: settings, clock: clock, random: random, logger: logger.named("credential"),
                metrics: metrics)
            service.addRoutes(to: &router)
            credential = service
        }
        // The tokens blob-svc (and the relay) spend: credential-svc's own spender when it runs here, else one
        // built from the same keys and store (every instance of a deployment shares both); tests inject theirs.
        let spender: any TokenSpender
        if let tokens {
            spender = tokens
        } else if let credential {
            spender = credential.spender
        } else {
            spender = try CredentialTokenSpender(keys: keys, database: database, clock: clock, logger: logger)
        }
        // blob-svc alone also takes upload-class tokens (relay frames cannot be paid with them).
        let uploadKeyID = TokenIssuer(privateKey: keys.tokenUploadOPRF).tokenKeyID
        let uploadSpender: any TokenSpender
        if let tokens {
            uploadSpender = tokens
        } else if let credential {
            uploadSpender = credential.uploadSpender
        } else {
            uploadSpender = try CredentialTokenSpender(
                keys: keys, tokenClass: .upload, database: database, clock: clock, logger: logger)
        }
        var blob: BlobService?
        if services.contains(.blob) {
            var settings = BlobService.Configuration(
                directory: configuration.blobDirectory.map { URL(fileURLWithPath: $0, isDirectory: true) }
                    ?? URL(fileURLWithPath: configuration.dataDirectory, isDirectory: true)
                    .appendingPathComponent("blobs", isDirectory: true))
            settings.maxBlobBytes = configuration.blobMaxBytes
            settings.syncMaxBlobBytes = configuration.syncMaxBlobBytes
            settings.ttl = configuration.blobTTL
            settings.sweepInterval = configuration.blobSweepInterval
            settings.uploadsPerAccountPerHour = configuration.blobUploadsPerHour
            settings.bytesPerAccountPerHour = configuration.blobBytesPerHour
            settings.bytesPerToken = configuration.blobBytesPerToken
            settings.bytesPerUploadToken = configuration.blobBytesPerUploadToken
            settings.allowAnonymousUploads = configuration.blobAllowAnonymousUploads
            if settings.allowAnonymousUploads {
                logger.warning("blob uploads need no credential (blob_allow_anonymous_uploads): benchmarks only")
            }
            // Sessions are identity-svc's, read from the shared store: usable when identity runs here or has
            // migrated this store; otherwise uploads take rate-limit tokens only.
            let migrated = try? database.queryOne(
                "SELECT version FROM schema_migrations WHERE component = ?", [.text(IdentityService.component)])
            let sessions = Sessions(
                database: database, clock: clock, random: random, lifetime: configuration.sessionLifetime,
                logger: logger.named("blob"))
            var authenticate: (@Sendable (HTTPRequest) throws -> Session)?
            if identity != nil || migrated != nil {
                authenticate = { request in try sessions.authenticate(request) }
            }
            let service = try BlobService(
                database: database, tokens: spender, uploadTokens: (uploadSpender, uploadKeyID),
                authenticateSession: authenticate,
                configuration: settings, clock: clock, random: random, logger: logger.named("blob"), metrics: metrics)
            service.addRoutes(to: &router)
            blob = service
        }
        if services.contains(.relay) {
            let relayLogger = logger.named("relay")
            let relaySpender: any TokenSpender
            if tokens == nil, configuration.relayTokens == .insecureDev {
                relaySpender = InsecureDevelopmentTokenSpender()
                relayLogger.warning(
                    "DEVELOPMENT ONLY: relay_tokens=insecure-dev accepts ANY token once; never run this in production",
                    ["relay_tokens": "insecure-dev"])
            } else {
                relaySpender = spender
            }
            var settings = RelayService.Configuration()
            settings.maximumSubjects = configuration.relayMaximumSubjects
            settings.maximumPayloadBytes = configuration.relayMaximumPayloadBytes
            settings.maximumQueuedFrames = configuration.relayMaximumQueuedFrames
            do {
                try RelayService(
                    configuration: settings, bus: bus, tokens: relaySpender,
                    push: push ?? RecordingPushGateway(logger: relayLogger),
                    logger: relayLogger, metrics: metrics, sharedPushState: bus.spansNodes ? database : nil
                ).addRoutes(to: &router)
            } catch {
                throw ServerError(.storage, "cannot open the relay's push state: \(error)")
            }
        }
        self.router = router
        self.log = log
        self.credential = credential
        self.identity = identity
        self.blob = blob
    }

    /// The phone-verify keys cert-checking services pin: the local one when phone-verify runs in this process,
    /// then the configured ones (a rotation pins the old key beside the new); none, and those services refuse certs.
    public var pinnedPhoneVerifyKeys: [HybridSignature.PublicKey] { Self.pinnedPhoneVerifyKeys(configuration, keys) }

    static func pinnedPhoneVerifyKeys(
        _ configuration: PixieConfiguration, _ keys: ServiceKeys
    ) -> [HybridSignature.PublicKey] {
        var pinned = configuration.services.contains(.phoneVerify) ? [keys.phoneVerify.publicKey] : []
        for key in configuration.phoneVerifyKeys where !pinned.contains(key) { pinned.append(key) }
        return pinned
    }

    /// Starts listening (plain HTTP on 127.0.0.1, or TLS on the configured address) and returns the running server.
    public func start() throws(ServerError) -> HTTPServer {
        try configuration.checkTogether()
        let server: HTTPServer
        do {
            var settings = HTTPServer.Configuration(
                port: configuration.port, maximumBodySize: configuration.maximumBodyBytes,
                connectionLimit: configuration.connectionLimit, responderTimeout: .seconds(configuration.requestTimeout)
            )
            settings.limits.httpConnectionsPerAddress = configuration.connectionsPerAddress
            settings.limits.exemptAddresses = configuration.trustedProxies
            settings.limits.webSockets = configuration.webSocketLimit
            settings.limits.webSocketsPerAddress = configuration.webSocketsPerAddress
            settings.limits.headerTimeout = .seconds(configuration.headerTimeout)
            settings.limits.minimumBodyRate =
                configuration.minimumBodyRate > 0 ? BodyRate(bytesPerSecond: configuration.minimumBodyRate) : nil
            settings.webSocketKeepalive = WebSocketKeepalive(
                interval: .seconds(configuration.webSocketPingInterval),
                timeout: .seconds(configuration.webSocketPingTimeout))
            if let chain = configuration.tlsCertificateFile, let key = configuration.tlsKeyFile {
                settings.tls = .init(certificateChainFile: chain, privateKeyFile: key, address: configuration.address)
            }
            server = try HTTPServer(responder: router, configuration: settings)
        } catch {
            throw ServerError(.listen, error.reason)
        }
        let held = server.statistics
        if held.httpConnectionLimit < configuration.connectionLimit
            || held.webSocketLimit < configuration.webSocketLimit
        {
            logger.warning(
                "the open-file limit (ulimit -n) holds the connection limits below their settings; raise it",
                [
                    "open_files": "\(HTTPServer.raiseOpenFileLimit())",
                    "connection_limit": "\(held.httpConnectionLimit)", "websocket_limit": "\(held.webSocketLimit)",
                ])
        }
        metrics.gauges(for: server)
        logger.info(
            "listening",
            [
                "address": Self.url(configuration, port: server.port),
                "connection_limit": "\(held.httpConnectionLimit)", "websocket_limit": "\(held.webSocketLimit)",
                "services": configuration.services.map(\.rawValue).joined(separator: ","),
                "data_dir": configuration.dataDirectory,
            ])
        return server
    }

    /// Where the server listens, as a device would name it.
    static func url(_ configuration: PixieConfiguration, port: UInt16) -> String {
        guard configuration.tlsCertificateFile != nil else { return "http://127.0.0.1:\(port)" }
        let host = configuration.address.contains(":") ? "[\(configuration.address)]" : configuration.address
        return "https://\(host):\(port)"
    }

    /// Reads the TLS certificate and key again (SIGHUP, after a renewal) and logs the outcome; a failure keeps the
    /// certificate in use.
    public func reloadCertificate(of server: HTTPServer) {
        guard let chain = configuration.tlsCertificateFile else {
            logger.info("SIGHUP: nothing to reload (no tls_cert)")
            return
        }
        do {
            try server.reloadTLS()
            logger.info("reloaded the TLS certificate", ["tls_cert": chain])
        } catch {
            logger.error(
                "the TLS certificate was not reloaded; the one in use stays",
                ["tls_cert": chain, "error": error.message, "detail": error.detail])
        }
    }

    /// Runs until SIGTERM or SIGINT, then stops taking connections, lets the requests in flight finish (for up
    /// to `shutdown_grace` seconds), logs what was waiting for a checkpoint, and returns.
    public func run() async throws(ServerError) {
        if log != nil {
            do {
                _ = try await reconcileTransparency()
            } catch {
                throw ServerError(.storage, "the transparency log could not be brought up to date: \(error)")
            }
        }
        let server = try start()
        let sweeper = blob.map { blob in Task { await blob.runSweeper() } }
        let retry = Task { await runTransparencyRetry() }
        Self.onHangUp { [self] in reloadCertificate(of: server) }
        let signal = await Self.waitForTermination()
        logger.info("shutting down", ["signal": signal])
        sweeper?.cancel()
        retry.cancel()
        let cutOff = await server.shutdown(gracePeriod: .seconds(configuration.shutdownGrace))
        if cutOff > 0 {
            logger.warning(
                "requests still in flight were cut off", ["requests": cutOff, "grace_s": configuration.shutdownGrace])
        }
        // Bindings still waiting for the next checkpoint are logged now rather than lost.
        await log?.flush()
        logger.info("stopped")
    }

    /// On an identity node, logs every `kt_retry_interval` the bindings a change committed while the log was away,
    /// until the task is cancelled (``IdentityService/runTransparencyRetry(every:)``); ``run()`` runs it.
    public func runTransparencyRetry() async {
        await identity?.runTransparencyRetry(every: configuration.ktRetryInterval)
    }

    /// Logs the bindings the store holds that the log does not (a crash between a commit and its append);
    /// ``run()`` does this before listening. Returns the number of accounts repaired.
    public func reconcileTransparency() async throws -> Int {
        if let credential, let log { try await credential.publishKeyList(to: log) }
        return try await identity?.reconcileTransparency() ?? 0
    }

    /// The public keys devices pin, with the transparency log's origin and, when this process keeps the log
    /// (identity-svc or credential-svc), its latest signed checkpoint, which devices start from.
    public func trustBundle() async -> TrustBundle {
        let checkpoint = await log?.latestCheckpoint().note
        return keys.trustBundle(
            logOrigin: configuration.logOrigin, checkpoint: checkpoint, alsoPinned: configuration.phoneVerifyKeys)
    }

    /// What `pixie-server trust-bundle` prints: the keys in `configuration`'s data directory (made if there are
    /// none) and the latest checkpoint of the log in its store (the empty log's, signed now, for a new store).
    /// Reading the log beside a running server is safe: this only reads, but for the empty checkpoint a new log
    /// signs.
    public static func trustBundle(
        configuration: PixieConfiguration, logger: Logger
    ) async throws(ServerError)
        -> TrustBundle
    {
        var configuration = configuration
        // The log opens with identity-svc; phone-verify beside it pins its own key, so nothing warns.
        configuration.services = [.phoneVerify, .identity]
        return try await Application.open(configuration: configuration, logger: logger).trustBundle()
    }

    /// Runs `reload` on every SIGHUP from now on (certbot's deploy hook sends one after a renewal).
    static func onHangUp(_ reload: @escaping @Sendable () -> Void) {
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "pixie-server.hup"))
        source.setEventHandler(handler: reload)
        source.resume()
        SignalSources.keep([source])
    }

    /// Waits for SIGTERM or SIGINT (whichever comes first) and returns its name.
    static func waitForTermination() async -> String {
        await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            let queue = DispatchQueue(label: "pixie-server.signals")
            let once = OnceFlag()
            var sources: [any DispatchSourceSignal] = []
            for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler {
                    if once.claim() { continuation.resume(returning: name) }
                }
                source.resume()
                sources.append(source)
            }
            // The sources live as long as the process; the server exits soon after the first signal.
            SignalSources.keep(sources)
        }
    }
}

/// True for the first caller of ``claim()`` only.
private final class OnceFlag: Sendable {
    private let claimed = Mutex(false)

    func claim() -> Bool {
        claimed.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
    }
}

/// Keeps the signal sources alive for the life of the process.
private enum SignalSources {
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
    private static let lock = Mutex(())

    static func keep(_ new: [any DispatchSourceSignal]) { lock.withLock { _ in sources += new } }
}
