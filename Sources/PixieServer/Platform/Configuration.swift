import Foundation
import PixieWire
import SiblingsCrypto
import Storage

/// Everything an operator sets, from (later wins) the defaults, a JSON file (`--config`), the environment
/// (`PIXIE_<SETTING>`) and flags (`--<setting>`). Every source goes through ``set(_:_:source:)``, so a
/// setting has one name and one parser everywhere: `data_dir` is `"data_dir"` in the file,
/// `PIXIE_DATA_DIR` in the environment and `--data-dir` on the command line. An unknown setting or a
/// value that does not parse stops the server with an error naming the source.
public struct PixieConfiguration: Sendable, Equatable {
    /// The services one process runs.
    public enum Service: String, Sendable, CaseIterable, Comparable {
        case phoneVerify = "phone-verify"
        case identity
        case credential
        case blob
        case relay

        public static func < (lhs: Service, rhs: Service) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }
    }

    /// Where the store (`pixie.sqlite`), the keys (`keys/`) and the development SMS outbox live.
    public var dataDirectory = "pixie-data"
    /// A PostgreSQL server to keep the store in instead of `<data_dir>/pixie.sqlite` (`postgres://user@host/db`,
    /// libpq's connection URI), for several nodes on one database; nil keeps the embedded SQLite store.
    public var databaseURL: String?
    /// Where blob-svc keeps blob files: `<data_dir>/blobs` when nil; a directory every node mounts when several
    /// run blob-svc.
    public var blobDirectory: String?
    /// A NATS server (`nats://host:4222`) the relay nodes of a deployment share, so that a device on one node
    /// reaches a device on another; nil keeps the relay's fan-out in this process.
    public var relayNATSURL: String?
    /// The TCP port: on 127.0.0.1 for plain HTTP (a TLS-terminating proxy in front), or on ``address`` with TLS.
    public var port: UInt16 = 8080
    /// Serve HTTPS and WSS itself with this certificate chain (PEM, leaf first: certbot's `fullchain.pem`) and
    /// ``tlsKeyFile``; reloaded on SIGHUP. Nil: plain HTTP on 127.0.0.1.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// The IP address to listen on with TLS (`0.0.0.0` or `::` for every interface). Plain HTTP is on 127.0.0.1
    /// only, so anything else needs ``tlsCertificateFile``.
    public var address = "127.0.0.1"
    public var services: [Service] = Service.allCases
    /// The phone-verify public keys (base64url, 1984 bytes each, comma-separated in `phone_verify_key`) that certs
    /// are checked against, beside phone-verify's own key when it runs in the same process. Several allow a key
    /// rotation: pin the new key beside the old, switch phone-verify to the new one, drop the old once the last
    /// cert under it expired. With none, and no phone-verify here, cert endpoints refuse.
    public var phoneVerifyKeys: [HybridSignature.PublicKey] = []
    /// An SMS gateway webhook; when nil, codes go to the development outbox `<data_dir>/sms-outbox.jsonl`.
    public var smsWebhookURL: URL?
    public var smsWebhookSecret: String?
    public var relyingPartyID = "localhost"
    public var allowedOrigins: [String] = ["https://localhost"]
    public var requireUserVerification = false
    public var logLevel: Logger.Level = .info
    /// The longest request body accepted, in bytes.
    public var maximumBodyBytes = 1 << 20
    public var phoneCertLifetime: TimeInterval = 86_400
    public var grantLifetime: TimeInterval = 180
    public var sessionLifetime: TimeInterval = 30 * 86_400
    /// A SenderCert's lifetime.
    public var senderCertLifetime: TimeInterval = 3600
    /// Tokens one phone_id may mint per hour through the pre-session challenge.
    public var approvalTokensPerHour = 40
    /// Tokens one account may mint per hour.
    public var accountTokensPerHour = 600
    /// Seconds a request may take before the client gets 503.
    public var requestTimeout: TimeInterval = 30
    /// Seconds the requests in flight get to finish after SIGTERM or SIGINT; later ones are cut off.
    public var shutdownGrace: TimeInterval = 30
    /// SMS codes one number may be sent per hour.
    public var codesPerNumberPerHour = 5
    /// Requests one client address may make per minute to the endpoints that count them.
    public var clientRequestsPerMinute = 60
    /// Addresses of the operator's reverse proxies, whose `X-Forwarded-For` names the client (none by default).
    public var trustedProxies: Set<String> = []
    /// The transparency log's origin: the first line of its checkpoints and its signed-note key name.
    public var logOrigin = "pixie.localhost/kt"
    /// The least time between two checkpoints; a binding waits up to this long to be logged.
    public var checkpointInterval: Duration = .seconds(1)
    /// How often an identity node logs the bindings a change committed but could not log (the log was away).
    public var ktRetryInterval: Duration = .seconds(30)
    /// blob-svc: the cap for uploads of any mime type but `application/x-pixie-sync`.
    public var blobMaxBytes = 16 << 20
    /// blob-svc: the cap for `application/x-pixie-sync` (a sealed whole-device snapshot).
    public var syncMaxBlobBytes = 4 << 30
    /// blob-svc: how long a blob lives after its upload.
    public var blobTTL: TimeInterval = 86_400
    /// blob-svc: how often expired blobs are deleted.
    public var blobSweepInterval: Duration = .seconds(60)
    /// blob-svc: uploads one account may make per hour with a session.
    public var blobUploadsPerHour = 60
    /// blob-svc: bytes one account may upload per hour with a session.
    public var blobBytesPerHour: Int64 = 16 << 30
    public var blobBytesPerToken: Int64 = 1 << 20
    /// Bytes each upload-class token buys (`blob_bytes_per_upload_token`, 64 MiB).
    public var blobBytesPerUploadToken: Int64 = 64 << 20
    /// blob-svc: take uploads with no credential at all. For benchmarks and local development only, until
    /// credential-svc issues rate-limit tokens; the server logs a warning when it is on.
    public var blobAllowAnonymousUploads = false
    /// Subjects one relay connection may hold at once.
    public var relayMaximumSubjects = 16
    /// The longest payload one relay SEND may carry, in bytes.
    public var relayMaximumPayloadBytes = 64 << 10
    /// Frames waiting for one relay connection before it is closed as a slow consumer.
    public var relayMaximumQueuedFrames = 256
    /// How the relay checks SEND tokens.
    public var relayTokens: RelayTokens = .credential
    /// The push provider's webhook; when nil, wakes are only logged (development).
    public var relayPushWebhookURL: URL?
    public var relayPushWebhookSecret: String?
    /// Seconds the SMS and push webhooks get to answer before the message counts as failed.
    public var webhookTimeout: TimeInterval = 10
    /// HTTP connections open at once (each holds a thread); cut to what `ulimit -n` leaves room for.
    public var connectionLimit = 1024
    /// HTTP connections one address may hold (trusted proxies are not counted).
    public var connectionsPerAddress = 64
    /// WebSockets (relay connections) open at once; cut to what `ulimit -n` leaves room for.
    public var webSocketLimit = 100_000
    /// WebSockets one client address may hold (behind a trusted proxy, the forwarded address).
    public var webSocketsPerAddress = 1000
    /// Seconds a connection gets to deliver a request head (also how long an idle keep-alive connection stays).
    public var headerTimeout: TimeInterval = 20
    /// The slowest request body taken, in bytes per second averaged over 20 s.
    public var minimumBodyRate = 500
    /// Seconds of silence before the relay pings a WebSocket, and seconds it then waits for an answer.
    public var webSocketPingInterval: TimeInterval = 60
    public var webSocketPingTimeout: TimeInterval = 30

    /// How the relay checks the rate-limit token on every SEND.
    public enum RelayTokens: String, Sendable, Equatable {
        /// credential-svc's tokens, verified with its key and spent once in the shared store (the default).
        case credential
        /// DEVELOPMENT ONLY: any non-empty token is accepted once. Logged as a warning at start.
        case insecureDev = "insecure-dev"
    }

    public init() {}

    /// The settings, with what each takes; `pixie-server --help` and docs/operations.md list the same.
    public static let settings: [(name: String, help: String)] = [
        ("data_dir", "directory for the store, the keys and the development SMS outbox (default pixie-data)"),
        ("database", "PostgreSQL URL for the store, postgres://user@host/db (default: SQLite in data_dir)"),
        ("blob_dir", "directory for blob files, shared by every node that runs blob-svc (default data_dir/blobs)"),
        ("relay_nats_url", "NATS server the relay nodes share, nats://host:4222 (default: none, one relay node)"),
        ("port", "TCP port, on 127.0.0.1 or with TLS on address (default 8080; 0 picks a free one)"),
        (
            "tls_cert",
            "certificate chain, PEM, leaf first (certbot's fullchain.pem): serve HTTPS and WSS itself; SIGHUP reloads "
                + "it (default: plain HTTP on 127.0.0.1)"
        ),
        ("tls_key", "the certificate's private key, PEM (certbot's privkey.pem); with tls_cert"),
        (
            "address",
            "IP address to listen on with TLS, 0.0.0.0 or :: for every interface (default 127.0.0.1; plain HTTP is "
                + "on 127.0.0.1 only)"
        ),
        ("services", "comma-separated services to run: phone-verify,identity,credential,blob,relay (default all)"),
        (
            "phone_verify_key",
            "pinned phone-verify public keys, base64url, comma-separated (always with the local one, if it runs here)"
        ),
        ("sms_webhook_url", "SMS gateway webhook URL (default: the development outbox file)"),
        ("sms_webhook_secret", "bearer secret sent to the SMS webhook"),
        ("rp_id", "WebAuthn relying party id (default localhost)"),
        ("allowed_origins", "comma-separated WebAuthn origins (default https://localhost)"),
        ("require_user_verification", "true to require passkey user verification (default false)"),
        ("log_level", "debug, info, warning or error (default info)"),
        ("max_body_bytes", "longest request body in bytes (default 1048576)"),
        ("phone_cert_lifetime", "PhoneOwnershipCert lifetime in seconds (default 86400)"),
        ("grant_lifetime", "device grant lifetime in seconds (default 180)"),
        ("session_lifetime", "session lifetime in seconds (default 2592000)"),
        ("request_timeout", "seconds before a slow request is answered 503 (default 30)"),
        ("shutdown_grace", "seconds the requests in flight get to finish after SIGTERM or SIGINT (default 30)"),
        ("sender_cert_lifetime", "SenderCert lifetime in seconds (default 3600)"),
        ("approval_tokens_per_hour", "tokens one phone_id may mint per hour before a session (default 40)"),
        ("account_tokens_per_hour", "tokens one account may mint per hour (default 600)"),
        ("codes_per_number_per_hour", "SMS codes one number may be sent per hour (default 5)"),
        ("client_requests_per_minute", "requests per minute per client address on counted endpoints (default 60)"),
        (
            "trusted_proxies",
            "comma-separated addresses of reverse proxies whose X-Forwarded-For is believed (default none)"
        ),
        ("log_origin", "the transparency log's origin, in its checkpoints (default pixie.localhost/kt)"),
        ("checkpoint_interval_ms", "least milliseconds between transparency checkpoints (default 1000)"),
        ("kt_retry_interval", "seconds between retries of bindings committed but not yet logged (default 30)"),
        ("blob_max_bytes", "largest blob of any mime type but the sync one, in bytes (default 16777216)"),
        ("sync_max_blob_bytes", "largest application/x-pixie-sync blob, in bytes (default 4294967296)"),
        ("blob_ttl", "seconds a blob lives after its upload (default 86400)"),
        ("blob_sweep_interval", "seconds between sweeps of expired blobs (default 60)"),
        ("blob_uploads_per_hour", "blob uploads per account per hour with a session (default 60)"),
        ("blob_bytes_per_hour", "blob bytes per account per hour with a session (default 17179869184)"),
        ("blob_bytes_per_token", "blob bytes each rate-limit token spent on an upload buys (default 1048576)"),
        (
            "blob_bytes_per_upload_token",
            "blob bytes each upload-class token buys (default 67108864; devices plan with 64 MiB)"
        ),
        (
            "blob_allow_anonymous_uploads",
            "true to take blob uploads with no credential: benchmarks only (default false)"
        ),
        ("relay_max_subjects", "subjects one relay connection may hold (default 16)"),
        ("relay_max_payload_bytes", "longest relay SEND payload in bytes (default 65536)"),
        ("relay_max_queued_frames", "frames queued for one relay connection before it is closed (default 256)"),
        (
            "relay_tokens",
            "credential (default: credential-svc's tokens) or insecure-dev (DEVELOPMENT ONLY: any token once)"
        ),
        ("relay_push_webhook_url", "push provider webhook URL (default: wakes are only logged)"),
        ("relay_push_webhook_secret", "bearer secret sent to the push webhook"),
        ("webhook_timeout", "seconds the SMS and push webhooks get to answer (default 10)"),
        ("connection_limit", "HTTP connections open at once, cut to what ulimit -n allows (default 1024)"),
        ("connections_per_address", "HTTP connections one address may hold; trusted proxies are exempt (default 64)"),
        ("websocket_limit", "WebSockets open at once, cut to what ulimit -n allows (default 100000)"),
        (
            "websockets_per_address",
            "WebSockets one client address may hold, the forwarded one behind a trusted proxy (default 1000)"
        ),
        ("header_timeout", "seconds a connection gets to send a request head, idle or trickling (default 20)"),
        ("minimum_body_rate", "slowest request body taken, bytes per second over 20 s (default 500)"),
        ("websocket_ping_interval", "seconds of WebSocket silence before the server pings (default 60)"),
        ("websocket_ping_timeout", "seconds a pinged WebSocket gets to answer before it is closed (default 30)"),
    ]

    /// Sets one setting from text; `source` names where it came from in the error.
    public mutating func set(_ name: String, _ value: String, source: String) throws(ServerError) {
        func fail(_ expected: String) -> ServerError {
            // A value that can hold a secret (a URL with a password or token, a webhook secret) is never echoed.
            let shown =
                name.hasSuffix("_url")
                ? ConnectionURL.redacted(value)
                : name.hasSuffix("_secret") ? "(the value given)" : value
            return ServerError(.configuration, "\(source): \(name) must be \(expected), not \"\(shown)\"")
        }
        func seconds() throws(ServerError) -> TimeInterval {
            guard let number = Int(value), number > 0 else { throw fail("a number of seconds above 0") }
            return TimeInterval(number)
        }
        switch name {
        case "data_dir":
            guard !value.isEmpty else { throw fail("a directory path") }
            dataDirectory = value
        case "database":
            guard let url = URLComponents(string: value), ["postgres", "postgresql"].contains(url.scheme ?? "") else {
                throw ServerError(
                    .configuration,
                    "\(source): database must be a PostgreSQL URL, postgres://user[:password]@host[:port]/database "
                        + "(leave it unset for the embedded SQLite store in data_dir)")
            }
            databaseURL = value
        case "blob_dir":
            guard !value.isEmpty else { throw fail("a directory path") }
            blobDirectory = value
        case "relay_nats_url":
            guard let url = URLComponents(string: value), url.scheme == "nats", url.host != nil else {
                throw fail("a NATS URL, nats://host:4222")
            }
            relayNATSURL = value
        case "port":
            guard let number = UInt16(value) else { throw fail("a port number, 0 to 65535") }
            port = number
        case "tls_cert":
            guard !value.isEmpty else { throw fail("a PEM certificate chain file") }
            tlsCertificateFile = value
        case "tls_key":
            guard !value.isEmpty else { throw fail("a PEM private key file") }
            tlsKeyFile = value
        case "address":
            guard ForwardedForMiddleware.isIPAddress(value) else { throw fail("an IP address, like 0.0.0.0 or ::") }
            address = value
        case "services":
            var chosen: [Service] = []
            for part in value.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                guard let service = Service(rawValue: part) else {
                    throw fail("a comma-separated list of " + Service.allCases.map(\.rawValue).joined(separator: ", "))
                }
                if !chosen.contains(service) { chosen.append(service) }
            }
            guard !chosen.isEmpty else { throw fail("at least one service") }
            services = chosen.sorted()
        case "phone_verify_key":
            var keys: [HybridSignature.PublicKey] = []
            for part in value.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                guard let bytes = Data(base64URLEncoded: part),
                    let key = try? HybridSignature.PublicKey(rawRepresentation: bytes)
                else {
                    throw fail(
                        "base64url hybrid public keys, comma-separated (pixie-server trust-bundle prints the "
                            + "phone_verify_key)")
                }
                if !keys.contains(key) { keys.append(key) }
            }
            guard !keys.isEmpty else { throw fail("at least one base64url hybrid public key") }
            phoneVerifyKeys = keys
        case "sms_webhook_url":
            guard let url = URL(string: value), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw fail("an http or https URL")
            }
            smsWebhookURL = url
        case "sms_webhook_secret":
            smsWebhookSecret = value
        case "rp_id":
            guard !value.isEmpty, !value.contains("/"), !value.contains(":") else { throw fail("a domain name") }
            relyingPartyID = value
        case "allowed_origins":
            let origins = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard !origins.isEmpty, origins.allSatisfy({ $0.hasPrefix("https://") || $0.hasPrefix("http://") })
            else { throw fail("a comma-separated list of origins like https://example.com") }
            allowedOrigins = origins
        case "require_user_verification":
            guard let flag = Bool(value.lowercased()) else { throw fail("true or false") }
            requireUserVerification = flag
        case "log_level":
            guard let level = Logger.Level(name: value) else { throw fail("debug, info, warning or error") }
            logLevel = level
        case "max_body_bytes":
            guard let number = Int(value), number >= 1024 else { throw fail("a number of bytes, at least 1024") }
            maximumBodyBytes = number
        case "phone_cert_lifetime": phoneCertLifetime = try seconds()
        case "grant_lifetime": grantLifetime = try seconds()
        case "session_lifetime": sessionLifetime = try seconds()
        case "request_timeout": requestTimeout = try seconds()
        case "shutdown_grace": shutdownGrace = try seconds()
        case "sender_cert_lifetime": senderCertLifetime = try seconds()
        case "approval_tokens_per_hour":
            guard let number = Int(value), number >= 4 else { throw fail("a whole number, at least 4") }
            approvalTokensPerHour = number
        case "account_tokens_per_hour":
            guard let number = Int(value), number >= 1 else { throw fail("a whole number above 0") }
            accountTokensPerHour = number
        case "codes_per_number_per_hour":
            guard let number = Int(value), number > 0 else { throw fail("a whole number above 0") }
            codesPerNumberPerHour = number
        case "log_origin":
            guard !value.isEmpty, !value.contains(where: { $0.isWhitespace || $0.isNewline }) else {
                throw fail("a name without spaces, like example.com/kt")
            }
            logOrigin = value
        case "checkpoint_interval_ms":
            guard let number = Int(value), (1...60_000).contains(number) else { throw fail("1 to 60000") }
            checkpointInterval = .milliseconds(number)
        case "kt_retry_interval":
            guard let number = Int(value), number > 0 else { throw fail("a number of seconds above 0") }
            ktRetryInterval = .seconds(number)
        case "blob_max_bytes":
            guard let number = Int(value), number >= 0 else { throw fail("a number of bytes, 0 or more") }
            blobMaxBytes = number
        case "sync_max_blob_bytes":
            guard let number = Int(value), number >= 0 else { throw fail("a number of bytes, 0 or more") }
            syncMaxBlobBytes = number
        case "blob_ttl": blobTTL = try seconds()
        case "blob_sweep_interval":
            guard let number = Int(value), number > 0 else { throw fail("a number of seconds above 0") }
            blobSweepInterval = .seconds(number)
        case "blob_uploads_per_hour":
            guard let number = Int(value), number > 0 else { throw fail("a whole number above 0") }
            blobUploadsPerHour = number
        case "blob_bytes_per_hour":
            guard let number = Int64(value), number > 0 else { throw fail("a number of bytes above 0") }
            blobBytesPerHour = number
        case "blob_bytes_per_token":
            guard let number = Int64(value), number > 0, number <= Int64.max / 64 else {
                throw fail("a number of bytes above 0 (and below 2^57)")
            }
            blobBytesPerToken = number
        case "blob_bytes_per_upload_token":
            guard let number = Int64(value), number > 0, number <= Int64.max / 64 else {
                throw fail("a number of bytes above 0 (and below 2^57)")
            }
            blobBytesPerUploadToken = number
        case "blob_allow_anonymous_uploads":
            guard let flag = Bool(value.lowercased()) else { throw fail("true or false") }
            blobAllowAnonymousUploads = flag
        case "relay_max_subjects":
            guard let number = Int(value), (1...1024).contains(number) else { throw fail("1 to 1024") }
            relayMaximumSubjects = number
        case "relay_max_payload_bytes":
            guard let number = Int(value), (1024...(16 << 20)).contains(number) else {
                throw fail("a number of bytes from 1024 to 16777216")
            }
            relayMaximumPayloadBytes = number
        case "relay_max_queued_frames":
            guard let number = Int(value), (1...65_536).contains(number) else { throw fail("1 to 65536") }
            relayMaximumQueuedFrames = number
        case "relay_tokens":
            guard let mode = RelayTokens(rawValue: value) else { throw fail("credential or insecure-dev") }
            relayTokens = mode
        case "relay_push_webhook_url":
            guard let url = URL(string: value), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw fail("an http or https URL")
            }
            relayPushWebhookURL = url
        case "relay_push_webhook_secret":
            relayPushWebhookSecret = value
        case "connection_limit":
            guard let number = Int(value), (1...65_536).contains(number) else { throw fail("1 to 65536") }
            connectionLimit = number
        case "connections_per_address":
            guard let number = Int(value), (1...65_536).contains(number) else { throw fail("1 to 65536") }
            connectionsPerAddress = number
        case "websocket_limit":
            guard let number = Int(value), (1...10_000_000).contains(number) else { throw fail("1 to 10000000") }
            webSocketLimit = number
        case "websockets_per_address":
            guard let number = Int(value), (1...10_000_000).contains(number) else { throw fail("1 to 10000000") }
            webSocketsPerAddress = number
        case "header_timeout":
            guard let number = TimeInterval(value), number > 0, number <= 3600 else {
                throw fail("a number of seconds above 0, at most 3600")
            }
            headerTimeout = number
        case "minimum_body_rate":
            guard let number = Int(value), number >= 0 else { throw fail("bytes per second, 0 or more (0: none)") }
            minimumBodyRate = number
        case "websocket_ping_interval", "websocket_ping_timeout":
            guard let number = TimeInterval(value), number > 0, number <= 86_400 else {
                throw fail("a number of seconds above 0, at most 86400")
            }
            if name == "websocket_ping_interval" {
                webSocketPingInterval = number
            } else {
                webSocketPingTimeout = number
            }
        case "webhook_timeout":
            guard let number = Int(value), (1...3600).contains(number) else { throw fail("1 to 3600 seconds") }
            webhookTimeout = TimeInterval(number)
        case "client_requests_per_minute":
            guard let number = Int(value), number > 0 else { throw fail("a whole number above 0") }
            clientRequestsPerMinute = number
        case "trusted_proxies":
            let addresses = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard addresses.allSatisfy(ForwardedForMiddleware.isIPAddress) else {
                throw fail("comma-separated IP addresses, like 127.0.0.1,::1")
            }
            trustedProxies = Set(addresses)
        default:
            throw ServerError(
                .configuration,
                "\(source): there is no setting \"\(name)\"; the settings are "
                    + Self.settings.map(\.name).joined(separator: ", "))
        }
    }

    /// Checks the settings that only make sense together: a TLS certificate with its key, and an address other than
    /// 127.0.0.1 only with TLS (this server speaks plain HTTP to this machine alone).
    public func checkTogether() throws(ServerError) {
        switch (tlsCertificateFile, tlsKeyFile) {
        case (nil, nil):
            guard address == "127.0.0.1" else {
                throw ServerError(
                    .configuration,
                    "address \(address) needs tls_cert and tls_key: plain HTTP is served on 127.0.0.1 only, for a "
                        + "TLS-terminating proxy on this machine")
            }
        case (.some, nil):
            throw ServerError(.configuration, "tls_cert needs tls_key, the certificate's private key")
        case (nil, .some):
            throw ServerError(.configuration, "tls_key needs tls_cert, the certificate chain it is the key of")
        case (.some, .some):
            break
        }
    }

    /// Applies a JSON configuration file: an object whose keys are setting names; strings, numbers, booleans
    /// and (for lists) arrays of strings.
    public mutating func apply(file: URL) throws(ServerError) {
        guard let data = try? Data(contentsOf: file) else {
            throw ServerError(.configuration, "cannot read the configuration file \(file.path)")
        }
        let object: [String: FileValue]
        do {
            object = try JSONDecoder().decode([String: FileValue].self, from: data)
        } catch {
            throw ServerError(
                .configuration,
                "\(file.path) is not a JSON object of settings (strings, numbers, booleans, lists of strings)")
        }
        for (name, value) in object.sorted(by: { $0.key < $1.key }) {
            try set(name, value.text, source: file.path)
        }
    }

    /// One value of a configuration file, as the text a flag would carry.
    private enum FileValue: Decodable {
        case text(String)

        var text: String {
            switch self {
            case .text(let text): text
            }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let flag = try? container.decode(Bool.self) {
                self = .text(flag ? "true" : "false")
            } else if let number = try? container.decode(Int.self) {
                self = .text(String(number))
            } else if let string = try? container.decode(String.self) {
                self = .text(string)
            } else {
                self = .text(try container.decode([String].self).joined(separator: ","))
            }
        }
    }

    /// Applies every `PIXIE_<SETTING>` variable of `environment`; other `PIXIE_` variables are an error.
    public mutating func apply(environment: [String: String]) throws(ServerError) {
        for (variable, value) in environment.sorted(by: { $0.key < $1.key }) where variable.hasPrefix("PIXIE_") {
            try set(String(variable.dropFirst(6)).lowercased(), value, source: "the environment variable \(variable)")
        }
    }
}
