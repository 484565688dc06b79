import Foundation
import HTTPServer
import PixieServer
import Synchronization
import Testing

@Suite("pixie-server logs, metrics and rate limits")
struct ObservabilityTests {
    @Test func logsAreOneJSONObjectPerLine() throws {
        let lines = Mutex<[String]>([])
        let logger = Logger(service: "test", minimumLevel: .info) { line in lines.withLock { $0.append(line) } }
        logger.debug("hidden")
        logger.info("shown", ["count": 3, "name": "x\ny", "ok": true])
        logger.named("identity").error("bad")
        let captured = lines.withLock { $0 }
        #expect(captured.count == 2)
        #expect(!captured[0].contains("\n"))
        let first = try #require(try JSONSerialization.jsonObject(with: Data(captured[0].utf8)) as? [String: Any])
        #expect(first["msg"] as? String == "shown")
        #expect(first["level"] as? String == "info")
        #expect(first["service"] as? String == "test")
        #expect(first["count"] as? Int == 3)
        #expect(first["name"] as? String == "x\ny")
        #expect((first["ts"] as? String)?.hasSuffix("Z") == true)
        let second = try #require(try JSONSerialization.jsonObject(with: Data(captured[1].utf8)) as? [String: Any])
        #expect(second["service"] as? String == "identity")
    }

    @Test func metricsUseThePrometheusTextFormat() {
        let metrics = Metrics()
        metrics.describe("pixie_things_total", type: "counter", help: "Things.")
        metrics.increment("pixie_things_total", labels: ["kind": "a\"b"])
        metrics.increment("pixie_things_total", by: 2, labels: ["kind": "c"])
        metrics.observe("pixie_wait_seconds", 0.003)
        let text = metrics.exposition()
        #expect(text.contains("# HELP pixie_things_total Things.\n# TYPE pixie_things_total counter\n"))
        #expect(text.contains(#"pixie_things_total{kind="a\"b"} 1"#))
        #expect(text.contains(#"pixie_things_total{kind="c"} 2"#))
        #expect(text.contains(#"pixie_wait_seconds_bucket{le="0.0025"} 0"#))
        #expect(text.contains(#"pixie_wait_seconds_bucket{le="0.005"} 1"#))
        #expect(text.contains(#"pixie_wait_seconds_bucket{le="+Inf"} 1"#))
        #expect(text.contains("pixie_wait_seconds_count 1"))
        #expect(metrics.counter("pixie_things_total", labels: ["kind": "c"]) == 2)
    }

    @Test func requestsAreCountedByRouteAndStatus() async throws {
        let fixture = try Fixture()
        _ = await fixture.get("/healthz")
        _ = await fixture.get("/no/such/path/\(UUID().uuidString)")
        _ = await fixture.post("/v1/discovery/own", "{}")
        let text = await fixture.get("/metrics").bodyText
        #expect(text.contains(#"pixie_http_requests_total{method="GET",route="/healthz",status="200"} 1"#))
        #expect(text.contains(#"pixie_http_requests_total{method="GET",route="unmatched",status="404"} 1"#))
        #expect(text.contains(#"pixie_http_requests_total{method="POST",route="/v1/discovery/own",status="400"} 1"#))
        #expect(!text.contains("/no/such/path"))
    }

    @Test func bucketsRefillWithTime() {
        let clock = ManualClock()
        let limiter = RateLimiter(capacity: 3, per: 60, clock: clock.clock)
        #expect(limiter.acquire("a") == nil)
        #expect(limiter.acquire("a") == nil)
        #expect(limiter.acquire("a") == nil)
        let wait = limiter.acquire("a")
        #expect(wait.map { $0 > 19 && $0 <= 20 } == true, "\(String(describing: wait))")
        #expect(limiter.acquire("b") == nil)
        clock.advance(by: 20)
        #expect(limiter.acquire("a") == nil)
        #expect(limiter.acquire("a") != nil)
    }
}
