import Foundation
import PixieWire
import Synchronization

/// Delivers the relay's one alert-class push to a sleeping device (000_e422bd9a7c930342.txt: "a reliable
/// alert-class push, strong enough to relaunch a force-quit app"). The relay decides when (a Sync frame to a
/// subject no connection holds, once per wake episode); the gateway only delivers.
public protocol PushGateway: Sendable {
    /// Pushes a `sync` wake for `subject` to the device registered as `pushToken`; throws ``ServerError``
    /// (`.upstream`) when it cannot.
    func wake(_ subject: RelaySubject, pushToken: Data) async throws(ServerError)
}

/// Posts each wake to a push provider's webhook: `POST <url>` with
/// `{"subject": "<base64url>", "wake": "sync", "push_token": "<base64url>"}` and, when configured,
/// `Authorization: Bearer <secret>`. A status outside 2xx, or no answer within `timeout`, is a failure.
public struct WebhookPushGateway: PushGateway {
    private let webhook: Webhook
    public var url: URL { webhook.url }
    public var bearerSecret: String? { webhook.bearerSecret }
    public var timeout: TimeInterval { webhook.timeout }

    public init(url: URL, bearerSecret: String? = nil, timeout: TimeInterval = 10) {
        webhook = Webhook(name: "push webhook", url: url, bearerSecret: bearerSecret, timeout: timeout)
    }

    public func wake(_ subject: RelaySubject, pushToken: Data) async throws(ServerError) {
        try await webhook.post([
            "subject": subject.rawRepresentation.base64URLEncodedString(), "wake": "sync",
            "push_token": pushToken.base64URLEncodedString(),
        ])
    }
}

/// Records every wake instead of sending it (tests), and logs it when given a logger (the development
/// default when no webhook is configured: nothing reaches a phone).
public final class RecordingPushGateway: PushGateway {
    private let recorded = Mutex<[(subject: RelaySubject, pushToken: Data)]>([])
    private let logger: Logger?

    public init(logger: Logger? = nil) { self.logger = logger }

    public func wake(_ subject: RelaySubject, pushToken: Data) async throws(ServerError) {
        recorded.withLock { $0.append((subject, pushToken)) }
        logger?.info("development push (not sent to any device)", ["subject": subject.redacted])
    }

    /// The wakes so far, oldest first.
    public var wakes: [(subject: RelaySubject, pushToken: Data)] { recorded.withLock { $0 } }
}
