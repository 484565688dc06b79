import Foundation
import PixieDevice
import PixieWire

/// `signin-bench --revocation N,...` (docs/benchmarks.md, "Revoking a device"): for each N, an account of N + 2
/// devices made by real sign-ins (the phone approves each), then the phone removes one device and the N that stay
/// take the new keys. Times and bytes: the removal (the tap to the server's answer, once the log holds the
/// rotation), one returning sibling's catch-up alone, and the rest catching up at once (the last of them is the
/// last online sibling on the new channel key). The anchor, from the same run: the sign-ins that made the
/// account, which a full re-sign-in of every remaining device (what `replace_all` forces) would repeat N times.
struct RevocationRun {
    let siblings: Int
    /// Each setup sign-in's whole path, seconds.
    let signIns: [Double]
    let removal: Double
    let removalBytes: Int
    let returning: Double
    let returningBytes: Int
    /// The N - 1 others at once: until the last had the new keys.
    let allOthers: Double
}

extension World {
    /// One account with `siblings` + 2 devices, one removed by its first; see ``RevocationRun``.
    func revocation(siblings: Int, index: Int) async throws -> RevocationRun {
        let account = try await accounts(index..<(index + 1), parallel: 1)[0]
        var signIns: [Double] = []
        var homes: [DeviceHome] = []
        for device in 0...siblings {
            let home = try DeviceHome(directory: work.appendingPathComponent("rev-\(index)-\(device)"))
            let name = device == siblings ? "gone" : "sibling \(device)"
            signIns.append(try await signIn(account, into: home, name: name).whole)
            if device < siblings { homes.append(home) }
        }
        stopListening()

        let counter = Counter()
        let removal = try await timed(counter) { environment in
            _ = try await DeviceContext(home: account.home, environment: environment).removeDevice(named: "gone")
        }
        let returningCounter = Counter()
        let returning = try await timed(returningCounter) { environment in
            _ = try await DeviceContext(home: homes[0], environment: environment).followRotations()
        }
        let others = try await timed(Counter()) { environment in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for home in homes.dropFirst() {
                    group.addTask {
                        _ = try await DeviceContext(home: home, environment: environment).followRotations()
                    }
                }
                try await group.waitForAll()
            }
        }
        for home in homes {
            guard try home.state().membership?.epoch == 2 else { throw BenchError("a sibling missed the rotation") }
        }
        return RevocationRun(
            siblings: siblings, signIns: signIns, removal: removal.seconds, removalBytes: counter.bytes,
            returning: returning.seconds, returningBytes: returningCounter.bytes, allOthers: others.seconds)
    }

    /// Runs `body` on an environment whose transport counts its bytes in `counter`; returns how long it took.
    private func timed(
        _ counter: Counter, _ body: (DeviceEnvironment) async throws -> Void
    ) async throws -> Duration {
        let tls = environment.tls
        let counting = DeviceEnvironment(
            transport: { CountingTransport(inner: SocketHTTPTransport(baseURL: $0, tls: tls), counter: counter) },
            tls: tls)
        let start = ContinuousClock.now
        try await body(counting)
        return ContinuousClock.now - start
    }
}

/// The bytes of every request and response body a transport carried.
final class Counter: Sendable {
    private let total = Locked(0)
    func add(_ count: Int) { total.withLock { $0 += count } }
    var bytes: Int { total.withLock { $0 } }
}

struct CountingTransport: HTTPTransport {
    let inner: any HTTPTransport
    let counter: Counter

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let response = try await inner.send(request)
        counter.add((request.body?.count ?? 0) + response.body.count)
        return response
    }
}

/// Prints the runs as docs/benchmarks.md's table.
func printRevocation(_ runs: [RevocationRun]) {
    func ms(_ value: Double) -> String { String(format: "%.1f ms", value * 1000) }
    func kib(_ bytes: Int) -> String { String(format: "%.1f KiB", Double(bytes) / 1024) }
    print("| remaining siblings | " + runs.map { "\($0.siblings)" }.joined(separator: " | ") + " |")
    print("|---|" + runs.map { _ in "---:" }.joined(separator: "|") + "|")
    func row(_ name: String, _ value: (RevocationRun) -> String) {
        print("| \(name) | " + runs.map(value).joined(separator: " | ") + " |")
    }
    let medians = runs.map { $0.signIns.sorted()[$0.signIns.count / 2] }
    row("removal: the tap to the answer (rotation made, sealed to each, logged)") { ms($0.removal) }
    row("its HTTP bodies, both ways") { kib($0.removalBytes) }
    row("the others at once, until the last took the new keys") { ms($0.allOthers) }
    row("**the tap to the last sibling on the new keys**") { "**\(ms($0.removal + $0.allOthers))**" }
    row("a returning sibling's catch-up, alone") { ms($0.returning) }
    row("its HTTP bodies, both ways") { kib($0.returningBytes) }
    print(
        "| a sign-in of one device (median of the N + 1 that made the account) | "
            + medians.map(ms).joined(separator: " | ") + " |")
    print(
        "| a re-sign-in of every remaining device, one after another (N × that) | "
            + zip(runs, medians).map { ms(Double($0.siblings) * $1) }.joined(separator: " | ") + " |")
    print(
        "| **revocation / re-sign-in of all** | "
            + zip(runs, medians).map {
                String(format: "**%.3f**", ($0.removal + $0.allOthers) / (Double($0.siblings) * $1))
            }.joined(separator: " | ") + " |")
}
