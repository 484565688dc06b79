import Foundation
import HTTPServer
import SiblingsTestSupport
import Synchronization
import Testing
import WebSockets

#if canImport(Glibc)
    import Glibc
#endif

/// What a test consumer saw: each call's messages, and how the connection ended.
final class ConsumerLog: Sendable {
    private struct State {
        var bursts: [[WebSocketMessage]] = []
        var endings: [WebSocketError?] = []
    }

    private let state = Mutex(State())
    private let ended = DispatchSemaphore(value: 0)

    func received(_ messages: [WebSocketMessage]) { state.withLock { $0.bursts.append(messages) } }

    func end(_ error: WebSocketError?) {
        state.withLock { $0.endings.append(error) }
        ended.signal()
    }

    var bursts: [[WebSocketMessage]] { state.withLock { $0.bursts } }
    var endings: [WebSocketError?] { state.withLock { $0.endings } }

    /// Blocks until ``end(_:)`` was called (false after 120 s: only a hang guard).
    func waitForEnd() -> Bool { ended.wait(timeout: .now() + 120) == .success }
}

/// A consumer that logs, and runs `react` with each burst on the reader thread.
struct LoggingConsumer: WebSocketConsumer {
    let log: ConsumerLog
    let socket: WebSocket
    var react: @Sendable (WebSocket, [WebSocketMessage]) -> Void = { _, _ in }

    func received(_ messages: [WebSocketMessage]) {
        log.received(messages)
        react(socket, messages)
    }

    func ended(_ error: WebSocketError?) { log.end(error) }
}

@Suite("WebSocket consumers (messages on the reader thread) and sends that never wait")
struct WebSocketConsumerTests {
    /// A server whose `/consume` logs to `log` and runs `react`.
    static func server(
        _ log: ConsumerLog, react: @escaping @Sendable (WebSocket, [WebSocketMessage]) -> Void = { _, _ in }
    ) throws -> HTTPServer {
        var router = Router()
        router.webSocket("/consume", maximumMessageSize: 1 << 20) { _, socket in
            LoggingConsumer(log: log, socket: socket, react: react)
        }
        return try HTTPServer(responder: router)
    }

    @Test("pipelined messages reach the consumer in bursts, in order; ended once, nil after a close handshake")
    func burstsInOrder() async throws {
        let log = ConsumerLog()
        let server = try Self.server(log) { socket, messages in
            // Echo how many messages this call carried.
            _ = try? socket.trySend(binaries: [Data("\(messages.count)".utf8)])
        }
        let (echoes, ended) = try await onThread { () -> ([Int], Bool) in
            let client = try RawWebSocket(port: server.port, path: "/consume")
            // 200 messages in one write: the reader gets them with a few reads, not 200.
            var bytes = Data()
            for index in 0..<200 { bytes += RawWebSocket.frame(0x2, Data("m\(index)".utf8)) }
            bytes += RawWebSocket.frame(0x1, Data("last".utf8))
            try client.send(bytes)
            var echoes: [Int] = []
            while echoes.reduce(0, +) < 201 {
                let frame = try client.readFrame()
                echoes.append(Int(String(decoding: frame.payload, as: UTF8.self)) ?? -1)
            }
            try client.send(RawWebSocket.frame(0x8, Data([0x03, 0xE8])))
            _ = try client.expectClose()
            return (echoes, log.waitForEnd())
        }
        #expect(ended)
        let messages = log.bursts.flatMap { $0 }
        #expect(messages == (0..<200).map { .binary(Data("m\($0)".utf8)) } + [.text("last")])
        #expect(echoes == log.bursts.map(\.count))
        #expect(log.bursts.count < 20, "200 pipelined messages took \(log.bursts.count) calls")
        #expect(log.bursts.allSatisfy { !$0.isEmpty })
        #expect(log.endings.count == 1)
        #expect(log.endings.first.map { $0 == nil } == true)
        await server.shutdown()
    }

