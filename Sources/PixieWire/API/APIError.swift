import Foundation

/// The body of every error pixie-server answers itself (docs/pixie-protocol.md, "Errors"):
/// `{"error": "<code>", "reason": "<what was wrong and what to do>"}`. `error` is a stable snake_case code a
/// program may branch on; `reason` is English for a person and may change.
public struct APIErrorResponse: Codable, Sendable, Equatable, Error {
    public var error: String
    public var reason: String

    public init(error: String, reason: String) {
        self.error = error
        self.reason = reason
    }
}

/// GET /healthz: `{"status": "ok"}` while the process serves requests.
public struct HealthResponse: Codable, Sendable, Equatable {
    public var status: String
    public init(status: String) { self.status = status }
}
