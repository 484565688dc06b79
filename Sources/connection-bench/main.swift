import CommandLineKit
import Foundation
import SiblingsCrypto
import WebSockets

/// `connection-bench`: the load client for many connections from one process and one thread (epoll, non-blocking
/// sockets, a small slot per connection), so the client costs little beside the server it loads.
/// scripts/bench-connections.sh runs `hold` against nats-server and pixie-server's relay and compares the memory
/// and threads each server spends per idle connection; `churn` opens and resets connections in cycles, to
/// reproduce a server that falls over when many WebSockets vanish at once.
struct ConnectionBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connection-bench",
        abstract: "Many connections from one epoll thread: idle connections held open, or opened and reset in cycles.",
        discussion: """
            Every connection goes to 127.0.0.1:<port> from one of --sources addresses in 127.0.0.0/8 (127.0.1.1, \
            127.0.1.2, ...), with at most --ramp handshakes in flight so the listen backlog is not overrun, and \
            30 seconds for each handshake. The soft RLIMIT_NOFILE is raised to the hard one; --connections plus 64 \
            must fit under it. Results are lines of key=value on standard output, for scripts.
            """,
        subcommands: [Hold.self, Churn.self])
}

struct Hold: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hold",
        abstract: "Open N connections to a relay (ws) or nats-server (nats) and hold them idle, answering pings.",
        discussion: """
            ws: an HTTP/1.1 upgrade to --path (status 101 and Sec-WebSocket-Accept checked); on --subscribe-fraction \
            of the connections one SUBSCRIBE to a random subject, which counts as up once the relay answers OK. \
            nats: INFO, then CONNECT (and SUB to a random subject on the fraction) and PING, up on PONG. Server \
            pings are answered while the connections are held.

            Standard output: a line `failure count=C reason="..."` for each reason handshakes failed (refused, \
            reset, the status line when it is not 101, timeout after 30 s, ...), then \
            `ready connected=N failed=M seconds=T` once every handshake has finished or failed. Then the connections \
            are held: for --hold-seconds when it is given, otherwise until SIGTERM or SIGINT (standard input is not \
            read). Then `closed count=C reason="..."` for each reason the server ended a held connection, \
            `still_open=X closed_by_server=Y`, and exit 0. A SIGTERM or SIGINT before `ready` prints \
            `interrupted connected=N failed=M` instead of `ready`.
            """)

    @Option(name: .long("protocol"), help: "ws (pixie-server's relay WebSocket) or nats (nats-server).")
    var wire: Wire
    @Option(name: .long("port"), help: "The server's port on 127.0.0.1.") var port: Int
    @Option(name: .long("connections"), help: "How many connections to open.") var connections: Int
    @Option(name: .long("path"), help: "The WebSocket endpoint (ws; default /v1/relay).") var path: String = "/v1/relay"
    @Option(
        name: .long("subscribe-fraction"),
        help: "Share of the connections that subscribe one random subject, 0 to 1 (default 1: every one, as a device "
            + "holds its inbox).")
    var subscribeFraction: Double = 1
    @Option(name: .long("sources"), help: "Source addresses in 127.0.0.0/8, 1 to 62500 (default 100).")
    var sources: Int = 100
    @OptionalOption(
        name: .long("hold-seconds"), help: "Seconds to hold the connections once up (default: until SIGTERM/SIGINT).")
    var holdSeconds: Double?
    @Option(name: .long("ramp"), help: "Handshakes in flight at most (default 200).") var ramp: Int = 200
    @Option(name: .long("handshake-timeout"), help: "Seconds each handshake gets (default 30).")
    var handshakeTimeout: Double = 30
    @OptionalOption(
        name: .long("tls-ca-file"),
        help: "Speak TLS (wss://, or NATS's TLS after INFO), trusting only the CA certificates in this PEM file; the "
            + "server's certificate must be for localhost.")
    var tlsCAFile: String?

    func validate() throws {
        try checkCommon(
            port: port, connections: connections, subscribeFraction: subscribeFraction, sources: sources, ramp: ramp,
            handshakeTimeout: handshakeTimeout, path: path)
        if let holdSeconds, !(holdSeconds >= 0) {
            throw ValidationError("--hold-seconds must be 0 or more, not \(holdSeconds)")
        }
    }

    func run() async throws {
        let plan = LoadPlan(
            wire: wire, port: UInt16(port), path: path, connections: connections,
            subscribeFraction: subscribeFraction, sources: sources, ramp: ramp, handshakeTimeout: handshakeTimeout,
            awaitSubscribeOK: true, tls: try tlsCAFile.map { try TLSContext(.client(trust: .caFile($0))) })
        let loop = try ConnectionLoop(plan: plan)
        let progress = ProgressBar(total: connections, label: "handshakes")
        loop.onHandshakeEnded = { progress.advance() }
        loop.reset()
        let seconds = try loop.establish()
        loop.onHandshakeEnded = nil
        progress.finish()
        for line in loop.failures.lines("failure") { say(line) }
        let counts = "connected=\(loop.connected) failed=\(loop.failed)"
        if loop.stopRequested {
            say("interrupted \(counts) seconds=\(String(format: "%.2f", seconds))")
        } else {
            say("ready \(counts) seconds=\(String(format: "%.2f", seconds))")
            try loop.hold(until: holdSeconds.map { monotonicNanoseconds() + UInt64($0 * 1e9) })
        }
        for line in loop.drops.lines("closed") { say(line) }
        say("still_open=\(loop.live) closed_by_server=\(loop.drops.total)")
        loop.closeAll(abruptly: false)
    }
}

