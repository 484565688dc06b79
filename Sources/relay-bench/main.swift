import CommandLineKit
import Foundation
import HTTPServer
import PixieServer
import PixieWire
@_spi(Testing) import PrivacyPass
import SiblingsCrypto
import Synchronization
import WebSockets

/// `relay-bench`: token-gated relay sends between two connected clients beside raw NATS pub/sub, the same
/// driver for both: one publisher, one subscriber, 1 KiB messages, at most `--window` in flight, each
/// message carrying its send time so the subscriber measures delivery latency. scripts/bench-relay.sh starts
/// nats-server and pixie-server (`relay_tokens=insecure-dev`) and runs this; docs/benchmarks.md records a run.
/// With `--credential-relay-port` and `--credential-data-dir`, a third row: a relay that verifies every token as
/// credential-svc's (VOPRF under the key in that data directory, spent once in its SQLite store), with tokens this
/// driver mints beforehand under the same key. With `--bus-relay-ports A,B`, two more rows: two relays on one NATS bus
/// (`relay_nats_url`, insecure-dev tokens), first with both clients on A (within a node), then with the publisher on A
/// and the subscriber on B (across nodes, each frame through nats-server).
struct RelayBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-bench",
        abstract: "Relay SEND→DELIVER beside raw NATS pub/sub: messages/s, p50 and p99 latency.")

    @Option(name: .long("relay-port"), help: "pixie-server's port (relay running with relay_tokens=insecure-dev).")
    var relayPort: Int
    @Option(name: .long("nats-port"), help: "nats-server's port.") var natsPort: Int
    @Option(name: .long("count"), help: "Messages per measured run (default 20000).") var count: Int = 20_000
    @Option(name: .long("size"), help: "Payload bytes (default 1024).") var size: Int = 1024
    @Option(name: .long("window"), help: "Messages in flight at most (default 64).") var window: Int = 64
    @OptionalOption(
        name: .long("credential-relay-port"), help: "A relay running with relay_tokens=credential (the default).")
    var credentialRelayPort: Int?
    @OptionalOption(name: .long("credential-data-dir"), help: "That relay's --data-dir (for its token key).")
    var credentialDataDir: String?
    @OptionalOption(
        name: .long("bus-relay-ports"),
        help: "Two relays on one NATS bus (relay_tokens=insecure-dev), as A,B: within A, then across A to B.")
    var busRelayPorts: String?
    @OptionalOption(name: .long("tls-relay-port"), help: "A relay serving TLS itself (insecure-dev tokens).")
    var tlsRelayPort: Int?
    @OptionalOption(name: .long("tls-nats-port"), help: "A nats-server requiring TLS.") var tlsNatsPort: Int?
    @OptionalOption(
        name: .long("tls-ca-file"), help: "The CA (PEM) both TLS servers' certificates (for localhost) chain to.")
    var tlsCAFile: String?

    /// `--bus-relay-ports` as two ports.
    var busPorts: (Int, Int)? {
        get throws {
            guard let busRelayPorts else { return nil }
            let ports = busRelayPorts.split(separator: ",").compactMap { Int($0) }
            guard ports.count == 2, ports.allSatisfy({ (1...65_535).contains($0) }) else {
                throw ValidationError("--bus-relay-ports must be two ports, as 8081,8082")
            }
            return (ports[0], ports[1])
        }
    }

    func validate() throws {
        _ = try busPorts
        guard (1...65_535).contains(relayPort), (1...65_535).contains(natsPort) else {
            throw ValidationError("--relay-port and --nats-port must be ports")
        }
        guard count >= 100, size >= 8, window >= 1 else {
            throw ValidationError("--count must be at least 100, --size at least 8, --window at least 1")
        }
    }

    func run() async throws {
        var rows: [(String, Result)] = []
        var transports: [(String, Transport)] = [
            ("raw NATS pub/sub (libnats)", .nats(natsPort, nil)),
            ("relay, one node, in-process bus (insecure-dev tokens)", .relay(relayPort, relayPort, nil, nil)),
        ]
        if let tlsCAFile {
            let tls = try TLSContext(.client(trust: .caFile(tlsCAFile)))
            if let tlsRelayPort {
                transports.append(
                    (
                        "relay over TLS (wss://), one node (insecure-dev tokens)",
                        .relay(tlsRelayPort, tlsRelayPort, nil, tls)
                    ))
            }
            if let tlsNatsPort {
                transports.append(("raw NATS pub/sub over TLS (libnats)", .nats(tlsNatsPort, tlsCAFile)))
            }
        }
        if let (a, b) = try busPorts {
            transports.append(("relay on the NATS bus, within one node (insecure-dev tokens)", .relay(a, a, nil, nil)))
            transports.append(("relay on the NATS bus, across two nodes (insecure-dev tokens)", .relay(a, b, nil, nil)))
        }
        if let credentialRelayPort, let credentialDataDir {
            let keys = try ServiceKeys.loadOrCreate(
                in: URL(fileURLWithPath: credentialDataDir).appendingPathComponent("keys"), logger: .discard)
            let tokens = try mint(min(count, 2000) + count, under: keys.tokenOPRF)
            transports.append(
                (
                    "relay, credential-svc tokens (VOPRF verified, spent in SQLite)",
                    .relay(credentialRelayPort, credentialRelayPort, tokens, nil)
                ))
        }
        for (name, transport) in transports {
            _ = try await measure(transport, count: min(count, 2000))  // warm-up
            rows.append((name, try await measure(transport, count: count)))
        }
        say("| transport | messages/s | p50 latency | p99 latency |")
        say("|---|---:|---:|---:|")
        for (name, result) in rows {
            say(
                "| \(name) | \(Int(result.rate)) | \(String(format: "%.0f µs", result.p50)) | "
                    + "\(String(format: "%.0f µs", result.p99)) |")
        }
        for (name, result) in rows.dropFirst() {
            say(
                "\n\(name) / NATS throughput: \(String(format: "%.2f", result.rate / rows[0].1.rate)) "
                    + "(\(count) messages of \(size) bytes, window \(window))")
        }
    }

    /// `count` tokens minted under `key`, as credential-svc's issuance would give them (in batches of 64).
    func mint(_ count: Int, under key: VOPRF.PrivateKey) throws -> TokenSupply {
        let issuer = TokenIssuer(privateKey: key)
        let list = try KeyList(
            epoch: 1, entries: [try KeyList.Entry(publicKey: key.publicKey, notBefore: 0, notAfter: UInt64.max / 2)])
        let client = try TokenClient(publicKey: key.publicKey, keyList: list)
        var tokens: [Data] = []
        while tokens.count < count {
            let (request, pending) = try client.begin(count: min(64, count - tokens.count))
            tokens += try client.finish(try issuer.respond(to: request), pending: pending).map(\.rawRepresentation)
        }
        return TokenSupply(tokens)
    }

    /// Tokens handed out once each, in order.
    final class TokenSupply: Sendable {
        private let tokens: Mutex<[Data]>
        init(_ tokens: [Data]) { self.tokens = Mutex(tokens.reversed()) }
        func next() throws -> Data {
            guard let token = tokens.withLock({ $0.popLast() }) else { throw BenchError("out of minted tokens") }
            return token
        }
    }

    enum Transport {
        /// nats-server on this port, with TLS (trusting this CA file) or without.
        case nats(Int, String?)
        /// The publisher's relay port, the subscriber's (the same port, or another node's on the same bus), a
        /// supply of real tokens (nil for insecure-dev's random ones), and TLS (wss://) or nil.
        case relay(Int, Int, TokenSupply?, TLSContext?)
    }

    struct Result {
        let rate: Double
        let p50: Double
        let p99: Double
    }

    func measure(_ transport: Transport, count: Int) async throws -> Result {
        let recorder = Recorder(count: count, window: window)
        let publish: @Sendable (Data) async throws -> Void
        let finish: @Sendable () async -> Void
        switch transport {
        case .nats(let port, let caFile):
            let link = try NATSLink(
                port: port, caFile: caFile, subject: "bench.\(UUID().uuidString)", recorder: recorder)
            publish = { try link.publish($0) }
            finish = { link.close() }
        case .relay(let sendPort, let receivePort, let supply, let tls):
            let host = tls == nil ? "127.0.0.1" : "localhost"
            // The subscriber holds the subject's key: only it may SUBSCRIBE (self-certifying subjects).
            let key = RelaySubjectKey()
            let subject = key.subject
            // Both clients take their messages on their loop threads, as libnats' subscriber callback does.
            let subscribed = Subscribed()
            let challenged = Challenged()
            let relayPath = PixieAPI.relayConnect.target()
            let receiver = try await WebSocketClient.connect(
                host: host, port: UInt16(receivePort), path: relayPath, tls: tls
            ) { _ in
                Consumer { bytes in
                    switch try? RelayServerFrame(decoding: bytes) {
                    case .deliver(_, _, let payload)?: recorder.received(payload)
                    case .challenge(let nonce)?: challenged.set(nonce)
                    case .ok(0)?: subscribed.signal()
                    default: recorder.fail("the relay sent the subscriber something else than OK or DELIVER")
                    }
                }
            }
            let sender = try await WebSocketClient.connect(
                host: host, port: UInt16(sendPort), path: relayPath, tls: tls
            ) { _ in
                Consumer { bytes in
                    if case .error(_, let code, let reason)? = try? RelayServerFrame(decoding: bytes) {
                        recorder.fail("the relay refused a SEND: \(code): \(reason)")
                    }
                }
            }
            guard let challenge = await challenged.wait() else { throw BenchError("the relay sent no CHALLENGE") }
            try await receiver.send(binary: try key.subscribe(requestID: 0, challenge: challenge).encoded())
            guard await subscribed.wait() else { throw BenchError("the relay did not accept SUBSCRIBE") }
            let counter = Atomic<UInt32>(0)
            publish = { payload in
                let id = counter.add(1, ordering: .relaxed).newValue
                // insecure-dev accepts any fresh token once: 16 random bytes.
                let token = try supply?.next() ?? Data((0..<16).map { _ in UInt8.random(in: 0...255) })
                try await sender.send(
                    binary: RelayClientFrame.send(
                        requestID: id, subject: subject, wake: .silent, token: token, payload: payload
                    ).encoded())
            }
            finish = {
                await sender.close()
                await receiver.close()
            }
        }
        var payload = Data(count: size)
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<count {
            await recorder.acquire()
            let now = DispatchTime.now().uptimeNanoseconds
            withUnsafeBytes(of: now) { payload.replaceSubrange(0..<8, with: $0) }
            try await publish(payload)
        }
        try await recorder.done()
        let elapsed = Double(recorder.lastArrival - start) / 1e9
        await finish()
        let latencies = recorder.latencies.sorted()
        return Result(
            rate: Double(count) / elapsed, p50: latencies[count / 2] / 1000,
            p99: latencies[min(count - 1, count * 99 / 100)] / 1000)
    }
}

