import Foundation
import PixieDevice
import PixieWire
import Synchronization
import Transparency

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct Failure: Error, CustomStringConvertible {
    let description: String
}

/// `pixie-server --data-dir DIR --port 0`, started as an operator runs it; the port comes from its "listening"
/// log line.
final class RunningServer: Sendable {
    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
            "pixie-server")
    }

    private let process: Process
    let port: Int
    var base: URL { URL(string: "http://127.0.0.1:\(port)")! }

    init(dataDirectory: URL) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary.path) else {
            throw Failure(description: "pixie-server is not built at \(Self.binary.path): swift build --build-tests")
        }
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["--data-dir", dataDirectory.path, "--port", "0", "--relay-tokens", "insecure-dev"]
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        // The "listening" line names the port (a hang's limit of 120 s: the suite shares two cores).
        do {
            port = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
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
                            continuation.resume(returning: port)
                            // Keep draining, so the server never blocks on a full pipe.
                            while !err.fileHandleForReading.availableData.isEmpty {}
                            return
                        }
                    }
                    continuation.resume(throwing: Failure(description: "pixie-server did not start: \(text)"))
                }
            }
        } catch {
            process.terminate()
            process.waitUntilExit()
            throw error
        }
        self.process = process
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// A device's HTTP calls in PixieWire's own types: request bodies encoded from them, answers decoded into them,
/// and refusals decoded as ``APIErrorResponse``.
struct WireClient {
    let base: URL

    struct Refusal: Error, CustomStringConvertible {
        let status: Int
        let body: APIErrorResponse
        var description: String { "\(status) \(body.error): \(body.reason)" }
    }

    func post<Answer: Decodable>(
        _ path: String, _ body: some Encodable, token: String? = nil, expect status: Int = 200
    ) async throws -> Answer {
        try await decode(try await send("POST", path, body: try JSONEncoder().encode(body), token: token), status)
    }

    func post<Answer: Decodable>(
        _ path: String, token: String? = nil, expect status: Int = 200
    ) async throws
        -> Answer
    {
        try await decode(try await send("POST", path, body: nil, token: token), status)
    }

    func get<Answer: Decodable>(_ path: String, token: String? = nil) async throws -> Answer {
        try await decode(try await send("GET", path, body: nil, token: token), 200)
    }

    /// A request the server must refuse: its status and error body.
    func failure(_ path: String, _ body: some Encodable, token: String? = nil) async throws -> Refusal {
        let (status, data) = try await send("POST", path, body: try JSONEncoder().encode(body), token: token)
        guard status >= 400 else { throw Failure(description: "\(path) answered \(status), not a refusal") }
        return Refusal(status: status, body: try JSONDecoder().decode(APIErrorResponse.self, from: data))
    }

    /// `label`'s entry, proven by the server's `POST /v1/kt/lookup` answer from `verifier`'s pinned checkpoint
    /// (which moves forward).
    func lookup(_ label: String, verifier: inout TransparencyVerifier) async throws -> Entry? {
        let answer: TransparencyAPI.LookupResponse = try await post(
            "/v1/kt/lookup", TransparencyAPI.LookupRequest(label: label, since: verifier.pinned?.size))
        return try verifier.verify(label: try Label(label), answer: try LookupAnswer(answer))
    }

    private func send(_ method: String, _ path: String, body: Data?, token: String?) async throws -> (Int, Data) {
        var request = URLRequest(url: base.appendingPathComponent(path))
        request.httpMethod = method
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = body
        }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw Failure(description: "not an HTTP response") }
        return (http.statusCode, data)
    }

    private func decode<Answer: Decodable>(_ answer: (Int, Data), _ expected: Int) async throws -> Answer {
        let (status, data) = answer
        guard status == expected else {
            if let refusal = try? JSONDecoder().decode(APIErrorResponse.self, from: data) {
                throw Refusal(status: status, body: refusal)
            }
            throw Failure(description: "answered \(status): \(String(decoding: data.prefix(300), as: UTF8.self))")
        }
        return try JSONDecoder().decode(Answer.self, from: data)
    }
}