    @Test("a peer that drops gives ended(error); one that breaks the protocol, its close code after its messages")
    func endings() async throws {
        let log = ConsumerLog()
        let server = try Self.server(log)
        try await onThread {
            let client = try RawWebSocket(port: server.port, path: "/consume")
            try client.send(RawWebSocket.frame(0x2, Data([1])))
            shutdown(client.fd, Int32(SHUT_RDWR))
            #expect(log.waitForEnd())
        }
        #expect(log.endings.count == 1)
        #expect(log.endings.first??.closeCode == nil)
        #expect(log.endings.first??.reason.contains("dropped") == true)
        #expect(log.bursts.flatMap { $0 } == [.binary(Data([1]))])

        let strict = ConsumerLog()
        let second = try Self.server(strict)
        let code = try await onThread { () -> UInt16? in
            let client = try RawWebSocket(port: second.port, path: "/consume")
            try client.send(RawWebSocket.frame(0x2, Data([7])) + RawWebSocket.frame(0x2, Data([8]), masked: false))
            let code = try client.expectClose()
            #expect(strict.waitForEnd())
            return code
        }
        #expect(code == 1002)
        #expect(strict.bursts.flatMap { $0 } == [.binary(Data([7]))])
        #expect(strict.endings.first??.closeCode == .protocolError)
        await server.shutdown()
        await second.shutdown()
    }

    @Test("trySend never waits for a peer that reads nothing; flush then writes everything, in order")
    func trySendKeepsWhatTheKernelDoesNotTake() async throws {
        let log = ConsumerLog()
        let accepted = Mutex<[Bool]>([])
        let flushed = DispatchSemaphore(value: 0)
        let server = try Self.server(log) { socket, _ in
            // The client reads nothing yet: send 64 KiB frames until the kernel stops taking them. A send that
            // waited for the peer would never return here (the test's hang guard would fail it).
            var index = 0
            while true {
                var frame = Data(count: 64 << 10)
                withUnsafeBytes(of: UInt32(index).bigEndian) { frame.replaceSubrange(0..<4, with: $0) }
                let all = (try? socket.trySend(binaries: [frame])) ?? false
                accepted.withLock { $0.append(all) }
                index += 1
                if !all { break }
            }
            // The rest is written by a writer that may wait.
            Thread.detachNewThread {
                try? socket.flush()
                flushed.signal()
            }
        }
        let (indices, flushDone) = try await onThread { () -> ([UInt32], Bool) in
            let client = try RawWebSocket(port: server.port, path: "/consume")
            try client.send(RawWebSocket.frame(0x2, Data([1])))
            // Wait until the server has filled the socket, then read every frame it queued.
            let deadline = Date() + 120  // only a hang guard: a send that waited for the peer never returns false
            while accepted.withLock({ $0.last != false }) {
                guard Date() < deadline else { throw RawClient.Failure(description: "trySend never returned false") }
                usleep(1000)
            }
            let total = accepted.withLock { $0.count }
            var indices: [UInt32] = []
            for _ in 0..<total {
                let frame = try client.readFrame()
                #expect(frame.payload.count == 64 << 10)
                indices.append(frame.payload.prefix(4).reduce(0) { $0 << 8 | UInt32($1) })
            }
            return (indices, flushed.wait(timeout: .now() + 120) == .success)
        }
        #expect(flushDone)
        #expect(indices == (0..<UInt32(indices.count)).map { $0 })
        #expect(indices.count >= 2, "the kernel took \(indices.count) frames before it was full")
        #expect(accepted.withLock { $0.dropLast().allSatisfy { $0 } })
        await server.shutdown()
    }

    @Test("startClosing sends the close and returns; our client's consumer hears the end; receive() is not for it")
    func startClosingAndClientConsumers() async throws {
        let log = ConsumerLog()
        let server = try Self.server(log) { socket, messages in
            if messages.contains(.text("bye")) { socket.startClosing(code: WebSocketCloseCode(4001), reason: "asked") }
        }
        let clientLog = ConsumerLog()
        let socket = try await WebSocketClient.connect(port: server.port, path: "/consume") { socket in
            LoggingConsumer(log: clientLog, socket: socket)
        }
        await #expect(throws: WebSocketError.self) { _ = try await socket.receive() }
        try await socket.send(text: "bye")
        #expect(try await onThread { clientLog.waitForEnd() })
        #expect(socket.closeCode == WebSocketCloseCode(4001))
        #expect(clientLog.endings.count == 1)
        #expect(clientLog.endings.first.map { $0 == nil } == true)
        #expect(try await onThread { log.waitForEnd() })
        #expect(log.endings.first.map { $0 == nil } == true)
        #expect(throws: WebSocketError.self) { _ = try socket.trySend(binaries: [Data([1])]) }
        await server.shutdown()
    }
}
