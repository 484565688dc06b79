import CommandLineKit
import Foundation
import HTTPServer
import PixieDevice
import PixieServer
import PixieWire
import Transparency

/// `pixie-server`: every Pixie backend service in one process by default, or one alone
/// (`pixie-server phone-verify`); README.md, docs/operations.md.
struct PixieServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pixie-server",
        abstract: "The Pixie backend: phone-verify, identity (with key transparency), credential, blob and relay.",
        discussion: """
            `pixie-server` runs every service; `pixie-server <service>` (phone-verify, identity, credential, blob, relay) runs one. \
            Settings come from (later wins) defaults, --config <file.json>, PIXIE_<SETTING> variables and flags; \
            `pixie-server serve --help` lists them. `pixie-server trust-bundle` prints the public keys devices pin.
            """,
        version: "pixie-server 0.1.0",
        subcommands: [Serve.self, TrustBundleCommand.self, Audit.self],
        defaultSubcommand: Serve.self)
}

let streams = StandardStreams()

/// Reads the configuration from the file, the environment and the flags that were given.
func loadConfiguration(file: String?, flags: [(String, String?)]) throws -> PixieConfiguration {
    var configuration = PixieConfiguration()
    do {
        if let file { try configuration.apply(file: URL(fileURLWithPath: file)) }
        try configuration.apply(environment: ProcessInfo.processInfo.environment)
        for case (let name, let value?) in flags { try configuration.set(name, value, source: "--\(name)") }
        try configuration.checkTogether()
    } catch {
        streams.err("pixie-server: error: \(error.reason)")
        throw ExitCode.usage
    }
    return configuration
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run services (all unless some are named: phone-verify, identity, credential, blob, relay).",
        discussion: "Settings:\n"
            + PixieConfiguration.settings.map { "  \($0.name.replacingOccurrences(of: "_", with: "-")): \($0.help)" }
            .joined(separator: "\n"))

    @Arguments(help: "Services to run (default: all).") var services: [String] = []
    @OptionalOption(name: .long("config"), help: "A JSON file of settings.") var config: String?
    @OptionalOption(name: .long("data-dir"), help: "Directory for the store and the keys.") var dataDir: String?
    @OptionalOption(
        name: .long("database"), help: "A PostgreSQL URL for the store, postgres://user@host/db (default: SQLite).")
    var database: String?
    @OptionalOption(name: .long("port"), help: "TCP port (on 127.0.0.1, or with TLS on --address).") var port: String?
    @OptionalOption(
        name: .long("tls-cert"), help: "Serve https:// and wss:// with this PEM chain (fullchain.pem); SIGHUP reloads.")
    var tlsCert: String?
    @OptionalOption(name: .long("tls-key"), help: "The certificate's PEM private key (privkey.pem).") var tlsKey:
        String?
    @OptionalOption(name: .long("address"), help: "IP address to listen on with TLS (default 127.0.0.1).")
    var address: String?
    @OptionalOption(
        name: .long("phone-verify-key"), help: "Pinned phone-verify public keys, base64url, comma-separated.")
    var phoneVerifyKey: String?
    @OptionalOption(name: .long("sms-webhook-url"), help: "SMS gateway webhook URL.") var smsWebhookUrl: String?
    @OptionalOption(name: .long("sms-webhook-secret"), help: "Bearer secret for the SMS webhook.")
    var smsWebhookSecret: String?
    @OptionalOption(name: .long("rp-id"), help: "WebAuthn relying party id.") var rpId: String?
    @OptionalOption(name: .long("allowed-origins"), help: "Comma-separated WebAuthn origins.")
    var allowedOrigins: String?
    @OptionalOption(name: .long("require-user-verification"), help: "true or false.")
    var requireUserVerification: String?
    @OptionalOption(name: .long("log-level"), help: "debug, info, warning or error.") var logLevel: String?
    @OptionalOption(name: .long("max-body-bytes"), help: "Longest request body.") var maxBodyBytes: String?
    @OptionalOption(name: .long("phone-cert-lifetime"), help: "Seconds.") var phoneCertLifetime: String?
    @OptionalOption(name: .long("grant-lifetime"), help: "Seconds.") var grantLifetime: String?
    @OptionalOption(name: .long("session-lifetime"), help: "Seconds.") var sessionLifetime: String?
    @OptionalOption(name: .long("request-timeout"), help: "Seconds.") var requestTimeout: String?
    @OptionalOption(name: .long("shutdown-grace"), help: "Seconds in-flight requests get after SIGTERM.")
    var shutdownGrace: String?
    @OptionalOption(name: .long("sender-cert-lifetime"), help: "Seconds.") var senderCertLifetime: String?
    @OptionalOption(name: .long("approval-tokens-per-hour"), help: "Per phone_id.") var approvalTokensPerHour: String?
    @OptionalOption(name: .long("account-tokens-per-hour"), help: "Per account.") var accountTokensPerHour: String?
    @OptionalOption(name: .long("codes-per-number-per-hour"), help: "SMS codes per number per hour.")
    var codesPerNumberPerHour: String?
    @OptionalOption(name: .long("client-requests-per-minute"), help: "Requests per client address per minute.")
    var clientRequestsPerMinute: String?
    @OptionalOption(name: .long("trusted-proxies"), help: "Reverse proxies whose X-Forwarded-For is believed.")
    var trustedProxies: String?
    @OptionalOption(name: .long("log-origin"), help: "The transparency log's origin.") var logOrigin: String?
    @OptionalOption(name: .long("checkpoint-interval-ms"), help: "Least milliseconds between checkpoints.")
    var checkpointIntervalMs: String?
    @OptionalOption(name: .long("blob-max-bytes"), help: "Largest blob of other mime types.") var blobMaxBytes: String?
    @OptionalOption(name: .long("sync-max-blob-bytes"), help: "Largest application/x-pixie-sync blob.")
    var syncMaxBlobBytes: String?
    @OptionalOption(name: .long("blob-ttl"), help: "Seconds a blob lives.") var blobTtl: String?
    @OptionalOption(name: .long("blob-sweep-interval"), help: "Seconds between sweeps.") var blobSweepInterval: String?
    @OptionalOption(name: .long("blob-uploads-per-hour"), help: "Uploads per account per hour.")
    var blobUploadsPerHour: String?
    @OptionalOption(name: .long("blob-bytes-per-hour"), help: "Bytes per account per hour.")
    var blobBytesPerHour: String?
    @OptionalOption(name: .long("blob-bytes-per-token"), help: "Bytes each token buys on an upload.")
    var blobBytesPerToken: String?
    @OptionalOption(
        name: .long("blob-bytes-per-upload-token"), help: "Bytes each upload-class token buys on an upload.")
    var blobBytesPerUploadToken: String?
    @OptionalOption(name: .long("blob-allow-anonymous-uploads"), help: "true for benchmarks only.")
    var blobAllowAnonymousUploads: String?
    @OptionalOption(name: .long("relay-max-subjects"), help: "Subjects per relay connection.")
    var relayMaxSubjects: String?
    @OptionalOption(name: .long("relay-max-payload-bytes"), help: "Longest relay SEND payload.")
    var relayMaxPayloadBytes: String?
    @OptionalOption(name: .long("relay-max-queued-frames"), help: "Frames queued per relay connection.")
    var relayMaxQueuedFrames: String?
    @OptionalOption(name: .long("blob-dir"), help: "Directory for blob files (default DATA_DIR/blobs).")
    var blobDir: String?
    @OptionalOption(name: .long("relay-nats-url"), help: "NATS server the relay nodes share, nats://host:4222.")
    var relayNatsUrl: String?
    @OptionalOption(name: .long("relay-tokens"), help: "credential (default), or insecure-dev (DEVELOPMENT ONLY).")
    var relayTokens: String?
    @OptionalOption(name: .long("relay-push-webhook-url"), help: "Push provider webhook URL.")
    var relayPushWebhookUrl: String?
    @OptionalOption(name: .long("relay-push-webhook-secret"), help: "Bearer secret for the push webhook.")
    var relayPushWebhookSecret: String?
    @OptionalOption(name: .long("webhook-timeout"), help: "Seconds the SMS and push webhooks get to answer.")
    var webhookTimeout: String?
    @OptionalOption(name: .long("connection-limit"), help: "HTTP connections open at once.")
    var connectionLimit: String?
    @OptionalOption(name: .long("connections-per-address"), help: "HTTP connections per address.")
    var connectionsPerAddress: String?
    @OptionalOption(name: .long("websocket-limit"), help: "WebSockets open at once.") var websocketLimit: String?
    @OptionalOption(name: .long("websockets-per-address"), help: "WebSockets per client address.")
    var websocketsPerAddress: String?
    @OptionalOption(name: .long("header-timeout"), help: "Seconds to send a request head.") var headerTimeout: String?
    @OptionalOption(name: .long("minimum-body-rate"), help: "Bytes per second, 0 for none.")
    var minimumBodyRate: String?
    @OptionalOption(name: .long("websocket-ping-interval"), help: "Seconds of silence before a ping.")
    var websocketPingInterval: String?
    @OptionalOption(name: .long("websocket-ping-timeout"), help: "Seconds to answer a ping.")
    var websocketPingTimeout: String?

    func run() async throws {
        let configuration = try loadConfiguration(
            file: config,
            flags: [
                ("services", services.isEmpty ? nil : services.joined(separator: ",")), ("data_dir", dataDir),
                ("database", database),
                ("port", port), ("tls_cert", tlsCert), ("tls_key", tlsKey), ("address", address),
                ("phone_verify_key", phoneVerifyKey), ("sms_webhook_url", smsWebhookUrl),
                ("sms_webhook_secret", smsWebhookSecret), ("rp_id", rpId), ("allowed_origins", allowedOrigins),
                ("require_user_verification", requireUserVerification), ("log_level", logLevel),
                ("max_body_bytes", maxBodyBytes), ("phone_cert_lifetime", phoneCertLifetime),
                ("grant_lifetime", grantLifetime), ("session_lifetime", sessionLifetime),
                ("request_timeout", requestTimeout), ("shutdown_grace", shutdownGrace),
                ("sender_cert_lifetime", senderCertLifetime),
                ("approval_tokens_per_hour", approvalTokensPerHour), ("account_tokens_per_hour", accountTokensPerHour),
                ("codes_per_number_per_hour", codesPerNumberPerHour),
                ("client_requests_per_minute", clientRequestsPerMinute), ("trusted_proxies", trustedProxies),
                ("log_origin", logOrigin),
                ("checkpoint_interval_ms", checkpointIntervalMs), ("blob_max_bytes", blobMaxBytes),
                ("sync_max_blob_bytes", syncMaxBlobBytes), ("blob_ttl", blobTtl),
                ("blob_sweep_interval", blobSweepInterval), ("blob_uploads_per_hour", blobUploadsPerHour),
                ("blob_bytes_per_hour", blobBytesPerHour),
                ("blob_bytes_per_token", blobBytesPerToken), ("blob_bytes_per_upload_token", blobBytesPerUploadToken),
                ("blob_allow_anonymous_uploads", blobAllowAnonymousUploads),
                ("relay_max_subjects", relayMaxSubjects),
                ("relay_max_payload_bytes", relayMaxPayloadBytes), ("relay_max_queued_frames", relayMaxQueuedFrames),
                ("relay_tokens", relayTokens), ("relay_nats_url", relayNatsUrl), ("blob_dir", blobDir),
                ("relay_push_webhook_url", relayPushWebhookUrl),
                ("relay_push_webhook_secret", relayPushWebhookSecret), ("webhook_timeout", webhookTimeout),
                ("connection_limit", connectionLimit), ("connections_per_address", connectionsPerAddress),
                ("websocket_limit", websocketLimit), ("websockets_per_address", websocketsPerAddress),
                ("header_timeout", headerTimeout), ("minimum_body_rate", minimumBodyRate),
                ("websocket_ping_interval", websocketPingInterval), ("websocket_ping_timeout", websocketPingTimeout),
            ])
        // A relay holds a descriptor per device: take all the open files the system allows this process.
        HTTPServer.raiseOpenFileLimit()
        let logger = Logger.standardError(service: "pixie-server", minimumLevel: configuration.logLevel)
        do {
            try await Application.open(configuration: configuration, logger: logger).run()
        } catch {
            logger.error("cannot start", ["error": error.reason])
            streams.err("pixie-server: error: \(error.reason)")
            throw ExitCode.failure
        }
    }
}

