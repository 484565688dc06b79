import Foundation
import HTTPServer
import Processes
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
        let (process, output, input) = try Self.launch(["server"])
        defer {
            try? input.fileHandleForWriting.close()
            process.terminate()
            process.waitUntilExit()
        }
        let portLine = try await onThread { () -> String in
            var line = Data()
            while !line.contains(0x0A) {
                let byte = output.readData(ofLength: 1)
                if byte.isEmpty { break }
                line.append(byte)
            }
            return String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let port = try #require(UInt16(portLine), "the websockets server printed no port: '\(portLine)'")
        let socket = try await WebSocketClient.connect(port: port, path: "/", maximumMessageSize: 2 << 20)
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
}
