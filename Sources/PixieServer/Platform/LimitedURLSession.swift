import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// A session whose every request fails with `URLError.timedOut` once it has taken `seconds`, from its
    /// start to the end of its answer's body. The limit is rounded up to whole seconds, at least 1
    /// (FoundationNetworking times a sub-second limit out at once), and at most a day (it counts in
    /// milliseconds in an `Int`).
    ///
    /// The limit is the session's (`timeoutIntervalForResource`), not the request's: FoundationNetworking on
    /// Linux does not apply a `URLRequest`'s `timeoutInterval` to a server that takes the request and never
    /// answers, so with that alone a stalled peer would hold the caller for good.
    static func limited(to seconds: TimeInterval) -> URLSession {
        let limit = min(max(1, seconds.rounded(.up)), 86_400)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = limit
        configuration.timeoutIntervalForResource = limit
        return URLSession(configuration: configuration)
    }
}