struct Churn: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "churn",
        abstract: "Open N relay WebSockets, subscribe some, reset them all at once (RST); repeat for C cycles.",
        discussion: """
            Each cycle opens --connections WebSockets to the relay (upgrade to --path, 101 required), sends \
            SUBSCRIBE to a random subject on --subscribe-fraction of them and waits for the relay's OK (unless \
            --close-before-ok), then closes every one with SO_LINGER {on, 0}, so the relay sees RSTs, all at once, \
            and starts the next cycle. A second after the last cycle one more connection checks that the relay \
            still answers.

            Standard output: `cycle I connected=N failed=M closed_by_server=K seconds=T` after each cycle, then \
            `churn connected=N failed=M` and a `failure count=C reason="..."` line per reason. Exit status: 0 when \
            every handshake of every cycle got its 101 (and OK); 1 when some failed (standard error says how many \
            and why); 2 when a connection was refused, that is the server stopped answering: standard error says \
            "the server at 127.0.0.1:<port> stopped answering in cycle I".
            """)

    @Option(name: .long("port"), help: "The relay's port on 127.0.0.1.") var port: Int
    @Option(name: .long("connections"), help: "WebSockets per cycle.") var connections: Int
    @Option(name: .long("cycles"), help: "How many cycles.") var cycles: Int
    @Option(name: .long("path"), help: "The WebSocket endpoint (default /v1/relay).") var path: String = "/v1/relay"
    @Option(
        name: .long("subscribe-fraction"), help: "Share of the WebSockets that send SUBSCRIBE, 0 to 1 (default 0.5).")
    var subscribeFraction: Double = 0.5
    @Option(name: .long("sources"), help: "Source addresses in 127.0.0.0/8, 1 to 62500 (default 100).")
    var sources: Int = 100
    @Option(name: .long("ramp"), help: "Handshakes in flight at most (default 200).") var ramp: Int = 200
    @Option(name: .long("handshake-timeout"), help: "Seconds each handshake gets (default 30).")
    var handshakeTimeout: Double = 30
    @Flag(
        name: .long("close-before-ok"),
        help: "Reset right after SUBSCRIBE is written, without waiting for the relay's OK (RSTs race the subscribes).")
    var closeBeforeOK: Bool

    func validate() throws {
        try checkCommon(
            port: port, connections: connections, subscribeFraction: subscribeFraction, sources: sources, ramp: ramp,
            handshakeTimeout: handshakeTimeout, path: path)
        guard cycles >= 1 else { throw ValidationError("--cycles must be at least 1, not \(cycles)") }
    }

    func run() async throws {
        let plan = LoadPlan(
            wire: .ws, port: UInt16(port), path: path, connections: connections, subscribeFraction: subscribeFraction,
            sources: sources, ramp: ramp, handshakeTimeout: handshakeTimeout, awaitSubscribeOK: !closeBeforeOK)
        let loop = try ConnectionLoop(plan: plan)
        loop.stopOpeningOnRefusal = true
        var failures = Tally()
        var connected = 0
        var failed = 0
        for cycle in 1...cycles {
            loop.reset()
            let seconds = try loop.establish()
            connected += loop.connected
            failed += loop.failed
            failures.merge(loop.failures)
            say(
                "cycle \(cycle) connected=\(loop.connected) failed=\(loop.failed) "
                    + "closed_by_server=\(loop.drops.total) seconds=\(String(format: "%.2f", seconds))")
            loop.closeAll(abruptly: true)
            if loop.refusedSeen {
                report(connected: connected, failed: failed, failures: failures)
                warn("the server at 127.0.0.1:\(port) stopped answering in cycle \(cycle) (a connection was refused)")
                throw ExitCode(2)
            }
            if loop.stopRequested {
                report(connected: connected, failed: failed, failures: failures)
                warn("interrupted in cycle \(cycle)")
                throw ExitCode.failure
            }
        }

        // The relay may fall over a moment after the last resets: one more connection (no SUBSCRIBE), a second later.
        try await Task.sleep(for: .seconds(1))
        loop.reset(connections: 1, subscribeFraction: 0)
        _ = try loop.establish()
        let probed = loop.connected == 1
        let probeFailure = loop.failures.summary()
        loop.closeAll(abruptly: false)
        report(connected: connected, failed: failed, failures: failures)
        if loop.refusedSeen {
            warn("the server at 127.0.0.1:\(port) stopped answering after cycle \(cycles) (the probe was refused)")
            throw ExitCode(2)
        }
        if loop.stopRequested {
            warn("interrupted after cycle \(cycles), during the probe")
            throw ExitCode.failure
        }
        if !probed { warn("the probe connection after cycle \(cycles) failed: \(probeFailure)") }
        guard failed == 0 else {
            warn("\(failed) of \(connected + failed) handshakes failed: \(failures.summary())")
            throw ExitCode.failure
        }
        guard probed else { throw ExitCode.failure }
    }

    private func report(connected: Int, failed: Int, failures: Tally) {
        say("churn connected=\(connected) failed=\(failed)")
        for line in failures.lines("failure") { say(line) }
    }
}

