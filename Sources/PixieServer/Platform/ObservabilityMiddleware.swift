import Foundation
import HTTPServer

/// Logs every request as one JSON line and counts it in `/metrics`: requests by route and status, and a
/// latency histogram. A 5xx is logged at error level. The route label is the matched route's pattern
/// (``HTTPServer/HTTPRequest/route``, `/v1/blobs/:blob_id`), never the path, and `unmatched` where no route
/// matches (404/405), so neither a scan of random paths nor identifiers in paths can grow the metrics without
/// bound.
struct ObservabilityMiddleware: HTTPMiddleware {
    let logger: Logger
    let metrics: Metrics

    init(logger: Logger, metrics: Metrics) {
        self.logger = logger
        self.metrics = metrics
        metrics.describe("pixie_http_requests_total", type: "counter", help: "HTTP requests, by route and status.")
        metrics.describe(
            "pixie_http_request_duration_seconds", type: "histogram", help: "Time to answer, by route.")
    }

    func handle(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        let start = ContinuousClock.now
        let response: HTTPResponse
        do {
            response = try await next(request)
        } catch let error as HTTPError {
            response = error.response
        } catch {
            logger.error("a handler failed", ["path": request.path, "error": "\(error)"])
            response =
                HTTPError(.internalServerError, .internalError, "the server failed to answer; try again later")
                .response
        }
        let elapsed = start.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let route = request.route ?? "unmatched"
        metrics.increment(
            "pixie_http_requests_total",
            labels: ["method": request.method.rawValue, "route": route, "status": String(response.status.code)])
        metrics.observe("pixie_http_request_duration_seconds", seconds, labels: ["route": route])
        let level: Logger.Level = response.status.code >= 500 ? .error : .info
        var fields: [String: any Sendable] = [
            "method": request.method.rawValue, "path": request.path, "status": response.status.code,
            "ms": (seconds * 1000 * 100).rounded() / 100,
        ]
        if response.status.code >= 400,
            let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
            let code = object["error"] as? String
        {
            fields["error"] = code
        }
        logger.log(level, "request", fields)
        return response
    }
}
