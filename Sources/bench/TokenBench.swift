import Foundation
import PixieServer
@_spi(Testing) import PrivacyPass
import Storage

/// Rate-limit tokens (issue 8): the VOPRF ristretto255-SHA512 on libsodium. Token mints per second for a batch
/// of 4 (client blind + issuer evaluate with one batched DLEQ proof + client finalize with proof verification,
/// through the wire encodings), and verifications per second (issuer Evaluate + constant-time compare). Each
/// figure is the best of `--rounds` rounds of `--seconds` each.
func tokenTable(_ options: Bench) throws {
    let issuer = TokenIssuer(privateKey: VOPRF.PrivateKey())
    let list = try KeyList(
        epoch: 1, entries: [try KeyList.Entry(publicKey: issuer.publicKey, notBefore: 0, notAfter: UInt64.max / 2)])
    let client = try TokenClient(publicKey: issuer.publicKey, keyList: list)
    let token = try {
        let (request, pending) = try client.begin(count: 1)
        return try client.finish(issuer.respond(to: request), pending: pending)[0]
    }()
    guard issuer.verify(token) else { throw BenchError("a freshly minted token does not verify") }

    var steps: (begin: Double, respond: Double, finish: Double) = (0, 0, 0)
    var batches = 0.0
    var verifications = 0.0
    let (request, pending) = try client.begin(count: 4)
    let response = try issuer.respond(to: request)
    for _ in 0..<options.rounds {
        batches = max(
            batches,
            try measure(seconds: options.seconds) {
                let (request, pending) = try client.begin(count: 4)
                let tokens = try client.finish(issuer.respond(to: request), pending: pending)
                guard tokens.count == 4 else { throw BenchError("a batch of 4 gave \(tokens.count) tokens") }
            })
        verifications = max(
            verifications,
            measure(seconds: options.seconds) {
                guard issuer.verify(token) else { fatalError("token verification failed during the benchmark") }
            })
        steps.begin = max(steps.begin, try measure(seconds: options.seconds / 3) { _ = try client.begin(count: 4) })
        steps.respond = max(
            steps.respond, try measure(seconds: options.seconds / 3) { _ = try issuer.respond(to: request) })
        steps.finish = max(
            steps.finish,
            try measure(seconds: options.seconds / 3) { _ = try client.finish(response, pending: pending) })
    }
    say("")
    say("| Tokens, VOPRF ristretto255-SHA512 (libsodium 1.0.18) | per second | per operation |")
    say("|---|---:|---:|")
    let row: (String, Double) -> Void = { name, rate in
        say("| \(name) | \(String(format: "%.0f", rate)) | \(String(format: "%.1f µs", 1e6 / rate)) |")
    }
    row("mint a batch of 4 (blind + evaluate with proof + finalize with verification)", batches)
    row("tokens minted (4 × the batch rate)", batches * 4)
    row("  client: blind 4 (begin)", steps.begin)
    row("  issuer: evaluate 4 + batched DLEQ proof (respond)", steps.respond)
    row("  client: verify proof + unblind 4 (finish)", steps.finish)
    row("verify a token (Evaluate + constant-time compare)", verifications)
    try spendRows(options, row: row)
}

/// What the relay pays per SEND: `CredentialTokenSpender.spend` on a SQLite file in WAL mode, for one token
/// at a time (window 1) and for bursts of 64 (pipelined frames: verified on every core, one transaction).
private func spendRows(_ options: Bench, row: (String, Double) -> Void) throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-spend-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    let keys = try ServiceKeys.loadOrCreate(in: directory.appendingPathComponent("keys"), logger: .discard)
    let database = try SQLiteDatabase(path: directory.appendingPathComponent("pixie.db").path)
    let spender = try CredentialTokenSpender(keys: keys, database: database, clock: .system, logger: .discard)
    let issuer = TokenIssuer(privateKey: keys.tokenOPRF)
    let list = try KeyList(
        epoch: 1, entries: [try KeyList.Entry(publicKey: issuer.publicKey, notBefore: 0, notAfter: UInt64.max / 2)])
    let client = try TokenClient(publicKey: issuer.publicKey, keyList: list)
    // Fresh tokens for more than one core can verify in a second (one at a time) plus two cores (bursts),
    // minted before the clock starts.
    let needed = Int(options.seconds * 40_000) + 1024
    var tokens: [Data] = []
    while tokens.count < needed {
        let (request, pending) = try client.begin(count: 64)
        tokens += try client.finish(issuer.respond(to: request), pending: pending).map(\.rawRepresentation)
    }
    var next = 0
    let single = try measure(seconds: options.seconds) {
        guard next < tokens.count, case .success = spender.spend([tokens[next]])[0] else {
            throw BenchError("a fresh token was not spent (or the bench ran out of tokens)")
        }
        next += 1
    }
    let bursts = try measure(seconds: options.seconds) {
        guard next + 64 <= tokens.count else { throw BenchError("the bench ran out of tokens") }
        let results = spender.spend(Array(tokens[next..<next + 64]))
        guard results.allSatisfy({ if case .success = $0 { true } else { false } }) else {
            throw BenchError("a fresh token of a burst was not spent")
        }
        next += 64
    }
    row("relay: spend one token (verify + insert in SQLite, WAL)", single)
    row("relay: spend a burst of 64, per token (verified on every core, one transaction)", bursts * 64)
}