/// A client's WebSocketConsumer: each binary message to `take`, on the reader thread.
struct Consumer: WebSocketConsumer {
    let take: @Sendable (Data) -> Void

    func received(_ messages: [WebSocketMessage]) {
        for case .binary(let bytes) in messages { take(bytes) }
    }

    func ended(_ error: WebSocketError?) {}
}

/// The subscriber's OK to SUBSCRIBE, awaited once (false after 10 s).
final class Subscribed: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)

    func signal() { semaphore.signal() }

    func wait() async -> Bool {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: self.semaphore.wait(timeout: .now() + 10) == .success)
            }
        }
    }
}

/// The relay's CHALLENGE nonce, handed from the subscriber's loop thread to the driver.
final class Challenged: Sendable {
    private let nonce = Mutex<Data?>(nil)
    private let semaphore = DispatchSemaphore(value: 0)

    func set(_ value: Data) {
        nonce.withLock { $0 = value }
        semaphore.signal()
    }

    func wait() async -> Data? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let arrived = self.semaphore.wait(timeout: .now() + 10) == .success
                continuation.resume(returning: arrived ? self.nonce.withLock { $0 } : nil)
            }
        }
    }
}

/// Counts arrivals, records latencies, and bounds the messages in flight.
final class Recorder: Sendable {
    private struct State {
        var permits: Int
        var waiter: CheckedContinuation<Void, Never>?
        var latencies: [Double] = []
        var lastArrival: UInt64 = 0
        var finished: CheckedContinuation<Void, any Error>?
        var failure: String?
    }

