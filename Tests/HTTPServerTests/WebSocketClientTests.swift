import Foundation
import HTTPServer
import Processes
import SiblingsCrypto
import SiblingsTestSupport
import Testing
import WebSockets

/// Interop with the Python `websockets` package (Tests/Reference/websocket_interop.py in the project's
/// venv; see ``ReferenceOracle/python()``). Without the venv these tests fail saying how to install it.
@Suite("WebSocket interop with Python websockets")
struct WebSocketClientTests {
    static let script = Vectors.packageRoot.appendingPathComponent("Tests/Reference/websocket_interop.py").path

    /// Runs the script with `arguments`; its standard output is returned, its standard error is passed
    /// through. Its standard input is a pipe this process holds: the server mode exits when it closes.
    static func launch(_ arguments: [String]) throws -> (ChildProcess, FileHandle, Pipe) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try ReferenceOracle.python())
        process.arguments = [script] + arguments
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        return (process, output.fileHandleForReading, input)
    }

    @Test("websockets' client against our server: text, binary, 1 MiB, ping, close codes both ways")
    func theirClientOurServer() async throws {
        let server = try WebSocketTests.start()
        let (process, output, _) = try Self.launch(["client", String(server.port)])
        let text = try await onThread {
            let data = output.readDataToEndOfFile()
            process.waitUntilExit()
            return String(decoding: data, as: UTF8.self)
        }
        #expect(process.terminationStatus == 0, "websocket_interop.py client failed; its error output says why")
        #expect(text.contains(#""ok": true"#))
        await server.shutdown()
    }

    @Test("our client against a websockets server: text, binary, 1 MiB, close")
    func ourClientTheirServer() async throws {
        let (process, input, port) = try await Self.echoServer()
        defer {
            try? input.fileHandleForWriting.close()
            process.terminate()
            process.waitUntilExit()
        }
        let socket = try await WebSocketClient.connect(port: port, path: "/", maximumMessageSize: 2 << 20)
        try await Self.echoes(socket)
    }

    /// Text, binary and 1 MiB echoed, then a close with 4003.
    static func echoes(_ socket: WebSocket) async throws {
        try await socket.send(text: "héllo")
        #expect(try await socket.receive() == .text("héllo"))
        try await socket.send(binary: Data([0, 1, 2, 255]))
        #expect(try await socket.receive() == .binary(Data([0, 1, 2, 255])))
        let big = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        try await socket.send(binary: big)
        #expect(try await socket.receive() == .binary(big))
        await socket.close(code: WebSocketCloseCode(4003), reason: "done")
        #expect(socket.closeCode == WebSocketCloseCode(4003))
    }

    /// A websockets echo server (over TLS with `tls`'s chain and key), and its port.
    static func echoServer(tls: (String, String)? = nil) async throws -> (ChildProcess, Pipe, UInt16) {
        let (process, output, input) = try Self.launch(["server"] + (tls.map { [$0.0, $0.1] } ?? []))
        let portLine = try await onThread { () -> String in
            var line = Data()
            while !line.contains(0x0A) {
                let byte = output.readData(ofLength: 1)
                if byte.isEmpty { break }
                line.append(byte)
            }
            return String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        guard let port = UInt16(portLine) else {
            process.terminate()
            throw WebSocketError("the websockets server printed no port: '\(portLine)'")
        }
        return (process, input, port)
    }

    @Test(
        "our client over TLS (wss://) against a websockets server with the test CA's certificate, by name and address")
    func ourClientTheirServerOverTLS() async throws {
        let certificates = try TestCertificates()
        let (process, input, port) = try await Self.echoServer(
            tls: (certificates.path("server.pem"), certificates.path("server.key")))
        defer {
            try? input.fileHandleForWriting.close()
            process.terminate()
            process.waitUntilExit()
        }
        let tls = try TLSContext(
            .client(trust: .caFile(certificates.path("ca.pem")), pinnedKeys: [certificates.serverPin]))
        for host in ["localhost", "127.0.0.1"] {
            let socket = try await WebSocketClient.connect(
                host: host, port: port, path: "/", maximumMessageSize: 2 << 20, tls: tls)
            try await Self.echoes(socket)
        }
        // The system's store does not hold the test CA: refused, saying so, before any byte of WebSocket.
        do {
            _ = try await WebSocketClient.connect(host: "localhost", port: port, tls: try TLSContext(.client()))
            Issue.record("a certificate of a CA the system does not trust was accepted")
        } catch let error as TLSError {
            #expect(error.kind == .untrusted, "\(error)")
        }
    }

    @Test("wss:// to a plain ws:// server, and to one that stalls in the handshake: each a clear error, in time")
    func tlsFailures() async throws {
        let certificates = try TestCertificates()
        let tls = try TLSContext(.client(trust: .caFile(certificates.path("ca.pem"))))
        let (process, input, port) = try await Self.echoServer()
        defer {
            try? input.fileHandleForWriting.close()
            process.terminate()
            process.waitUntilExit()
        }
        do {
            _ = try await WebSocketClient.connect(
                host: "127.0.0.1", port: port, handshakeTimeout: .seconds(5), tls: tls)
            Issue.record("a plain server completed a TLS handshake")
        } catch let error as TLSError {
            #expect(error.kind == .notTLS || error.kind == .closed, "\(error)")
        }
        // A server that accepts the connection and never answers: the handshake gives up at its timeout.
        let (listener, stalled) = try Loopback.silentListener()
        defer { close(listener) }
        let started = ContinuousClock.now
        do {
            _ = try await WebSocketClient.connect(
                host: "127.0.0.1", port: UInt16(stalled), handshakeTimeout: .milliseconds(300), tls: tls)
            Issue.record("a silent server completed a TLS handshake")
        } catch let error as WebSocketError {
            #expect(error.reason.contains("TLS handshake"), "\(error)")
        }
        #expect(ContinuousClock.now - started < .seconds(10))
    }
}
