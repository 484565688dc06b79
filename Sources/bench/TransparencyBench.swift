import Foundation
import SiblingsCrypto
import Storage
import Transparency
import TransparencyLog

/// Key transparency on a temporary SQLite file (WAL): binding updates per second through the sequencer, then a log
/// of `--entries` entries (10^6 by default): how long it takes to build and to reopen (the map is rebuilt from
/// the stored leaves), and the sizes and verification times of lookup and consistency proofs.
/// Targets (issue 7): ≥ 2,000 updates/s; proofs ≤ 2 KiB and verified in ≤ 1 ms at 10^6 entries.
func transparencyTable(_ options: Bench) async throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("kt-bench-\(UUID())")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: root) }
    let key = try HybridSignature.PrivateKey(seedRepresentation: Data(repeating: 1, count: 32))
    let origin = "bench.pixie/kt"
    let logKey = try LogKey(origin: origin, publicKey: key.publicKey)
    let clock = ContinuousClock()
    var rows: [(String, String)] = []

    // 1. Updates through the sequencer at its default 1 s interval, sustained: `writers` writers each append in
    // a loop (waiting for each acknowledgement) for 3 s; updates acknowledged per second of wall time, the waits
    // for checkpoints included.
    do {
        let database = try SQLiteDatabase(path: root.appendingPathComponent("throughput.sqlite").path)
        let sequencer = try Sequencer(database: database, key: key, origin: origin)
        for writers in [2_000, 5_000, 20_000] {
            let before = await sequencer.checkpointsSigned
            let start = clock.now
            let deadline = start + .seconds(3)
            let acknowledged = try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<writers {
                    group.addTask {
                        var count = 0
                        let label = try Label("discovery/\(writers)-\(i)")
                        while ContinuousClock.now < deadline {
                            _ = try await sequencer.append(label: label, value: Data(count: 64))
                            count += 1
                        }
                        return count
                    }
                }
                return try await group.reduce(0, +)
            }
            let elapsed = seconds(clock.now - start)
            let checkpoints = await sequencer.checkpointsSigned - before
            rows.append(
                (
                    "binding updates through the sequencer, \(writers) writers in a loop for 3 s, 1 s interval "
                        + "(\(checkpoints) checkpoints)",
                    String(format: "%.0f updates/s", Double(acknowledged) / elapsed)
                ))
        }
        database.close()
    }

    // 2. A log of `entries` entries, loaded in batches of 10,000 (one transaction and one checkpoint each).
    let entries = options.entries
    let path = root.appendingPathComponent("large.sqlite").path
    let labelCount = max(1, entries * 4 / 5)
    let buildStart = clock.now
    do {
        let database = try SQLiteDatabase(path: path)
        let sequencer = try Sequencer(database: database, key: key, origin: origin)
        var next = 0
        while next < entries {
            let batch = min(10_000, entries - next)
            try await sequencer.integrate(
                try (next..<next + batch).map { (try Label("discovery/\($0 % labelCount)"), Data(count: 64)) })
            next += batch
        }
        database.close()
    }
    let buildTime = seconds(clock.now - buildStart)
    rows.append(
        (
            "load \(entries) entries in batches of 10,000",
            String(format: "%.1f s (%.0f/s)", buildTime, Double(entries) / buildTime)
        ))

    let openStart = clock.now
    let database = try SQLiteDatabase(path: path)
    let sequencer = try Sequencer(database: database, key: key, origin: origin)
    rows.append(
        (
            "reopen: rebuild the map and right edge from the stored leaves",
            String(format: "%.2f s", seconds(clock.now - openStart))
        ))
    rows.append(("resident memory after reopen (whole bench process)", residentMemory()))

    let latest = await sequencer.latestCheckpoint()
    var verifier = TransparencyVerifier(logKey: logKey)
    try verifier.accept(checkpoint: latest.note, consistencyProof: nil)

    // Lookup proofs for labels with one and two versions, and for an absent label.
    var rng = SystemRandomNumberGenerator()
    var proofs: [(Label, LookupProof)] = []
    var proofsWithInclusion: [(Label, LookupProof)] = []
    for _ in 0..<200 {
        let label = try Label("discovery/\(Int.random(in: 0..<labelCount, using: &rng))")
        proofs.append((label, try await sequencer.lookup(label).1))
        proofsWithInclusion.append((label, try await sequencer.lookup(label, withInclusion: true).1))
    }
    let absent: Label = "discovery/absent"
    let absentProof = try await sequencer.lookup(absent).1
    func sizes(_ list: [(Label, LookupProof)]) -> String {
        let counts = list.map { $0.1.encoded.count }
        return "mean \(counts.reduce(0, +) / counts.count) B, max \(counts.max()!) B"
    }
    rows.append(("lookup proof (64-byte value; membership + non-membership)", sizes(proofs)))
    rows.append(("lookup proof with the entry's log inclusion proof", sizes(proofsWithInclusion)))
    rows.append(("lookup proof for an absent label", "\(absentProof.encoded.count) B"))

    // The values identity-svc logs are larger than 64 bytes, and a lookup proof carries its entry (so the value):
    // one account's three bindings, at their real sizes, in the same 10^6-entry log.
    let handle = SecureRandom.bytes(count: 16).base64URLEncodedString()
    let realBindings: [(String, Label, Data)] = [
        ("discovery/<phone_id> (inbox 32 + X-Wing key 1216)", try Label("discovery/real-\(handle)"), Data(count: 1248)),
        ("account/<kt_handle> (hybrid signing key 1984)", try Label("account/\(handle)"), Data(count: 1984)),
        ("devices/<kt_handle> (roster commitment 32)", try Label("devices/\(handle)"), Data(count: 32)),
    ]
    _ = try await sequencer.integrate(realBindings.map { ($0.1, $0.2) })
    for (name, label, value) in realBindings {
        let size = try await sequencer.lookup(label).1.encoded.count
        rows.append(("lookup proof for \(name)", "\(size) B, of which the value \(value.count) B"))
    }
    rows.append(
        (
            "verify a lookup proof (decode + 2 map paths)",
            try timePerOperation(clock, proofs) { label, proof in
                guard try verifier.verifyLookup(try LookupProof(encoded: proof.encoded), for: label) != nil else {
                    throw BenchError("lookup verification returned no entry")
                }
            }
        ))
    rows.append(
        (
            "verify a lookup proof with log inclusion",
            try timePerOperation(clock, proofsWithInclusion) { label, proof in
                _ = try verifier.verifyLookup(try LookupProof(encoded: proof.encoded), for: label)
            }
        ))

    // Consistency proofs from a few older checkpoints to the latest.
    let size = latest.size
    var consistency: [(Checkpoint, ConsistencyProof)] = []
    for old in [size / 2, size - 10_000, size - 20_000, 10_000] where old > 0 && old < size {
        let checkpoint = try await sequencer.checkpoint(size: old)
        consistency.append((checkpoint, try await sequencer.consistencyProof(from: old, to: size)))
    }
    let consistencySizes = consistency.map { $0.1.encoded.count }
    rows.append(
        (
            "consistency proof to \(size) from sizes \(consistency.map(\.0.size))",
            "\(consistencySizes.map { "\($0) B" }.joined(separator: ", "))"
        ))
    rows.append(
        (
            "verify a consistency proof (checkpoint already parsed)",
            try timePerOperation(clock, consistency) { old, proof in
                guard proof.verify(oldRoot: old.logRoot, newRoot: latest.logRoot) else {
                    throw BenchError("consistency proof did not verify")
                }
            }
        ))
    rows.append(
        (
            "parse and verify a checkpoint (hybrid signature)",
            try timePerOperation(clock, [(latest, 0)]) { checkpoint, _ in
                _ = try Checkpoint(note: checkpoint.note, verifyingWith: logKey)
            }
        ))
    database.close()

    say("")
    say("| Key transparency, SQLite WAL, \(entries) entries | figure |")
    say("|---|---:|")
    for (name, figure) in rows { say("| \(name) | \(figure) |") }
}

private func seconds(_ duration: Duration) -> Double {
    let (s, attoseconds) = duration.components
    return Double(s) + Double(attoseconds) / 1e18
}

/// The mean time of `body` over `cases`, cycling through them for about half a second.
private func timePerOperation<A, B>(
    _ clock: ContinuousClock, _ cases: [(A, B)], _ body: (A, B) throws -> Void
)
    rethrows -> String
{
    for (a, b) in cases { try body(a, b) }
    var operations = 0
    let start = clock.now
    repeat {
        for (a, b) in cases { try body(a, b) }
        operations += cases.count
    } while clock.now - start < .milliseconds(500)
    let mean = seconds(clock.now - start) / Double(operations)
    return String(format: "%.1f µs", mean * 1e6)
}

/// VmRSS from /proc/self/status, or "?" off Linux.
private func residentMemory() -> String {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
    else { return "?" }
    return String(format: "%.0f MB", kilobytes / 1024)
}
