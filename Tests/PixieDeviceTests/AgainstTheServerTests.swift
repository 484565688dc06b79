import Foundation
import HTTPServer
import PixieDevice
import PixieWire
import Testing
import Transparency

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The device side against the real `pixie-server` binary, in another process. This target cannot import
/// PixieServer (it is not among its dependencies in Package.swift: PixieDevice, PixieWire, Transparency and
/// HTTPServer's WebSocket client), so what a device must agree on with the server (the trust bundle, the
/// checkpoint, the relay frames and subject proofs) comes from modules a device may link.
@Suite("A device-side client against the real pixie-server, without linking PixieServer")
struct AgainstTheServerTests {
    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
            "pixie-server")
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `pixie-server arguments` to completion; its standard output.
    static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure(description: "pixie-server \(arguments) failed") }
        return String(decoding: data, as: UTF8.self)
    }

    @Test("the shipped checkpoint verifies the live log, and a proven subject goes through the relay")
    func aDeviceTalksToTheServer() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary.path) else {
            throw Failure(description: "pixie-server is not built at \(Self.binary.path): swift build --build-tests")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pixie-device-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The app's trust bundle, made before the server ever ran (the empty log's checkpoint).
        let bundle = try JSONDecoder().decode(
            TrustBundle.self, from: Data(try Self.run(["trust-bundle", "--data-dir", directory.path]).utf8))
        var verifier = try TransparencyVerifier(trustBundle: bundle)

        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["--data-dir", directory.path, "--port", "0", "--relay-tokens", "insecure-dev"]
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        // The "listening" line names the port (a hang's limit of 120 s: the suite shares two cores).
        let port = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
            Thread.detachNewThread {
                var text = ""
                let deadline = Date().addingTimeInterval(120)
                while Date() < deadline {
                    let chunk = err.fileHandleForReading.availableData
                    if chunk.isEmpty { break }
                    text += String(decoding: chunk, as: UTF8.self)
                    if let range = text.range(of: #""address":"http://127.0.0.1:"#),
                        let port = Int(text[range.upperBound...].prefix { $0.isNumber })
                    {
                        return continuation.resume(returning: port)
                    }
                }
                continuation.resume(throwing: Failure(description: "pixie-server did not start: \(text)"))
            }
        }
        let base = URL(string: "http://127.0.0.1:\(port)")!

        // The log grew at start (the OPRF key list): its checkpoint must extend the shipped one.
        let (noteData, _) = try await URLSession.shared.data(from: base.appendingPathComponent("v1/kt/checkpoint"))
        let note = String(decoding: noteData, as: UTF8.self)
        let latest = try Checkpoint(note: note, verifyingWith: verifier.logKey)
        let from = try #require(verifier.pinned?.size)
        #expect(latest.size > from)
        var components = URLComponents(
            url: base.appendingPathComponent("v1/kt/consistency"), resolvingAgainstBaseURL: false)!
        components.queryItems = [.init(name: "from", value: "\(from)"), .init(name: "to", value: "\(latest.size)")]
        let (proofData, _) = try await URLSession.shared.data(from: components.url!)
        let proofText = try #require(
            (try JSONSerialization.jsonObject(with: proofData) as? [String: Any])?["proof"] as? String)
        let proof = try ConsistencyProof(encoded: try #require(Data(base64URLEncoded: proofText)))
        #expect(try verifier.accept(checkpoint: note, consistencyProof: proof).size == latest.size)

        // The relay: a subject this device owns, proven over the connection's CHALLENGE, and a SEND to it.
        let inbox = RelaySubjectKey()
        let listener = try await WebSocketClient.connect(port: UInt16(port), path: "/v1/relay")
        let sender = try await WebSocketClient.connect(port: UInt16(port), path: "/v1/relay")
        func next(_ socket: WebSocket) async throws -> RelayServerFrame {
            guard case .binary(let bytes)? = try await socket.receive() else {
                throw Failure(description: "the relay closed the connection")
            }
            return try RelayServerFrame(decoding: bytes)
        }
        guard case .challenge(let nonce) = try await next(listener), case .challenge = try await next(sender) else {
            throw Failure(description: "the relay's first frame was not a CHALLENGE")
        }
        try await listener.send(binary: try inbox.subscribe(requestID: 1, challenge: nonce).encoded())
        #expect(try await next(listener) == .ok(requestID: 1))
        let payload = Data("sealed".utf8)
        try await sender.send(
            binary: RelayClientFrame.send(
                requestID: 2, subject: inbox.subject, wake: .silent, token: Data("t1".utf8), payload: payload
            ).encoded())
        #expect(try await next(sender) == .ok(requestID: 2))
        #expect(try await next(listener) == .deliver(subject: inbox.subject, wake: .silent, payload: payload))
        await listener.close()
        await sender.close()
    }
}
