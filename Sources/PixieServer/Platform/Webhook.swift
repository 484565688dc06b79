import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A JSON `POST` to an operator's webhook (the SMS gateway, the push provider), with
/// `Authorization: Bearer <secret>` when one is configured. It fails, as an `.upstream` ``ServerError``
/// naming the webhook, when the webhook answers outside 2xx or has not answered within `timeout` seconds
/// (``Foundation/URLSession/limited(to:)``).
struct Webhook: Sendable {
    /// What the errors call it: "SMS webhook", "push webhook".
    let name: String
    let url: URL
    let bearerSecret: String?
    let timeout: TimeInterval
    private let session: URLSession

    init(name: String, url: URL, bearerSecret: String?, timeout: TimeInterval) {
        self.name = name
        self.url = url
        self.bearerSecret = bearerSecret
        session = URLSession.limited(to: timeout)
        self.timeout = session.configuration.timeoutIntervalForResource
    }

    /// Posts `object` as JSON (keys sorted) and returns once the webhook answered 2xx.
    func post(_ object: [String: String]) async throws(ServerError) {
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        if let bearerSecret { request.setValue("Bearer \(bearerSecret)", forHTTPHeaderField: "Authorization") }
        request.httpBody = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        let status: Int
        do {
            let (_, response) = try await session.data(for: request)
            status = (response as? HTTPURLResponse)?.statusCode ?? 0
        } catch let error as URLError where error.code == .timedOut {
            throw ServerError(.upstream, "the \(name) \(url.absoluteString) did not answer within \(Int(timeout)) s")
        } catch {
            throw ServerError(.upstream, "the \(name) \(url.absoluteString) did not answer: \(error)")
        }
        guard (200..<300).contains(status) else {
            throw ServerError(.upstream, "the \(name) \(url.absoluteString) answered \(status)")
        }
    }
}