    private let state: Mutex<State>
    private let count: Int

    init(count: Int, window: Int) {
        self.count = count
        state = Mutex(State(permits: window))
        state.withLock { $0.latencies.reserveCapacity(count) }
    }

    /// Waits for a free place in the window.
    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let go = state.withLock { state -> Bool in
                if state.failure != nil { return true }
                if state.permits > 0 {
                    state.permits -= 1
                    return true
                }
                state.waiter = continuation
                return false
            }
            if go { continuation.resume() }
        }
    }

    func received(_ payload: Data) {
        let now = DispatchTime.now().uptimeNanoseconds
        var sent: UInt64 = 0
        withUnsafeMutableBytes(of: &sent) { $0.copyBytes(from: payload.prefix(8)) }
        let (waiter, finished) = state.withLock { state in
            state.latencies.append(Double(now &- sent))
            state.lastArrival = now
            let finished = state.latencies.count == count ? state.finished.take() : nil
            if let waiter = state.waiter.take() { return (Optional(waiter), finished) }
            state.permits += 1
            return (nil, finished)
        }
        waiter?.resume()
        finished?.resume()
    }

    /// Returns once every message has arrived; throws when a client saw something wrong.
    func done() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let (already, failure) = state.withLock { state -> (Bool, String?) in
                if state.latencies.count >= count || state.failure != nil { return (true, state.failure) }
                state.finished = continuation
                return (false, nil)
            }
            if already { continuation.resume(with: failure.map { .failure(BenchError($0)) } ?? .success(())) }
        }
    }

    /// Ends the run with `reason` (the relay refused a frame, or sent one the driver did not expect).
    func fail(_ reason: String) {
        let (waiter, finished) = state.withLock { state in
            if state.failure == nil { state.failure = reason }
            return (state.waiter.take(), state.finished.take())
        }
        waiter?.resume()
        finished?.resume(throwing: BenchError(reason))
    }

    var latencies: [Double] { state.withLock { $0.latencies } }
    var lastArrival: UInt64 { state.withLock { $0.lastArrival } }
}

/// A publisher and a subscriber connection to nats-server, through the relay bus's own libnats wrapper
/// (``PixieServer/NATSConnection``).
final class NATSLink: Sendable {
    private let publisher: NATSConnection
    private let subscriber: NATSConnection
    private let subscription: NATSSubscription
    private let subject: String

    init(port: Int, caFile: String?, subject: String, recorder: Recorder) throws {
        self.subject = subject
        // With TLS the certificate is checked for the URL's host: localhost.
        let url = caFile == nil ? "nats://127.0.0.1:\(port)" : "nats://localhost:\(port)"
        // Each publish is written at once (no batching by libnats' flusher), as the relay client writes each frame.
        publisher = try NATSConnection(url: url, sendImmediately: true, tlsCAFile: caFile)
        subscriber = try NATSConnection(url: url, sendImmediately: true, tlsCAFile: caFile)
        subscription = try subscriber.subscribe(subject) { recorder.received($0) }
        try subscriber.flush(timeout: .seconds(5))
    }

    func publish(_ payload: Data) throws { try publisher.publish(payload, to: subject) }

    func close() { subscription.cancel() }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

await RelayBench.main()
