import Foundation
import HTTPServer
import Storage

extension Date {
    /// Whole seconds since 1970, the unit of every time in Pixie's store and JSON.
    var unixSeconds: Int64 { Int64(timeIntervalSince1970.rounded(.down)) }
}

extension HTTPRequest {
    /// The key a per-client rate limit counts under: the peer's address as the server saw it.
    var clientKey: String { remoteAddress ?? "unknown" }
}

extension HTTPResponse.Status {
    static let gone = HTTPResponse.Status(410)
    static let badGateway = HTTPResponse.Status(502)
}

extension HTTPError.Code {
    static let rateLimited = HTTPError.Code("rate_limited")
    static let invalidPhoneNumber = HTTPError.Code("invalid_phone_number")
    static let invalidCode = HTTPError.Code("invalid_code")
    static let wrongCode = HTTPError.Code("wrong_code")
    static let codeExpired = HTTPError.Code("code_expired")
    static let codeAlreadyUsed = HTTPError.Code("code_already_used")
    static let tooManyAttempts = HTTPError.Code("too_many_attempts")
    static let verificationNotFound = HTTPError.Code("verification_not_found")
    static let smsFailed = HTTPError.Code("sms_failed")
    static let storage = HTTPError.Code("storage")
    /// A relay node whose bus does not reach the other nodes (`/healthz`).
    static let relayBusUnavailable = HTTPError.Code("relay_bus_unavailable")
}

/// Runs a store operation; a storage failure becomes a 503 that tells the client to retry (the details go to
/// the log, never to the client).
func store<T>(_ logger: Logger, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as HTTPError {
        throw error
    } catch {
        logger.error("a store operation failed", ["error": "\(error)"])
        throw HTTPError(.serviceUnavailable, .storage, "the server's store is unavailable; try again shortly")
    }
}