struct TrustBundleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust-bundle",
        abstract: "Print the public keys devices pin (JSON), creating the keys if the data directory has none.")

    @OptionalOption(name: .long("config"), help: "A JSON file of settings.") var config: String?
    @OptionalOption(name: .long("data-dir"), help: "Directory for the store and the keys.") var dataDir: String?
    @OptionalOption(
        name: .long("database"), help: "A PostgreSQL URL for the store, postgres://user@host/db (default: SQLite).")
    var database: String?
    @OptionalOption(name: .long("log-origin"), help: "The transparency log's origin.") var logOrigin: String?

    func run() async throws {
        let configuration = try loadConfiguration(
            file: config, flags: [("data_dir", dataDir), ("database", database), ("log_origin", logOrigin)])
        let logger = Logger.standardError(service: "pixie-server", minimumLevel: .warning)
        do {
            let bundle = try await Application.trustBundle(configuration: configuration, logger: logger)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            streams.out(String(decoding: try encoder.encode(bundle), as: UTF8.self))
        } catch let error as ServerError {
            streams.err("pixie-server: error: \(error.reason)")
            throw ExitCode.failure
        }
    }
}

struct Audit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Follow a server's transparency log from its start and check everything it signed.",
        discussion: """
            Reads every checkpoint and entry over HTTP, checks each checkpoint's signature (both halves) and that \
            it extends the last (consistency proof), recomputes the log and the map from the entries, and stops \
            at the first thing that does not add up: a fork, a rollback, a rewritten or withheld entry, a version \
            gap. The log key and origin come from the trust bundle (pixie-server trust-bundle). Exit status 0 \
            when everything checks, 1 when the log misbehaved or could not be read (a request that has not \
            finished within --timeout seconds counts as unread).
            """)

    @Option(name: .long("url"), help: "The identity service: https://host[:port], or http://127.0.0.1:PORT.")
    var url: String
    @OptionalOption(
        name: .long("ca-file"), help: "For an https:// server: trust only the CA certificates in this PEM file.")
    var caFile: String?
    @Option(name: .long("trust-bundle"), help: "The trust bundle JSON file devices pin.") var trustBundle: String
    @Flag(name: .long("json"), help: "Print the result as JSON.") var json: Bool
    @OptionalOption(name: .long("timeout"), help: "Seconds one request may take, its answer included (default 300).")
    var timeout: String?

    func run() async throws {
        guard let base = URL(string: url), ["http", "https"].contains(base.scheme ?? "") else {
            streams.err("pixie-server: error: --url must be an http or https URL, not \(url)")
            throw ExitCode.usage
        }
        guard caFile == nil || base.scheme == "https" else {
            streams.err("pixie-server: error: --ca-file is for an https:// server, not \(url)")
            throw ExitCode.usage
        }
        let seconds = timeout.map { Int($0) } ?? 300
        guard let seconds, (1...86_400).contains(seconds) else {
            streams.err("pixie-server: error: --timeout must be a number of seconds, 1 to 86400, not \(timeout ?? "")")
            throw ExitCode.usage
        }
        let bundle: TrustBundle
        do {
            bundle = try JSONDecoder().decode(
                TrustBundle.self, from: Data(contentsOf: URL(fileURLWithPath: trustBundle)))
        } catch {
            streams.err(
                "pixie-server: error: \(trustBundle) is not a trust bundle (pixie-server trust-bundle prints one)")
            throw ExitCode.usage
        }
        var auditor: Auditor
        do {
            let key = try LogKey(origin: bundle.transparencyLogOrigin, publicKey: bundle.transparencyLogKey)
            auditor = Auditor(logKey: key, rules: [AccountRotationRule()])
            let checked = try await auditor.follow(Self.source(base, key: key, caFile: caFile, seconds: seconds))
            let size = auditor.checkpoint?.size ?? 0
            if json {
                streams.out(#"{"checkpoints_checked":\#(checked),"entries":\#(size),"ok":true}"#)
            } else {
                streams.out("ok: \(checked) checkpoints and \(size) entries checked; the log is consistent")
            }
        } catch {
            let reason =
                (error as? TransparencyError)?.reason ?? (error as? ServerError)?.reason
                ?? (error as? PixieClientError)?.description ?? "\(error)"
            if json {
                let object = ["ok": false, "error": reason] as [String: Any]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                streams.out(String(decoding: data, as: UTF8.self))
            }
            streams.err("pixie-server: audit failed: \(reason)")
            throw ExitCode.failure
        }
    }
}

extension Audit {
    /// The log over HTTP: an https:// server through the device SDK's own TLS client (the chain and name checked
    /// against the system's store or `caFile`, each failure its own message; each read waits at most `seconds`),
    /// a loopback http:// one through URLSession (the whole answer within `seconds`).
    static func source(_ base: URL, key: LogKey, caFile: String?, seconds: Int) -> HTTPLogSource {
        guard base.scheme == "https" else {
            return HTTPLogSource(baseURL: base, logKey: key, timeout: TimeInterval(seconds))
        }
        let transport = SocketHTTPTransport(
            baseURL: base, tls: .client(trust: caFile.map { .caFile($0) } ?? .system), timeout: TimeInterval(seconds))
        return HTTPLogSource(logKey: key) { path in
            let answer = try await transport.send(TransportRequest(method: "GET", target: path))
            return (answer.status, answer.body)
        }
    }
}

await PixieServerCommand.main()