/// The checks `hold` and `churn` share.
func checkCommon(
    port: Int, connections: Int, subscribeFraction: Double, sources: Int, ramp: Int, handshakeTimeout: Double,
    path: String
) throws {
    guard (1...65_535).contains(port) else { throw ValidationError("--port must be 1 to 65535, not \(port)") }
    guard connections >= 1 else { throw ValidationError("--connections must be at least 1, not \(connections)") }
    guard connections < Int(UInt32.max) else { throw ValidationError("--connections is too large: \(connections)") }
    guard (0...1).contains(subscribeFraction) else {
        throw ValidationError("--subscribe-fraction must be 0 to 1, not \(subscribeFraction)")
    }
    guard (1...62_500).contains(sources) else {
        throw ValidationError("--sources must be 1 to 62500 (127.0.1.1 to 127.0.250.250), not \(sources)")
    }
    guard ramp >= 1 else { throw ValidationError("--ramp must be at least 1, not \(ramp)") }
    guard handshakeTimeout > 0, handshakeTimeout <= 86_400 else {
        throw ValidationError("--handshake-timeout must be more than 0 and at most 86400 seconds")
    }
    guard path.hasPrefix("/"), !path.utf8.contains(where: { $0 == 0x20 || $0 == 0x0D || $0 == 0x0A }) else {
        throw ValidationError("--path must start with / and hold no spaces or line breaks, not \(path)")
    }
}

await ConnectionBench.main()
