import Foundation
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

    /// The value of a counter (0 when never incremented); for tests and health checks.
    public func counter(_ name: String, labels: [String: String] = [:]) -> Double {
        state.withLock { $0.counters[Series(name: name, labels: labels)] ?? 0 }
    }

    /// Every series in the Prometheus text exposition format, sorted for stable output.
    public func exposition() -> String {
        let snapshot = state.withLock { $0 }
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
