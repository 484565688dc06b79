import Foundation
import HTTPServer
import Synchronization

/// Counters and histograms, exposed at `/metrics` in the Prometheus text format (version 0.0.4).
public final class Metrics: Sendable {
    /// Latency buckets in seconds, for `pixie_http_request_duration_seconds`.
    public static let durationBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

    private struct Series: Hashable {
        let name: String
        let labels: [String: String]
    }

    private struct Histogram {
        var counts: [Int]
        var sum: Double = 0
        var count = 0
    }

    private struct State {
        var help: [String: (type: String, text: String)] = [:]
        var counters: [Series: Double] = [:]
        var histograms: [Series: Histogram] = [:]
        var gauges: [Series: @Sendable () -> Double] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// Declares a metric's `# HELP` and `# TYPE` lines; optional, but every metric the server exposes has one.
    public func describe(_ name: String, type: String, help: String) {
        state.withLock { $0.help[name] = (type, help) }
    }

    public func increment(_ name: String, by amount: Double = 1, labels: [String: String] = [:]) {
        state.withLock { $0.counters[Series(name: name, labels: labels), default: 0] += amount }
    }

    public func observe(_ name: String, _ value: Double, labels: [String: String] = [:]) {
        state.withLock { state in
            var histogram =
                state.histograms[Series(name: name, labels: labels)]
                ?? Histogram(counts: Array(repeating: 0, count: Self.durationBuckets.count))
            for (index, bound) in Self.durationBuckets.enumerated() where value <= bound {
                histogram.counts[index] += 1
            }
            histogram.sum += value
            histogram.count += 1
            state.histograms[Series(name: name, labels: labels)] = histogram
        }
    }

    /// A gauge read when `/metrics` is scraped.
    public func gauge(_ name: String, labels: [String: String] = [:], read: @escaping @Sendable () -> Double) {
        state.withLock { $0.gauges[Series(name: name, labels: labels)] = read }
    }

    /// The value of a counter (0 when never incremented); for tests and health checks.
    public func counter(_ name: String, labels: [String: String] = [:]) -> Double {
        state.withLock { $0.counters[Series(name: name, labels: labels)] ?? 0 }
    }

    /// Every series in the Prometheus text exposition format, sorted for stable output.
    public func exposition() -> String {
        var snapshot = state.withLock { $0 }
        for (series, read) in snapshot.gauges { snapshot.counters[series] = read() }
        var lines: [String] = []
        let names = Set(snapshot.counters.keys.map(\.name)).union(snapshot.histograms.keys.map(\.name)).sorted()
        for name in names {
            if let help = snapshot.help[name] {
                lines.append("# HELP \(name) \(help.text)")
                lines.append("# TYPE \(name) \(help.type)")
            }
            for (series, value) in snapshot.counters.filter({ $0.key.name == name })
                .sorted(by: { Self.render($0.key.labels) < Self.render($1.key.labels) })
            {
                lines.append("\(name)\(Self.render(series.labels)) \(Self.number(value))")
            }
            for (series, histogram) in snapshot.histograms.filter({ $0.key.name == name })
                .sorted(by: { Self.render($0.key.labels) < Self.render($1.key.labels) })
            {
                for (index, bound) in Self.durationBuckets.enumerated() {
                    var labels = series.labels
                    labels["le"] = Self.number(bound)
                    lines.append("\(name)_bucket\(Self.render(labels)) \(histogram.counts[index])")
                }
                var labels = series.labels
                labels["le"] = "+Inf"
                lines.append("\(name)_bucket\(Self.render(labels)) \(histogram.count)")
                lines.append("\(name)_sum\(Self.render(series.labels)) \(Self.number(histogram.sum))")
                lines.append("\(name)_count\(Self.render(series.labels)) \(histogram.count)")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func render(_ labels: [String: String]) -> String {
        guard !labels.isEmpty else { return "" }
        let pairs = labels.sorted { $0.key < $1.key }.map { key, value in
            let escaped = value.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
            return "\(key)=\"\(escaped)\""
        }
        return "{" + pairs.joined(separator: ",") + "}"
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

extension Metrics {
    /// The server's connections, limits and refusals, and the process's threads and open files, as gauges and
    /// counters read at each scrape.
    public func gauges(for server: HTTPServer) {
        let readings: [(name: String, labels: [String: String], read: @Sendable (HTTPServer.Statistics) -> Int)] = [
            ("pixie_http_connections", [:], { $0.httpConnections }),
            ("pixie_http_connection_limit", [:], { $0.httpConnectionLimit }),
            ("pixie_websockets", [:], { $0.webSockets }),
            ("pixie_websocket_limit", [:], { $0.webSocketLimit }),
            ("pixie_busiest_address_http_connections", [:], { $0.busiestAddressHTTPConnections }),
            ("pixie_busiest_address_websockets", [:], { $0.busiestAddressWebSockets }),
            ("pixie_http_connections_refused_per_address_total", [:], { $0.httpConnectionsRefusedPerAddress }),
            ("pixie_websockets_refused_total", ["reason": "per_address"], { $0.webSocketsRefusedPerAddress }),
            ("pixie_websockets_refused_total", ["reason": "limit"], { $0.webSocketsRefusedAtLimit }),
            ("pixie_http_header_timeouts_total", [:], { $0.headerTimeouts }),
            ("pixie_http_slow_bodies_total", [:], { $0.slowBodies }),
            ("pixie_websockets_silent_total", [:], { $0.webSocketsSilent }),
        ]
        let help: [(String, String, String)] = [
            ("pixie_http_connections", "gauge", "HTTP connections open now"),
            ("pixie_http_connection_limit", "gauge", "HTTP connections allowed at once"),
            ("pixie_websockets", "gauge", "WebSockets open now"),
            ("pixie_websocket_limit", "gauge", "WebSockets allowed at once"),
            ("pixie_busiest_address_http_connections", "gauge", "most HTTP connections one address holds now"),
            ("pixie_busiest_address_websockets", "gauge", "most WebSockets one client address holds now"),
            (
                "pixie_http_connections_refused_per_address_total", "counter",
                "connections closed unanswered: their address held its share"
            ),
            ("pixie_websockets_refused_total", "counter", "WebSocket upgrades refused"),
            ("pixie_http_header_timeouts_total", "counter", "connections closed for a request head not sent in time"),
            ("pixie_http_slow_bodies_total", "counter", "connections closed for a body below the minimum rate"),
            ("pixie_websockets_silent_total", "counter", "WebSockets closed for answering no ping"),
        ]
        for (name, type, text) in help { describe(name, type: type, help: text) }
        for metric in readings {
            let read = metric.read
            gauge(metric.name, labels: metric.labels) { Double(read(server.statistics)) }
        }
        describe("process_threads", type: "gauge", help: "threads of this process")
        gauge("process_threads") { Double(Self.processStatus("Threads:") ?? 0) }
        describe("process_open_fds", type: "gauge", help: "open file descriptors of this process")
        gauge("process_open_fds") {
            Double((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0)
        }
        describe("process_resident_memory_bytes", type: "gauge", help: "resident memory of this process")
        gauge("process_resident_memory_bytes") { Double((Self.processStatus("VmRSS:") ?? 0) * 1024) }
    }

    /// A number field of /proc/self/status (kB for sizes), or nil where there is none.
    private static func processStatus(_ field: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(field) {
            return Int(line.dropFirst(field.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }
}
