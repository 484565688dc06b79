import Foundation
import PixieWire

/// Sends the one-time passcode to a phone. phone-verify-svc takes one of these; the development sink is
/// the default, an HTTP webhook reaches a real SMS gateway.
public protocol SMSSender: Sendable {
    /// Delivers `text` to `number`; throws ``ServerError`` (code `.upstream`) when it cannot.
    func send(_ text: String, to number: PhoneNumber) async throws(ServerError)
}

/// The development sink: appends each message as a JSON line (`{"text":…,"to":…,"ts":…}`: the whole message
/// with its code, the E.164 number, Unix seconds) to a file, and logs `development SMS (not sent to any phone)`
/// with only the redacted number (`to`) and the file's path (`outbox`), never the code. Never for production:
/// the codes are readable by whoever reads the file.
public struct DevelopmentSMSSink: SMSSender {
    public let outbox: URL
    public let logger: Logger
    public let clock: PixieClock

    public init(outbox: URL, logger: Logger, clock: PixieClock = .system) {
        self.outbox = outbox
        self.logger = logger
        self.clock = clock
    }

    public func send(_ text: String, to number: PhoneNumber) async throws(ServerError) {
        let line: [String: Any] = ["to": number.e164, "text": text, "ts": Int(clock.now().timeIntervalSince1970)]
        guard var data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys]) else {
            throw ServerError(.upstream, "the development SMS line could not be encoded")
        }
        data.append(0x0A)
        let fd = open(outbox.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ServerError(
                .upstream, "cannot open the development SMS outbox \(outbox.path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count else {
            throw ServerError(.upstream, "cannot append to the development SMS outbox \(outbox.path)")
        }
        logger.info("development SMS (not sent to any phone)", ["to": number.redacted, "outbox": outbox.path])
    }
}

/// Posts each message to an SMS gateway's webhook: `POST <url>` with `{"to": "+…", "text": "…"}` and, when
/// configured, `Authorization: Bearer <secret>`. Any status outside 2xx, or no answer within `timeout`, is a
/// failure, which the start request reports as 502.
public struct WebhookSMSSender: SMSSender {
    private let webhook: Webhook
    public var url: URL { webhook.url }
    public var bearerSecret: String? { webhook.bearerSecret }
    public var timeout: TimeInterval { webhook.timeout }

    public init(url: URL, bearerSecret: String? = nil, timeout: TimeInterval = 10) {
        webhook = Webhook(name: "SMS webhook", url: url, bearerSecret: bearerSecret, timeout: timeout)
    }

    public func send(_ text: String, to number: PhoneNumber) async throws(ServerError) {
        try await webhook.post(["to": number.e164, "text": text])
    }
}
