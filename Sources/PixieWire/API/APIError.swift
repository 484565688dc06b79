import Foundation

/// The body of every error pixie-server answers itself (docs/pixie-protocol.md, "Errors"):
/// `{"error": "<code>", "reason": "<what was wrong and what to do>"}`. `error` is a stable snake_case code a
/// program may branch on; `reason` is English for a person and may change.
public struct APIErrorResponse: Codable, Sendable, Equatable, Error {
    public var error: String
    public var reason: String
    /// With `device_removed` only: when the session's device was removed, Unix seconds.
    public var removedAt: Int64?
    /// With `device_removed` only: the name of the device that removed it (absent when a `replace_all`
    /// enrollment did).
    public var removedBy: String?

    public init(error: String, reason: String, removedAt: Int64? = nil, removedBy: String? = nil) {
        self.error = error
        self.reason = reason
        self.removedAt = removedAt
        self.removedBy = removedBy
    }

    enum CodingKeys: String, CodingKey {
        case error, reason
        case removedAt = "removed_at"
        case removedBy = "removed_by"
    }
}

/// GET /healthz: `{"status": "ok"}` while the process serves requests.
public struct HealthResponse: Codable, Sendable, Equatable {
    public var status: String
    public init(status: String) { self.status = status }
}
